// The job queue's consumer: one thread per served GPU that claims the oldest queued job it may run
// from the store (first one pinned to its GPU, then one any GPU may take) and runs it, so the queue
// lives in the database and survives restarts. A split job also takes a second GPU from the pool.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "qgate/cotenant/device_watch.h"
#include "qgate/server/daemon_metrics.h"
#include "qgate/server/event_hub.h"
#include "qgate/jobs/gpu_choice.h"
#include "qgate/server/gpu_pool.h"
#include "qgate/server/job_runner.h"
#include "qgate/server/store_outage.h"
#include "qgate/server/unrecorded_jobs.h"

namespace qgate::server {

class Scheduler {
 public:
  /// One GPU, `device`, opened with the daemon's options (tests, and the one-GPU daemon of old).
  Scheduler(db::Store& store, JobRunner& runner, int device);
  /// Every GPU of `pool`, one queue each.
  Scheduler(db::Store& store, JobRunner& runner, GpuPool& pool);
  ~Scheduler();
  void start();
  void stop();
  /// Wakes every GPU's loop (a job was submitted).
  void notify();
  /// Cancels the job if it is running on any GPU; returns whether it was.
  bool cancel_running(int64_t job_id);
  /// The jobs running on the GPUs now.
  std::vector<int64_t> running_jobs() const;
  /// After a lease renewal (docs/fleet.md): cancels the jobs that a cancel on another daemon asked
  /// to stop, and stops, writing nothing more, those of `running_before` (running_jobs() read before
  /// the renewal) whose lease this daemon no longer holds and that have not ended.
  void apply_lease_renewal(const db::LeaseRenewal& renewal, const std::vector<int64_t>& running_before);
  /// A running job's id (the first GPU's that has one), 0 when none.
  int64_t running_job() const;
  /// The job running on one GPU, 0 when none.
  int64_t running_job_on(int ordinal) const;
  /// Quiet-window jobs: started only while `watch` says the GPU is quiet; at their deadline they
  /// expire (or run contended, as their spec says), and watchers hear of it on `events`. Without a
  /// watch they wait until their deadline. With a pool, each GPU's own watch is used. Call before
  /// start().
  void set_quiet_source(const cotenant::DeviceWatch* watch, EventHub* events) {
    watch_ = watch;
    events_ = events;
  }
  /// The daemon's labels (qgated --label): a lane claims only jobs whose labels are all among
  /// them (docs/fleet.md). Call before start().
  void set_labels(std::vector<std::string> labels) { labels_ = std::move(labels); }
  /// Where the lanes count their claims and finished jobs (/metrics). Call before start().
  void set_metrics(DaemonMetrics* metrics) { metrics_ = metrics; }
  /// Where the lanes report whether the store answers their claims (said once per outage, claims
  /// slowed while it is out), and the jobs cut off from the store that they queue again once it
  /// answers. Without them every failed claim is logged. Call before start().
  void set_store_watch(StoreOutage* outage, UnrecordedJobs* unrecorded) {
    outage_ = outage;
    unrecorded_ = unrecorded;
  }
  /// Empty when every GPU's loop is alive: running a job, or back at its queue within `max_silence`
  /// (an idle loop looks at the queue at least once a second). Otherwise which loop is not, and why.
  std::string not_alive(std::chrono::milliseconds max_silence) const;

 private:
  /// One GPU's loop and what it is doing.
  struct Lane {
    const ServedGpu* gpu = nullptr;
    std::thread thread;
    std::atomic<int64_t> running{0};
    std::atomic<int> stop_flag{JobRunner::kKeepRunning};
    std::atomic<bool> looping{false};         // the loop's thread has started and not returned
    std::atomic<int64_t> last_pass_ms{0};     // when it last looked at the queue (steady clock)
  };
  void loop(Lane& lane);
  /// Runs a claimed job on the lane's GPU, and on a second one when it is a split job.
  void run_claimed(Lane& lane, const db::Job& job);
  /// Runs it, and counts the claim and the end in metrics_ when there is one.
  void run_counted(Lane& lane, const db::Job& job);
  /// One claim statement (Store::claim_next_job), timed and counted in metrics_ when there is one.
  std::optional<db::Job> claim_timed(const db::ClaimScope& scope);
  /// Expires (or releases to run contended) the quiet-window jobs whose deadline has passed.
  void settle_quiet_deadlines();
  bool stopping() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  }

  db::Store& store_;
  JobRunner& runner_;
  std::unique_ptr<GpuPool> own_pool_;  // the one-GPU form's pool
  GpuPool& pool_;
  bool use_placement_ = true;          // false: the one-GPU form, whose runner opens the options' GPU
  std::vector<std::unique_ptr<Lane>> lanes_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  uint64_t wakeups_ = 0;
  const cotenant::DeviceWatch* watch_ = nullptr;
  EventHub* events_ = nullptr;
  DaemonMetrics* metrics_ = nullptr;
  std::vector<std::string> labels_;
  StoreOutage* outage_ = nullptr;
  UnrecordedJobs* unrecorded_ = nullptr;
};

}  // namespace qgate::server
