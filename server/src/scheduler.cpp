// Claims queued jobs one at a time (one GPU, one job) and runs them.
#include "qgate/server/scheduler.h"

#include <chrono>
#include <iostream>

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
      job = store_.claim_next_job(device_);
    } catch (const std::exception& e) {
      std::cerr << "qgated: cannot claim a job: " << e.what() << "\n";
    }
    if (job) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return;  // claimed during shutdown: requeued at the next start
        stop_flag_ = JobRunner::kKeepRunning;
      }
      running_ = job->id;
      runner_.run(*job, stop_flag_);
      running_ = 0;
      continue;
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_ || woken_; });
    woken_ = false;
  }
}

}  // namespace qgate::server
