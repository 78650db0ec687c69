// What can stop a running job, checked by every phase between steps: the user's cancel, the daemon
// stopping, and the job's own time limit. Also cuts each wait to what is left of that limit.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "qgate/server/job_failure.h"

namespace qgate::server {

class WorkerChannel;

/// What the scheduler asks of a running job through its stop flag.
enum StopRequest : int {
  kKeepRunning = 0,
  kCancelJob = 1,     // the user cancelled: the job ends CANCELLED
  kDaemonStops = 2,   // the daemon stops: the job stays running and is run again at restart
  kLeaseLost = 3,     // the daemon lost the job's lease: it stops and writes nothing more
};

class JobControl {
 public:
  using Clock = std::chrono::steady_clock;
  JobControl(const std::atomic<int>& stop, std::chrono::seconds limit);

  /// Throws JobCancelled, DaemonStopping, LeaseLost, or JobFailure (TIMEOUT) when the job must end.
  void check() const;
  bool time_up() const { return Clock::now() >= deadline_; }
  int64_t limit_s() const { return limit_s_; }
  /// `limit`, cut to what is left of the job's time limit (at least 1 ms).
  std::chrono::milliseconds within(std::chrono::milliseconds limit) const;
  /// Ends the job TIMEOUT: `worker` overran `what`'s limit of `limit_s` (or the job its own). Asks
  /// it which build call it is stuck in, then kills its process group.
  [[noreturn]] void overran(WorkerChannel& worker, const std::string& who, const std::string& what,
                            int64_t limit_s) const;

 private:
  const std::atomic<int>& stop_;
  int64_t limit_s_;
  Clock::time_point deadline_;
};

/// "qgate_gemm_run" -> "gemm_run": how dispositions name a build call.
std::string short_call_name(const std::string& abi_call);

/// Asks an overrunning worker which build call it is in, then kills its process group; returns the
/// call's short name ("" when it did not answer).
std::string kill_hung(WorkerChannel& worker);

}  // namespace qgate::server
