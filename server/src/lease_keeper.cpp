// The lease keeper's thread (lease_keeper.h).
#include "qgate/server/lease_keeper.h"

#include <spdlog/spdlog.h>

namespace qgate::server {

LeaseKeeper::LeaseKeeper(db::Store& store, std::chrono::milliseconds lease, int max_daemon_deaths, LeaseHooks hooks)
    : store_(store), lease_(lease), max_daemon_deaths_(max_daemon_deaths), hooks_(std::move(hooks)) {}

LeaseKeeper::~LeaseKeeper() { stop(); }

void LeaseKeeper::start() { thread_ = std::thread([this] { loop(); }); }

void LeaseKeeper::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void LeaseKeeper::renew() {
  // A failed renewal is logged and tried again at the next pass: a lease outlives three missed ones.
  try {
    const std::vector<int64_t> running = hooks_.running ? hooks_.running() : std::vector<int64_t>{};
    const db::LeaseRenewal renewal = store_.renew_leases();
    if (hooks_.renewed) hooks_.renewed(renewal, running);
    if (hooks_.gpus) {
      const std::vector<db::FleetGpu> gpus = hooks_.gpus();
      store_.publish_gpus(gpus);
    }
    if (outage_) outage_->answered();
  } catch (const std::exception& e) {
    if (outage_) outage_->failed(e);
    else spdlog::warn("qgated: cannot renew the leases of its running jobs: {}", e.what());
  }
}

void LeaseKeeper::sweep() {
  try {
    const db::InterruptedJobs taken = store_.requeue_expired_leases(max_daemon_deaths_);
    for (auto id : taken.requeued)
      spdlog::warn("job {}: its daemon's lease ran out (the daemon died or lost the database); queued again", id);
    for (auto id : taken.given_up)
      spdlog::error("job {}: its daemon's lease ran out and {} daemons have died under it: CRASHED, not run again",
                    id, max_daemon_deaths_);
    if (!taken.requeued.empty() && hooks_.requeued) hooks_.requeued();
  } catch (const std::exception& e) {
    if (outage_) outage_->failed(e);
    else spdlog::warn("qgated: cannot sweep for expired leases: {}", e.what());
  }
}

void LeaseKeeper::pass() {
  renew();
  const auto now = std::chrono::steady_clock::now();
  if (now < next_sweep_) return;
  next_sweep_ = now + lease_ / 2;
  sweep();
}

void LeaseKeeper::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    pass();
    lock.lock();
    cv_.wait_for(lock, lease_ / 4, [&] { return stopping_; });
  }
}

}  // namespace qgate::server
