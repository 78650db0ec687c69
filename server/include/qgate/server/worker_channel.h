// The job's view of one qgate-worker: requests in, records out with a deadline, and what is left
// of one that ended or hung. WorkerProcess is the real one (ProcessLauncher starts it); the phases
// only see this interface, so their order, retries and timeouts are unit-tested with a scripted fake.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "qgate/server/worker_process.h"
#include "qgate/v1/worker.pb.h"

namespace qgate::server {

/// How a worker ended, once it has.
struct WorkerExit {
  std::string text;        // "exit 0", "signal 11 (Segmentation fault)"
  int signal = 0;          // the terminating signal, 0 when it exited
  std::string fatal_call;  // the build call its fatal-signal handler named ("qgate_gemm_run"), else ""
  bool memory_limit = false;  // the kernel killed it (or a process it started) at its cgroup's memory limit
};

class WorkerChannel {
 public:
  virtual ~WorkerChannel() = default;
  virtual int pid() const = 0;
  /// False when the worker's input is closed (it died).
  virtual bool send(const v1::WorkerRequest& request) = 0;
  /// Waits up to `timeout` for the next record.
  virtual ReadEnd read(v1::WorkerRecord* record, std::chrono::milliseconds timeout) = 0;
  /// Waits up to `timeout` for the worker to end and says how it did.
  virtual WorkerExit wait_exit(std::chrono::milliseconds timeout) = 0;
  /// The end of what the worker wrote to stderr, for messages.
  virtual std::string stderr_tail(size_t max_bytes) const = 0;
  /// The build call a running worker is in ("" when it does not answer in `timeout`).
  virtual std::string where_is_it(std::chrono::milliseconds timeout) = 0;
  /// Kills the worker's whole process group.
  virtual void kill_group() = 0;
  /// Freezes (SIGSTOP) or thaws (SIGCONT) the worker's whole process group, so an idle arm's
  /// threads cannot run while the other arm is timed (docs/security.md). Scripted fakes ignore it.
  virtual void freeze_group(bool /*frozen*/) {}
};

/// Starts workers. Throws std::runtime_error when one cannot be started.
class WorkerLauncher {
 public:
  virtual ~WorkerLauncher() = default;
  virtual std::unique_ptr<WorkerChannel> launch(const WorkerLaunch& launch) = 0;
};

/// Starts real qgate-worker processes, each in a cgroup of its own when `cgroups` is given.
class ProcessLauncher final : public WorkerLauncher {
 public:
  ProcessLauncher() = default;
  ProcessLauncher(std::shared_ptr<const WorkerCgroups> cgroups, CgroupLimits limits)
      : cgroups_(std::move(cgroups)), limits_(limits) {}
  std::unique_ptr<WorkerChannel> launch(const WorkerLaunch& launch) override;

 private:
  std::shared_ptr<const WorkerCgroups> cgroups_;
  CgroupLimits limits_;
};

}  // namespace qgate::server
