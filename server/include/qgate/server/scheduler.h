// The job queue's consumer: one thread per device that claims the oldest queued job from the store
// and runs it, so the queue lives in the database and survives restarts.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "qgate/cotenant/device_watch.h"
#include "qgate/server/event_hub.h"
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
  /// Quiet-window jobs: started only while `watch` says the GPU is quiet; at their deadline they
  /// expire (or run contended, as their spec says), and watchers hear of it on `events`. Without a
  /// watch they wait until their deadline. Call before start().
  void set_quiet_source(const cotenant::DeviceWatch* watch, EventHub* events) {
    watch_ = watch;
    events_ = events;
  }

 private:
  void loop();
  /// Expires (or releases to run contended) the quiet-window jobs whose deadline has passed.
  void settle_quiet_deadlines();
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
  const cotenant::DeviceWatch* watch_ = nullptr;
  EventHub* events_ = nullptr;
};

}  // namespace qgate::server
