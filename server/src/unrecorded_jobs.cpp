// UnrecordedJobs: the cut-off jobs, and their hand-back to the queue (unrecorded_jobs.h).
#include "qgate/server/unrecorded_jobs.h"

#include <vector>

#include <spdlog/spdlog.h>

namespace qgate::server {

void UnrecordedJobs::add(int64_t job_id) {
  std::lock_guard lock(mu_);
  jobs_.insert(job_id);
}

bool UnrecordedJobs::empty() const {
  std::lock_guard lock(mu_);
  return jobs_.empty();
}

int UnrecordedJobs::hand_back(db::Store& store, GpuPool& pool, int claiming_gpu) {
  std::lock_guard lock(mu_);
  if (jobs_.empty()) return 0;
  // Hold every other GPU while the jobs go back: none may claim or run a job meanwhile, since the
  // store's requeue takes every running job of this daemon.
  std::vector<int> held;
  bool all_free = true;
  for (const ServedGpu& gpu : pool.gpus()) {
    if (gpu.ordinal == claiming_gpu) continue;
    if (!pool.begin_claim(gpu.ordinal)) {
      all_free = false;
      break;
    }
    held.push_back(gpu.ordinal);
  }
  int requeued = 0;
  if (all_free) {
    try {
      const db::InterruptedJobs back = store.requeue_interrupted_jobs(max_daemon_deaths_, /*daemon_died=*/false);
      for (auto id : back.requeued)
        spdlog::warn("job {}: the store was lost while it ran; queued again, its cut-off runs kept as interrupted", id);
      requeued = int(back.requeued.size());
      jobs_.clear();
    } catch (const std::exception& e) {
      spdlog::debug("cannot queue the jobs cut off from the store again yet: {}", e.what());
    }
  }
  for (int ordinal : held) pool.release(ordinal);
  return requeued;
}

}  // namespace qgate::server
