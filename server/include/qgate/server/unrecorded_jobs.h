// UnrecordedJobs: the jobs this daemon stopped running because the store was lost under them (a
// network cut to the database, docs/fleet.md). Such a job is still `running` in the database under
// this daemon's claim, and its lease keeper would go on renewing it: it would wait for the next
// start. Instead, once the store answers again and no GPU of this daemon claims or runs a job, the
// scheduler hands them back: queued again, their cut-off runs marked interrupted, no attempt counted
// (a cut to the database is not a crash of the daemon).
#pragma once

#include <cstdint>
#include <mutex>
#include <set>

#include "qgate/db/store.h"
#include "qgate/server/gpu_pool.h"

namespace qgate::server {

class UnrecordedJobs {
 public:
  explicit UnrecordedJobs(int max_daemon_deaths) : max_daemon_deaths_(max_daemon_deaths) {}

  /// A runner stopped `job_id` because the store could not be reached to record it.
  void add(int64_t job_id);
  bool empty() const;

  /// Called by the scheduler of `claiming_gpu` after a claim that found the store answering and took
  /// no job (it holds its own GPU). When every other GPU of `pool` is free too, queues this daemon's
  /// running jobs again (they are all cut off: none runs) and returns how many; otherwise, or when the
  /// store refuses the write, keeps them for a later call and returns 0.
  int hand_back(db::Store& store, GpuPool& pool, int claiming_gpu);

 private:
  const int max_daemon_deaths_;
  mutable std::mutex mu_;
  std::set<int64_t> jobs_;
};

}  // namespace qgate::server
