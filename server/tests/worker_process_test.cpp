// The daemon's side of the worker pipe: serve mode answers prepare and run requests, a malformed
// request is refused, and a worker that hangs is killed with its process group.
#include "qgate/server/worker_process.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <fcntl.h>

#include <filesystem>
#include <thread>

using namespace qgate::server;
using namespace std::chrono_literals;

namespace {

WorkerLaunch serve_launch(const std::string& mmq) {
  WorkerLaunch l;
  l.binary = QGATE_WORKER_BINARY;
  l.args = {"serve", "--build", QGATE_REF_LIBRARY, "--backend", "cpu", "--threads", "2"};
  l.env = clean_worker_environment({{"MINFER_MMQ", mmq}});
  return l;
}

qgate::v1::WorkerRequest prepare_request() {
  qgate::v1::WorkerRequest req;
  auto* p = req.mutable_prepare();
  p->set_tokens(8);
  p->set_seed(1);
  p->mutable_profile()->set_name("test");
  auto* g = p->mutable_profile()->add_gemms();
  g->set_type("q4_K");
  g->set_od(64);
  g->set_k(256);
  g->set_count(3);
  return req;
}

}  // namespace

TEST(WorkerProcess, ServePreparesAndRunsAProfileOnTheArmsPath) {
  for (const std::string mmq : {"1", "0"}) {
    WorkerProcess w(serve_launch(mmq));
    qgate::v1::WorkerRecord rec;
    ASSERT_TRUE(w.send(prepare_request()));
    ASSERT_EQ(w.read(&rec, 30s), ReadEnd::record);
    ASSERT_TRUE(rec.has_context());
    EXPECT_EQ(rec.context().options().at("MINFER_MMQ"), mmq);
    ASSERT_EQ(w.read(&rec, 30s), ReadEnd::record);
    ASSERT_TRUE(rec.has_prepared()) << rec.DebugString();
    EXPECT_EQ(rec.prepared().outcome(), qgate::v1::CASE_OUTCOME_PASSED) << rec.prepared().message();
    EXPECT_EQ(rec.prepared().path(), mmq == "1" ? qgate::v1::GEMM_PATH_MMQ : qgate::v1::GEMM_PATH_F16);

    qgate::v1::WorkerRequest run;
    run.mutable_run()->set_repetitions(3);
    run.mutable_run()->set_run_id(42);
    ASSERT_TRUE(w.send(run));
    ASSERT_EQ(w.read(&rec, 30s), ReadEnd::record);
    ASSERT_TRUE(rec.has_profile_run());
    const auto& r = rec.profile_run();
    EXPECT_EQ(r.run_id(), 42);
    EXPECT_EQ(r.outcome(), qgate::v1::CASE_OUTCOME_PASSED) << r.message();
    ASSERT_EQ(r.gemms_size(), 1);
    EXPECT_NEAR(r.gemm_ms(), 3 * r.gemms(0).median_us() / 1000.0, 1e-9) << "count weights the GEMM time";
    EXPECT_NEAR(r.tokens_per_s(), 8 / (r.gemm_ms() / 1000.0), 1e-6 * r.tokens_per_s());

    qgate::v1::WorkerRequest stop;
    stop.set_shutdown(true);
    ASSERT_TRUE(w.send(stop));
    EXPECT_EQ(w.wait_exit(10s), "exit 0");
  }
}

TEST(WorkerProcess, RunBeforePrepareIsRefusedNotFatal) {
  WorkerProcess w(serve_launch("0"));
  qgate::v1::WorkerRecord rec;
  qgate::v1::WorkerRequest run;
  run.mutable_run()->set_run_id(7);
  ASSERT_TRUE(w.send(run));
  ASSERT_EQ(w.read(&rec, 30s), ReadEnd::record);  // context
  ASSERT_EQ(w.read(&rec, 30s), ReadEnd::record);
  EXPECT_EQ(rec.profile_run().outcome(), qgate::v1::CASE_OUTCOME_INVALID_PROBLEM);
  ASSERT_TRUE(w.send(prepare_request()));
  ASSERT_EQ(w.read(&rec, 30s), ReadEnd::record);
  EXPECT_EQ(rec.prepared().outcome(), qgate::v1::CASE_OUTCOME_PASSED) << "the worker keeps serving";
}

TEST(WorkerProcess, AHungChildIsKilledWithItsGroup) {
  WorkerLaunch l;
  l.binary = "/bin/sh";
  l.args = {"-c", "sleep 600 & sleep 600"};
  l.env = clean_worker_environment({});
  WorkerProcess w(l);
  qgate::v1::WorkerRecord rec;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(w.read(&rec, 300ms), ReadEnd::timeout);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  const pid_t group = w.pid();
  w.kill_group();
  // The orphaned grandchild is reaped by init a moment later; until then it is a zombie.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (::kill(-group, 0) == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(20ms);
  EXPECT_NE(::kill(-group, 0), 0) << "no process of the group may survive";
}

TEST(WorkerProcess, AWorkerThatDiesReportsItsSignal) {
  WorkerLaunch l;
  l.binary = "/bin/sh";
  l.args = {"-c", "kill -SEGV $$"};
  l.env = clean_worker_environment({});
  WorkerProcess w(l);
  qgate::v1::WorkerRecord rec;
  EXPECT_EQ(w.read(&rec, 10s), ReadEnd::eof);
  EXPECT_NE(w.wait_exit(5s).find("signal 11"), std::string::npos);
}

TEST(WorkerProcess, TheEnvironmentIsCleanPlusTheArm) {
  setenv("QGATE_TEST_SECRET", "leak", 1);
  auto env = clean_worker_environment({{"MINFER_MMQ", "1"}});
  EXPECT_EQ(env.count("QGATE_TEST_SECRET"), 0u);
  EXPECT_EQ(env.at("MINFER_MMQ"), "1");
  EXPECT_EQ(env.count("PATH"), 1u);
}

TEST(WorkerProcess, TheChildGetsItsLimitsAndNoInheritedDescriptors) {
  // A descriptor the parent holds open without O_CLOEXEC must not reach the worker.
  const int leaked = ::open("/dev/null", O_RDONLY);
  ASSERT_GE(leaked, 0);
  WorkerLaunch l;
  l.binary = "/bin/sh";
  l.args = {"-c", "echo \"$(ulimit -c) $(ulimit -t) $(ulimit -n) $(ls /proc/self/fd | wc -l)\" >&2"};
  l.env = clean_worker_environment({});
  l.cpu_seconds = 123;
  l.open_files = 77;
  l.stderr_path = ::testing::TempDir() + "/limits.txt";
  std::filesystem::remove(l.stderr_path);
  WorkerProcess w(l);
  EXPECT_EQ(w.wait_exit(10s), "exit 0");
  ::close(leaked);
  // Core size 0, 123 s of CPU, 77 files; descriptors: stdin, stdout, stderr and the one ls opens.
  EXPECT_EQ(w.stderr_tail(), "0 123 77 4");
}

TEST(WorkerProcess, AFloodedLogStopsAtItsCapAndTheWorkerRunsOn) {
  // A build that writes without end to stderr (or to stdout, which the worker points at its log)
  // must stop at the cap: the log keeps exactly the cap, the writes past it fail, and the worker
  // is not killed for it (SIGXFSZ is ignored), so it can still finish its job.
  WorkerLaunch l;
  l.binary = "/bin/sh";
  l.args = {"-c", "head -c 3000000 /dev/zero | tr '\\0' x >&2; echo still-running > /dev/null && exit 7"};
  l.env = clean_worker_environment({});
  l.file_bytes = 1 << 20;
  l.stderr_path = ::testing::TempDir() + "/flood.log";
  std::filesystem::remove(l.stderr_path);
  WorkerProcess w(l);
  EXPECT_EQ(w.wait_exit(20s), "exit 7") << "the worker must run on past its log's cap";
  EXPECT_EQ(std::filesystem::file_size(l.stderr_path), uintmax_t(1) << 20);
}
