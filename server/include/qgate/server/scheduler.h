// The job queue's consumer: one thread per device that claims the oldest queued job from the store
// and runs it, so the queue lives in the database and survives restarts.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "qgate/server/job_runner.h"

namespace qgate::server {

class Scheduler {
 public:
  Scheduler(db::Store& store, JobRunner& runner, int device);
  ~Scheduler();
  void start();
  void stop();
  /// Wakes the loop (a job was submitted).
  void notify();
  /// Cancels the job if it is the one running; returns whether it was.
  bool cancel_running(int64_t job_id);
  int64_t running_job() const { return running_.load(); }

 private:
  void loop();
  db::Store& store_;
  JobRunner& runner_;
  int device_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool woken_ = false;
  std::atomic<int64_t> running_{0};
  std::atomic<int> stop_flag_{JobRunner::kKeepRunning};
};

}  // namespace qgate::server
