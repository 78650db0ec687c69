// PeriodicSampling: a reading thread for the length of one run.
#include "qgate/cotenant/periodic_sampling.h"

#include <chrono>
#include <stdexcept>

namespace qgate::cotenant {

PeriodicSampling::PeriodicSampling(Sampler& sampler, PeriodicSamplingOptions options)
    : sampler_(sampler), options_(options) {
  if (options_.period_ms <= 0) throw std::invalid_argument("PeriodicSampling: period_ms must be positive");
}

PeriodicSampling::~PeriodicSampling() { (void)halt(); }

bool PeriodicSampling::running() const {
  std::lock_guard lock(mutex_);
  return thread_.joinable();
}

void PeriodicSampling::start(const std::set<int>& own_pids) {
  std::lock_guard lock(mutex_);
  if (thread_.joinable()) throw std::logic_error("PeriodicSampling::start: already running");
  samples_.clear();
  own_pids_ = own_pids;
  stop_requested_ = false;
  if (!sampler_.available()) return;  // nothing to read; stop() returns no readings
  thread_ = std::thread([this, own_pids] { loop(own_pids); });
}

void PeriodicSampling::loop(std::set<int> own_pids) {
  using steady = std::chrono::steady_clock;
  const auto period = std::chrono::milliseconds(options_.period_ms);
  auto deadline = steady::now();
  std::unique_lock lock(mutex_);
  while (!stop_requested_) {
    lock.unlock();
    auto sample = sampler_.read(own_pids);
    lock.lock();
    if (sample) samples_.push_back(std::move(*sample));
    deadline += period;
    // A reading slower than a period skips the missed deadlines rather than bursting to catch up.
    if (const auto now = steady::now(); deadline < now) deadline = now;
    wake_.wait_until(lock, deadline, [this] { return stop_requested_; });
  }
}

bool PeriodicSampling::halt() {
  std::thread thread;
  {
    std::lock_guard lock(mutex_);
    stop_requested_ = true;
    thread.swap(thread_);
  }
  wake_.notify_all();
  if (!thread.joinable()) return false;
  thread.join();
  return true;
}

std::vector<Sample> PeriodicSampling::stop() {
  const bool had_run = halt();
  if (had_run && options_.final_sample_on_stop) {
    std::set<int> own;
    {
      std::lock_guard lock(mutex_);
      own = own_pids_;
    }
    (void)sample_once(own);
  }
  return take();
}

std::optional<Sample> PeriodicSampling::sample_once(const std::set<int>& own_pids) {
  auto sample = sampler_.read(own_pids);
  if (sample) {
    std::lock_guard lock(mutex_);
    samples_.push_back(*sample);
  }
  return sample;
}

std::vector<Sample> PeriodicSampling::take() {
  std::lock_guard lock(mutex_);
  std::vector<Sample> out;
  out.swap(samples_);
  return out;
}

}  // namespace qgate::cotenant
