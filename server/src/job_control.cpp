// JobControl: the cancel flag, the daemon's stop, and the job's time limit, checked between steps.
#include "qgate/server/job_control.h"

#include <algorithm>

#include "qgate/server/worker_channel.h"

namespace qgate::server {

JobControl::JobControl(const std::atomic<int>& stop, std::chrono::seconds limit)
    : stop_(stop), limit_s_(limit.count()), deadline_(Clock::now() + limit) {}

void JobControl::check() const {
  const int stop = stop_.load();
  if (stop == kCancelJob) throw JobCancelled();
  if (stop == kDaemonStops) throw DaemonStopping();
  if (stop == kLeaseLost) throw LeaseLost();
  if (time_up()) {
    const std::string detail = "job exceeded " + std::to_string(limit_s_) + " s";
    throw JobFailure("TIMEOUT: " + detail, Fault{v1::DISPOSITION_TIMEOUT, detail});
  }
}

std::chrono::milliseconds JobControl::within(std::chrono::milliseconds limit) const {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
  return std::max(std::chrono::milliseconds(1), std::min(limit, left));
}

void JobControl::overran(WorkerChannel& worker, const std::string& who, const std::string& what,
                         int64_t limit_s) const {
  const std::string call = kill_hung(worker);
  std::string detail = time_up() ? "job exceeded " + std::to_string(limit_s_) + " s"
                                 : what + " exceeded " + std::to_string(limit_s) + " s";
  if (!call.empty()) detail += " in " + call;
  throw JobFailure("TIMEOUT: " + who + ": " + detail + "; its worker's process group was killed",
                   Fault{v1::DISPOSITION_TIMEOUT, detail});
}

std::string short_call_name(const std::string& abi_call) {
  return abi_call.rfind("qgate_", 0) == 0 ? abi_call.substr(6) : abi_call;
}

std::string kill_hung(WorkerChannel& worker) {
  const std::string call = short_call_name(worker.where_is_it(std::chrono::milliseconds(500)));
  worker.kill_group();
  return call;
}

}  // namespace qgate::server
