// ProcessLauncher: the real WorkerChannel is a qgate-worker child process (WorkerProcess).
#include "qgate/server/worker_channel.h"

#include <unistd.h>

#include <atomic>

namespace qgate::server {
namespace {

class ProcessChannel final : public WorkerChannel {
 public:
  explicit ProcessChannel(const WorkerLaunch& launch) : process_(launch) {}
  int pid() const override { return int(process_.pid()); }
  bool send(const v1::WorkerRequest& request) override { return process_.send(request); }
  ReadEnd read(v1::WorkerRecord* record, std::chrono::milliseconds timeout) override {
    return process_.read(record, timeout);
  }
  WorkerExit wait_exit(std::chrono::milliseconds timeout) override {
    WorkerExit exit;
    exit.text = process_.wait_exit(timeout);
    exit.signal = process_.term_signal();
    exit.fatal_call = fatal_signal_call(process_.stderr_tail(4000));
    exit.memory_limit = process_.memory_limit_killed();
    return exit;
  }
  std::string stderr_tail(size_t max_bytes) const override { return process_.stderr_tail(max_bytes); }
  std::string where_is_it(std::chrono::milliseconds timeout) override { return process_.where_is_it(timeout); }
  void kill_group() override { process_.kill_group(); }
  void freeze_group(bool frozen) override { process_.freeze_group(frozen); }

 private:
  WorkerProcess process_;
};

}  // namespace

std::unique_ptr<WorkerChannel> ProcessLauncher::launch(const WorkerLaunch& launch) {
  if (!cgroups_ || launch.cgroup) return std::make_unique<ProcessChannel>(launch);
  static std::atomic<uint64_t> next{0};
  WorkerLaunch in_cgroup = launch;
  in_cgroup.cgroup = cgroups_->make("worker-" + std::to_string(getpid()) + "-" + std::to_string(++next), limits_);
  return std::make_unique<ProcessChannel>(in_cgroup);
}

}  // namespace qgate::server
