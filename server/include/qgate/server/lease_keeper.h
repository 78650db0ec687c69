// LeaseKeeper: keeps this daemon's claims on its running jobs alive, and takes back the jobs of
// daemons whose claims ran out (docs/fleet.md). A thread that renews the leases a quarter of a lease
// apart and sweeps for expired ones every half lease; a job it takes back is queued again and the
// scheduler is woken to claim it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "qgate/db/store.h"
#include "qgate/server/store_outage.h"

namespace qgate::server {

class LeaseKeeper {
 public:
  /// `requeued` is called after a sweep queued jobs again (the scheduler's notify).
  LeaseKeeper(db::Store& store, std::chrono::milliseconds lease, int max_daemon_deaths,
              std::function<void()> requeued);
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  void start();
  void stop();

  /// One renewal and one sweep, now (the thread's pass; tests call it directly).
  void pass();
  /// Where a renewal or sweep that fails is reported (said once per outage with the scheduler's
  /// claims) instead of each being logged. Call before start().
  void set_store_outage(StoreOutage* outage) { outage_ = outage; }

 private:
  void loop();

  db::Store& store_;
  std::chrono::milliseconds lease_;
  int max_daemon_deaths_;
  std::function<void()> requeued_;
  StoreOutage* outage_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point next_sweep_{};
  std::thread thread_;
};

}  // namespace qgate::server
