// LeaseKeeper: keeps this daemon's claims on its running jobs alive, and takes back the jobs of
// daemons whose claims ran out (docs/fleet.md). A thread that renews the leases a quarter of a lease
// apart and sweeps for expired ones every half lease; a job it takes back is queued again and the
// scheduler is woken to claim it. Each renewal also tells the daemon which of its jobs were asked
// to cancel elsewhere and which it no longer holds, and publishes the daemon's GPUs to the fleet.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "qgate/db/store.h"
#include "qgate/server/store_outage.h"

namespace qgate::server {

/// What the lease keeper tells the daemon, and asks of it. Each may be empty.
struct LeaseHooks {
  /// After a sweep queued jobs again (the scheduler's notify).
  std::function<void()> requeued;
  /// The jobs the daemon runs now, read before each renewal.
  std::function<std::vector<int64_t>()> running;
  /// After each renewal, with what `running` said before it (Scheduler::apply_lease_renewal).
  std::function<void(const db::LeaseRenewal&, const std::vector<int64_t>&)> renewed;
  /// The daemon's GPUs to publish at each renewal (Store::publish_gpus); empty: none published.
  std::function<std::vector<db::FleetGpu>()> gpus;
};

class LeaseKeeper {
 public:
  LeaseKeeper(db::Store& store, std::chrono::milliseconds lease, int max_daemon_deaths, LeaseHooks hooks);
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  /// Where its renewals and sweeps report whether the store answers (said once per outage, with
  /// the scheduler's claims); without it each failure is logged. Call before start().
  void set_store_outage(StoreOutage* outage) { outage_ = outage; }

  void start();
  void stop();

  /// One renewal and one sweep, now (the thread's pass; tests call it directly).
  void pass();

 private:
  void loop();
  void renew();
  void sweep();

  db::Store& store_;
  std::chrono::milliseconds lease_;
  int max_daemon_deaths_;
  LeaseHooks hooks_;
  StoreOutage* outage_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point next_sweep_{};
  std::thread thread_;
};

}  // namespace qgate::server
