// Hostile builds end to end (docs/security.md): one real qgated on the CPU backend is handed kernel
// builds that try to fool the gate rather than fail by accident. A build that writes its own PASSED
// records never passes; one that prints to stdout is its own log, not a broken stream; one whose
// background thread burns a core while it is idle cannot slow the other arm, because the idle arm
// is frozen while the other is timed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "daemon_under_test.h"

using namespace qgate::testing;
using nlohmann::json;

namespace {

json verdict_of(const json& job) {
  return job.contains("verdict") && job["verdict"].is_object() ? job["verdict"] : json::object();
}

class HostileBuilds : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    ASSERT_TRUE(d_.try_start({}, "", &why)) << why;
  }
  DaemonUnderTest d_;
  const std::string parity_ = "--kind parity --parity-shapes quick";
};

}  // namespace

TEST_F(HostileBuilds, ABuildThatForgesItsRecordsNeverPasses) {
  auto e = run_job(d_, QGATE_FAULT_FORGED_RECORDS, "forged-records", parity_);
  EXPECT_NE(e.watch_code, 0) << "a forged sweep must never pass";
  const json verdict = verdict_of(e.job);
  EXPECT_NE(verdict.value("verdict", ""), "VERDICT_PASS") << e.job.dump();
  EXPECT_EQ(verdict.value("parity_passed", 0), 0) << "no forged case may count as passed";
  EXPECT_EQ(e.job.value("disposition", ""), "DISPOSITION_INCORRECT") << e.job.dump();
  EXPECT_NE(e.job.value("disposition_detail", "").find("judge's channel"), std::string::npos)
      << e.job.dump();
  // The daemon serves on, and the reference build still passes after it.
  auto ref = run_job(d_, QGATE_REF_LIBRARY, "ref", parity_);
  EXPECT_EQ(ref.watch_code, 0) << ref.job.dump();
  EXPECT_EQ(verdict_of(ref.job).value("parity_passed", 0), 192) << ref.job.dump();
}

TEST_F(HostileBuilds, ABuildThatPrintsToStdoutIsJudgedOnItsOutputs) {
  auto e = run_job(d_, QGATE_FAULT_CHATTY_STDOUT, "chatty-stdout", parity_);
  EXPECT_EQ(e.watch_code, 0) << e.job.dump();
  EXPECT_EQ(verdict_of(e.job).value("verdict", ""), "VERDICT_PASS") << e.job.dump();
  EXPECT_EQ(verdict_of(e.job).value("parity_passed", 0), 192) << e.job.dump();
  EXPECT_EQ(e.job.value("disposition", ""), "DISPOSITION_OK") << e.job.dump();
  // What it printed is in its worker's log.
  EXPECT_NE(slurp(d_.dir() + "/logs/job-" + std::to_string(e.job["id"].get<int64_t>()) + "-parity.log")
                .find("chatty build: qgate_gemm_run"),
            std::string::npos);
}

TEST_F(HostileBuilds, AnIdleArmsBackgroundThreadCannotTiltTheOtherArm) {
  // The reference build, uploaded as the baseline.
  auto ref = run_job(d_, QGATE_REF_LIBRARY, "ref", "--kind parity --parity-shapes quick");
  ASSERT_EQ(ref.watch_code, 0) << ref.job.dump();
  // The spinner computes exactly what the reference computes. Unfrozen, its idle thread takes one
  // of the two cores the reference arm's timed runs use, and the spinner reads about 1.5-2x faster.
  auto e = run_job(d_, QGATE_FAULT_IDLE_SPINNER, "idle-spinner",
                   "--baseline ref --profile cpu-tiny --parity-shapes none --min-pairs 12 --max-pairs 12 --reps 9 "
                   "--threshold 0.25");
  const json verdict = verdict_of(e.job);
  ASSERT_TRUE(verdict.contains("ratio")) << e.job.dump();
  const double ratio = verdict["ratio"].get<double>();
  std::printf("idle spinner against the reference, idle arm frozen: ratio %.3f\n", ratio);
  // The A/A noise of this 2-core CPU's runs (docs/ab-statistics.md): 10-20% on short runs.
  EXPECT_GT(ratio, 0.8) << e.job.dump();
  EXPECT_LT(ratio, 1.25) << "the idle arm's thread tilted the other arm: " << e.job.dump();
}

TEST_F(HostileBuilds, ATimedRunOfABuildThatNeverWritesYIsIncorrect) {
  // No parity sweep in an `ab` job: only the timed runs' poisoned outputs can catch it.
  auto e = run_job(d_, QGATE_FAULT_UNWRITTEN_OUTPUT, "unwritten-ab", "--kind ab --profile cpu-tiny --max-pairs 4");
  EXPECT_NE(e.watch_code, 0) << e.job.dump();
  EXPECT_EQ(e.job.value("disposition", ""), "DISPOSITION_INCORRECT") << e.job.dump();
  EXPECT_NE(e.job.value("disposition_detail", "").find("the build did not write y"), std::string::npos)
      << e.job.dump();
}

TEST_F(HostileBuilds, ABuildThatKillsTheDaemonStopsAfterTheAttemptCap) {
  // The sandbox would stop the kill itself (Landlock's signal scope): this is the cap behind it.
  ASSERT_TRUE(d_.terminate(std::chrono::seconds(20)));
  std::string why;
  ASSERT_TRUE(d_.try_start({"--worker-sandbox", "off"}, "", &why)) << why;
  const auto submitted = d_.cli("--json submit --build " + std::string(QGATE_FAULT_KILL_PARENT) +
                                " --name kill-parent --kind parity --parity-shapes quick");
  ASSERT_EQ(submitted.code, 0) << submitted.err;
  const int64_t id = json_data(submitted, "submission")["job_id"].get<int64_t>();
  // The build kills qgated twice, once per run of its job; each time the daemon is started again, as
  // its supervisor would.
  for (int death = 1; death <= 2; ++death) {
    ASSERT_TRUE(d_.wait_for_exit(std::chrono::seconds(60))) << "death " << death << ": qgated is still up\n" << d_.log();
    std::string again;
    ASSERT_TRUE(d_.try_start({"--worker-sandbox", "off"}, "", &again)) << again;
  }
  EXPECT_NE(d_.log().find("job " + std::to_string(id) + " was running when the daemon stopped; 2 daemons have died under it"),
            std::string::npos)
      << d_.log();
  const json job = show(d_, id);
  EXPECT_EQ(state_of(job), "JOB_STATE_FAILED") << job.dump();
  EXPECT_EQ(job.value("disposition", ""), "DISPOSITION_CRASHED") << job.dump();
  EXPECT_NE(job.value("disposition_detail", "").find("the daemon died 2 times while this job ran"),
            std::string::npos)
      << job.dump();
  // Not run a third time: the daemon stays up and serves.
  EXPECT_FALSE(d_.wait_for_exit(std::chrono::seconds(3))) << "the build ran again and took qgated down";
  EXPECT_EQ(d_.cli("--json device").code, 0);
}

// A client that opens connections until the daemon runs out of descriptors. The gRPC Debian ships
// stops accepting for good after one EMFILE; qgated's own accept loop must answer again once the
// connections are gone.
TEST(HostileClients, AfterDescriptorExhaustionTheDaemonAnswersAgainWithin10s) {
  DaemonUnderTest d;
  d.in_child = [] {
    const struct rlimit files = {96, 96};
    setrlimit(RLIMIT_NOFILE, &files);
  };
  std::string why;
  ASSERT_TRUE(d.try_start({}, "", &why)) << why;
  std::vector<int> idle;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, d.socket_path().c_str(), sizeof sa.sun_path - 1);
  for (int i = 0; i < 300; ++i) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0 && errno != EAGAIN) {
      close(fd);
      continue;
    }
    idle.push_back(fd);
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the daemon takes what it can, past its limit
  for (int fd : idle) close(fd);
  const auto t0 = std::chrono::steady_clock::now();
  bool answered = false;
  while (!answered && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10))
    answered = d.cli("--timeout 2 --json device").code == 0;
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  std::printf("after %zu connections: answered again after %lld ms\n", idle.size(), (long long)took.count());
  EXPECT_TRUE(answered) << "qgated stayed deaf after descriptor exhaustion\n" << d.log();
  EXPECT_NE(d.log().find("refused: it would leave fewer than"), std::string::npos)
      << "the flood never reached the cap:\n" << d.log();
}

/// The Landlock ABI of this kernel, 0 without Landlock.
long landlock_abi() {
  const long abi = syscall(444 /* landlock_create_ruleset */, nullptr, 0, 1u /* VERSION */);
  return abi > 0 ? abi : 0;
}

// The sandbox: the snoop build reads the daemon's --data-dir from its parent's command line and
// tries to open the database, connect over TCP, write to /tmp and signal the daemon.
TEST_F(HostileBuilds, ASandboxedBuildCannotOpenTheDatabaseNorReachTheNetwork) {
  if (landlock_abi() < 6) GTEST_SKIP() << "this kernel's Landlock (ABI " << landlock_abi() << ") is older than 6";
  auto e = run_job(d_, QGATE_FAULT_SNOOP, "snoop", parity_);
  EXPECT_EQ(e.watch_code, 0) << "it computes correctly: " << e.job.dump();
  const std::string log = slurp(d_.dir() + "/logs/job-" + std::to_string(e.job["id"].get<int64_t>()) + "-parity.log");
  EXPECT_NE(log.find("snoop: open " + d_.dir() + "/qgate.db: Permission denied"), std::string::npos) << log;
  EXPECT_NE(log.find("snoop: tcp connect: Permission denied"), std::string::npos) << log;
  EXPECT_NE(log.find("snoop: write /tmp/qgate-snoop-"), std::string::npos) << log;
  EXPECT_EQ(log.find(": ok\n"), std::string::npos) << "one attempt got through:\n" << log;
  EXPECT_NE(log.find("snoop: signal the daemon: Operation not permitted"), std::string::npos) << log;

  // The control: the same build with the sandbox off opens the database.
  ASSERT_TRUE(d_.terminate(std::chrono::seconds(20)));
  std::string why;
  ASSERT_TRUE(d_.try_start({"--worker-sandbox", "off"}, "", &why)) << why;
  auto open = run_job(d_, QGATE_FAULT_SNOOP, "snoop", parity_);
  const std::string unsandboxed =
      slurp(d_.dir() + "/logs/job-" + std::to_string(open.job["id"].get<int64_t>()) + "-parity.log");
  EXPECT_NE(unsandboxed.find("snoop: open " + d_.dir() + "/qgate.db: ok"), std::string::npos) << unsandboxed;
}

namespace {

/// The pid the setsid_child / crash_with_child builds print to their worker's log; 0 when absent.
pid_t setsid_child_pid(DaemonUnderTest& d, int64_t job_id) {
  const std::string log = slurp(d.dir() + "/logs/job-" + std::to_string(job_id) + "-parity.log");
  const std::string marker = "setsid child: pid ";
  const size_t at = log.find(marker);
  return at == std::string::npos ? 0 : pid_t(std::atol(log.c_str() + at + marker.size()));
}

/// True once no process has `pid` (killed and reaped), waiting up to `timeout`.
bool gone_within(pid_t pid, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace

// A child that starts its own session escapes the kill of the worker's process group; qgated, the
// subreaper of its workers, ends it when the worker is reaped.
TEST_F(HostileBuilds, ASetsidChildIsGoneWhenItsJobEnds) {
  auto e = run_job(d_, QGATE_FAULT_SETSID_CHILD, "setsid-child", parity_);
  EXPECT_EQ(e.watch_code, 0) << "it computes correctly: " << e.job.dump();
  const pid_t child = setsid_child_pid(d_, e.job["id"].get<int64_t>());
  ASSERT_GT(child, 0) << "the build never started its child";
  EXPECT_TRUE(gone_within(child, std::chrono::seconds(5))) << "pid " << child << " outlived its job\n" << d_.log();
  EXPECT_NE(d_.log().find("ended process " + std::to_string(child) + ", which a worker left behind"),
            std::string::npos)
      << d_.log();
}

// The worker segfaults while a child it started holds its pipes open: qgated watches the worker's
// pid, not its pipe, so the job is CRASHED at once instead of waiting out the run timeout.
TEST_F(HostileBuilds, AWorkerThatDiesWhileItsChildHoldsItsPipesIsCrashedNotTimedOut) {
  ASSERT_TRUE(d_.terminate(std::chrono::seconds(20)));
  std::string why;
  ASSERT_TRUE(d_.try_start({"--run-timeout", "90"}, "", &why)) << why;
  const auto t0 = std::chrono::steady_clock::now();
  auto e = run_job(d_, QGATE_FAULT_CRASH_WITH_CHILD, "crash-with-child", parity_);
  const auto took = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - t0);
  EXPECT_EQ(e.job.value("disposition", ""), "DISPOSITION_CRASHED") << e.job.dump();
  EXPECT_NE(e.job.value("disposition_detail", "").find("SIGSEGV"), std::string::npos) << e.job.dump();
  EXPECT_LT(took.count(), 60) << "the crash was seen only at the run timeout";
  const pid_t child = setsid_child_pid(d_, e.job["id"].get<int64_t>());
  ASSERT_GT(child, 0) << "the build never started its child";
  EXPECT_TRUE(gone_within(child, std::chrono::seconds(5))) << "pid " << child << " outlived its job";
}

// A build names itself with what qgate cannot store or show: bytes that are not UTF-8, or 80 MiB.
// It is REJECTED for its declaration, the reason names the field, and the daemon serves on.
TEST_F(HostileBuilds, ABuildWhoseNameIsNotUtf8OrHugeIsRejected) {
  for (const auto& [path, label, why] :
       {std::tuple{QGATE_FAULT_NAME_NOT_UTF8, "name-not-utf8", "name is not UTF-8 (byte 12)"},
        std::tuple{QGATE_FAULT_NAME_80MIB, "name-80mib", "name is longer than 256 bytes"}}) {
    auto e = run_job(d_, path, label, parity_);
    EXPECT_NE(e.watch_code, 0) << e.job.dump();
    EXPECT_EQ(e.job.value("disposition", ""), "DISPOSITION_REJECTED") << e.job.dump();
    EXPECT_NE(e.job.value("disposition_detail", "").find(why), std::string::npos) << e.job.dump();
    EXPECT_LT(e.job.dump().size(), 64u * 1024) << "the job record carries the huge name";
  }
  auto ref = run_job(d_, QGATE_REF_LIBRARY, "ref", parity_);
  EXPECT_EQ(ref.watch_code, 0) << ref.job.dump();
}

// A build that touches 1 GiB more every call, on a daemon whose workers may hold 256 MiB: the
// kernel kills it at its cgroup's limit, the job is CRASHED for that reason (not run again as a
// kill from outside), and the host keeps its memory. Skipped where no cgroup can be made.
TEST_F(HostileBuilds, ABuildThatExhaustsMemoryIsKilledAtItsWorkersLimit) {
  ASSERT_TRUE(d_.terminate(std::chrono::seconds(20)));
  std::string why;
  ASSERT_TRUE(d_.try_start({"--worker-memory-max", std::to_string(256 << 20)}, "", &why)) << why;
  if (d_.log().find("workers run without a cgroup") != std::string::npos)
    GTEST_SKIP() << "no cgroup can be made here:\n" << d_.log();
  ASSERT_NE(d_.log().find("each worker runs in a cgroup of its own"), std::string::npos) << d_.log();
  auto e = run_job(d_, QGATE_FAULT_MEMORY_HOG, "memory-hog", parity_);
  EXPECT_NE(e.watch_code, 0) << e.job.dump();
  EXPECT_EQ(e.job.value("disposition", ""), "DISPOSITION_CRASHED") << e.job.dump();
  EXPECT_NE(e.job.value("disposition_detail", "").find("killed at the worker's memory limit"), std::string::npos)
      << e.job.dump();
  EXPECT_EQ(d_.log().find("running the sweep again"), std::string::npos) << "an OOM kill is not retried";
  auto ref = run_job(d_, QGATE_REF_LIBRARY, "ref", parity_);
  EXPECT_EQ(ref.watch_code, 0) << "the reference build fits in 256 MiB: " << ref.job.dump();
}

// A build wrong alike on both paths (every output 1.0): both arms agree, token for token, on
// tokens the head was not built to give. The judge, which makes the tokens from the logits and
// knows each row's exact winner from the seed, says so, and the job is INCORRECT.
TEST_F(HostileBuilds, AnAbWhoseArmsAgreeOnWrongTokensIsIncorrect) {
  auto e = run_job(d_, QGATE_FAULT_CONSTANT_OUTPUT, "constant-output", "--kind ab --profile cpu-tiny --max-pairs 4");
  EXPECT_NE(e.watch_code, 0) << e.job.dump();
  EXPECT_EQ(e.job.value("disposition", ""), "DISPOSITION_INCORRECT") << e.job.dump();
  const json identity = verdict_of(e.job).value("identity", json::object());
  EXPECT_FALSE(identity.value("identical", true)) << e.job.dump();
  EXPECT_NE(identity.value("detail", "").find("greedy tokens are not the ones the output head's exact logits pick"),
            std::string::npos)
      << identity.dump();
  EXPECT_NE(identity.value("detail", "").find("every run agrees"), std::string::npos) << identity.dump();
  // The control: the reference build's A/B is identical, every token on target (its speed
  // verdict, MMQ against f16 on this CPU, is beside the point).
  auto ref = run_job(d_, QGATE_REF_LIBRARY, "ref", "--kind ab --profile cpu-tiny --max-pairs 4");
  EXPECT_EQ(ref.job.value("disposition", ""), "DISPOSITION_OK") << ref.job.dump();
  EXPECT_TRUE(verdict_of(ref.job).value("identity", json::object()).value("identical", false)) << ref.job.dump();
}
