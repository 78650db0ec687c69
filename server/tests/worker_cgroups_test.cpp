// A cgroup per worker, on the real cgroup hierarchy of this machine: what the worker started in a
// session of its own is gone when the worker is reaped, a worker over its memory limit is killed
// and says so, and one that forks past its process limit cannot. Skipped where qgated could make
// no cgroup (the reason is printed).
#include "qgate/server/worker_cgroups.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "qgate/server/worker_channel.h"
#include "qgate/server/worker_process.h"

using namespace qgate::server;
using namespace std::chrono_literals;

namespace {

class WorkerCgroupsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    cgroups_ = WorkerCgroups::find(&why);
    if (!cgroups_) GTEST_SKIP() << "no cgroup can be made here: " << why;
    std::printf("worker cgroups: %s\n", cgroups_->describe().c_str());
    log_ = std::filesystem::temp_directory_path() / ("qgate-cgroup-test-" + std::to_string(getpid()) + ".log");
  }
  void TearDown() override { std::filesystem::remove(log_); }

  /// /bin/sh running `script`, in a new cgroup with `limits`.
  WorkerLaunch shell(const std::string& script, const CgroupLimits& limits, const std::string& name) {
    WorkerLaunch launch;
    launch.binary = "/bin/sh";
    launch.args = {"-c", script};
    launch.env = clean_worker_environment({});
    launch.stderr_path = log_.string();
    launch.cgroup = cgroups_->make("test-" + std::to_string(getpid()) + "-" + name, limits);
    return launch;
  }

  std::string log_text() const {
    std::ifstream in(log_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  std::unique_ptr<WorkerCgroups> cgroups_;
  std::filesystem::path log_;
};

bool gone_within(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

}  // namespace

// The worker starts a child in a session of its own (out of reach of its process group's kill),
// which this test process, no subreaper, would never see again. The cgroup's kill takes it.
TEST_F(WorkerCgroupsTest, WhatAWorkerStartedInAnotherSessionIsGoneWhenTheWorkerIsReaped) {
  auto launch = shell("setsid sleep 600 >/dev/null 2>&1 < /dev/null & echo \"child $!\" >&2; exec sleep 600", {}, "setsid");
  const std::string dir = launch.cgroup->dirs().front();
  pid_t child = 0;
  {
    WorkerProcess worker(launch);
    launch.cgroup.reset();  // the worker holds it now
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (child == 0 && std::chrono::steady_clock::now() < deadline) {
      const std::string text = log_text();
      if (const size_t at = text.find("child "); at != std::string::npos) child = pid_t(std::atol(text.c_str() + at + 6));
      std::this_thread::sleep_for(10ms);
    }
    ASSERT_GT(child, 0) << log_text();
    ASSERT_EQ(::kill(child, 0), 0) << "the child is running";
    worker.kill_group();
  }
  // The process-group kill cannot reach it; only the cgroup's can.
  EXPECT_TRUE(gone_within(child, 3s)) << "pid " << child << " outlived its worker";
  EXPECT_FALSE(std::filesystem::exists(dir)) << "the cgroup is removed with the worker";
}

TEST_F(WorkerCgroupsTest, AWorkerOverItsMemoryLimitIsKilledAndSaysSo) {
  CgroupLimits limits;
  limits.memory_bytes = 48 << 20;
  // A shell variable of 256 MiB: the shell itself holds it.
  ProcessLauncher launcher(nullptr, {});
  auto launch = shell("x=$(head -c 268435456 /dev/zero | tr '\\0' a); echo survived ${#x} >&2", limits, "memory");
  auto worker = launcher.launch(launch);
  const WorkerExit exit = worker->wait_exit(60s);
  EXPECT_TRUE(exit.memory_limit) << exit.text << "\n" << log_text();
  EXPECT_EQ(log_text().find("survived"), std::string::npos) << log_text();
}

TEST_F(WorkerCgroupsTest, AWorkerCannotForkPastItsProcessLimit) {
  CgroupLimits limits;
  limits.pids = 8;
  // Twenty sleepers; the eighth process in the cgroup is the last one the kernel lets it make,
  // and the shell's next fork fails ("Cannot fork").
  auto launch = shell("for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do sleep 30 & done; "
                      "echo started >&2; exec sleep 30",
                      limits, "pids");
  WorkerCgroup* cgroup = launch.cgroup.get();
  WorkerProcess worker(launch);
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (log_text().find("started") == std::string::npos && log_text().find("fork") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(100ms);
  const size_t processes = cgroup->processes().size();
  std::printf("processes in the cgroup: %zu; the shell said: %s", processes, log_text().c_str());
  EXPECT_NE(log_text().find("fork"), std::string::npos) << "every fork succeeded: " << log_text();
  EXPECT_EQ(log_text().find("started"), std::string::npos) << log_text();
  EXPECT_LE(processes, 8u) << log_text();
  EXPECT_GE(processes, 2u) << "the worker's children ran";
  worker.kill_group();
}

// The cgroup is made, limited and removed by the launcher, and a launcher without one starts
// workers as before.
TEST_F(WorkerCgroupsTest, TheLauncherPutsEachWorkerInACgroupOfItsOwn) {
  CgroupLimits limits;
  limits.pids = 64;
  ProcessLauncher launcher(std::shared_ptr<const WorkerCgroups>(std::move(cgroups_)), limits);
  WorkerLaunch launch;
  launch.binary = "/bin/sh";
  launch.args = {"-c", "cat /proc/self/cgroup >&2"};
  launch.env = clean_worker_environment({});
  launch.stderr_path = log_.string();
  auto worker = launcher.launch(launch);
  worker->wait_exit(10s);
  EXPECT_NE(log_text().find("/worker-" + std::to_string(getpid()) + "-"), std::string::npos) << log_text();
}

// A qgated killed with SIGKILL cannot remove its workers' cgroups; the next one removes those whose
// daemon is gone, and leaves a live daemon's alone.
TEST_F(WorkerCgroupsTest, CgroupsOfADaemonThatIsGoneAreRemovedAtTheNextStart) {
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  waitpid(gone, nullptr, 0);
  auto left = cgroups_->make("worker-" + std::to_string(gone) + "-1", {});
  auto live = cgroups_->make("worker-" + std::to_string(getpid()) + "-99", {});
  const std::vector<std::string> left_dirs = left->dirs(), live_dirs = live->dirs();
  // Forget the objects without removing their folders, as a daemon killed with SIGKILL would.
  auto* leaked_left = left.release();
  auto* leaked_live = live.release();
  (void)leaked_left;
  (void)leaked_live;
  EXPECT_GE(cgroups_->remove_left_behind(), int(left_dirs.size()));
  for (const auto& dir : left_dirs) EXPECT_FALSE(std::filesystem::exists(dir)) << dir;
  for (const auto& dir : live_dirs) {
    EXPECT_TRUE(std::filesystem::exists(dir)) << "a live daemon's cgroup was removed: " << dir;
    rmdir(dir.c_str());
  }
}
