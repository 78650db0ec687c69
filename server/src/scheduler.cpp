// Claims queued jobs one at a time (one GPU, one job) and runs them; quiet-window jobs wait for
// a quiet GPU or their deadline.
#include "qgate/server/scheduler.h"

#include <chrono>

#include <spdlog/spdlog.h>

#include "qgate/server/job_records.h"

namespace qgate::server {

Scheduler::Scheduler(db::Store& store, JobRunner& runner, int device)
    : store_(store), runner_(runner), device_(device) {}

Scheduler::~Scheduler() { stop(); }

void Scheduler::start() { thread_ = std::thread([this] { loop(); }); }

void Scheduler::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  stop_flag_ = JobRunner::kShutdown;
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Scheduler::notify() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

bool Scheduler::cancel_running(int64_t job_id) {
  // Under the lock that also sets running_, so a cancel can never land on the next job.
  std::lock_guard<std::mutex> lock(mu_);
  if (running_.load() != job_id) return false;
  stop_flag_ = JobRunner::kCancel;
  return true;
}

void Scheduler::loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    std::optional<db::Job> job;
    try {
      const bool quiet = watch_ && watch_->quiet_now();
      if (!quiet) settle_quiet_deadlines();
      job = store_.claim_next_job(device_, quiet);
    } catch (const std::exception& e) {
      spdlog::error("cannot claim a job: {}", e.what());
    }
    if (job) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return;  // claimed during shutdown: requeued at the next start
        stop_flag_ = JobRunner::kKeepRunning;
        running_ = job->id;
      }
      runner_.run(*job, stop_flag_);
      {
        std::lock_guard<std::mutex> lock(mu_);
        running_ = 0;
      }
      continue;
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_ || woken_; });
    woken_ = false;
  }
}

void Scheduler::settle_quiet_deadlines() {
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  db::JobFilter queued;
  queued.state = db::JobState::Queued;
  queued.quiet_only = true;
  queued.limit = 100000;
  for (const db::Job& job : store_.list_jobs(queued)) {
    if (!job.deadline_ms || *job.deadline_ms > now_ms) continue;
    v1::JobEvent e;
    e.set_job_id(job.id);
    e.set_unix_ms(now_ms);
    if (job.run_contended_on_expiry) {
      if (!store_.set_job_quiet_only(job.id, false)) continue;
      spdlog::warn("job {}: no quiet window before its deadline; running it contended", job.id);
      e.set_state(v1::JOB_STATE_QUEUED);
      e.set_message("no quiet window before the deadline; it runs now, under whatever load there is");
    } else {
      const std::string why = "expired: the GPU was not quiet for the hold time before the deadline";
      if (!store_.update_job_state(job.id, db::JobState::Expired, why, db::JobState::Queued)) continue;
      spdlog::warn("job {} {}", job.id, why);
      e.set_state(v1::JOB_STATE_EXPIRED);
      e.set_message(why);
    }
    if (events_) events_->publish(e);
  }
}

}  // namespace qgate::server
