// Reads a Sampler on a background thread for the length of one run.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "qgate/cotenant/sampler.h"

namespace qgate::cotenant {

struct PeriodicSamplingOptions {
  std::int64_t period_ms = kDefaultSamplePeriodMs;  // 100 ms; why: the design note in sampler.h
  /// Take one more reading inside stop(), so even a run shorter than a period has a reading from its
  /// start and one from its end.
  bool final_sample_on_stop = true;
};

/// start(own_pids) reads once at once and then every period (deadlines, so reads do not drift) until
/// stop(), which wakes the thread at once, joins it and returns the readings of that interval in time
/// order. Without a thread, sample_once() reads synchronously into the same buffer (tests drive it
/// with a sampler on a ManualClock). An unavailable sampler yields no readings and starts no thread.
class PeriodicSampling {
 public:
  explicit PeriodicSampling(Sampler& sampler, PeriodicSamplingOptions options = {});
  ~PeriodicSampling();  // stops a running thread; its readings are dropped
  PeriodicSampling(const PeriodicSampling&) = delete;
  PeriodicSampling& operator=(const PeriodicSampling&) = delete;

  /// Clears the buffer and starts the thread. Throws std::logic_error when already running.
  void start(const std::set<int>& own_pids);
  /// Stops the thread (if any) and returns everything read since start() / the last take.
  std::vector<Sample> stop();
  bool running() const;

  /// One synchronous reading appended to the buffer (and returned); nullopt when the sampler had none.
  std::optional<Sample> sample_once(const std::set<int>& own_pids);
  /// Returns and clears the buffer without stopping.
  std::vector<Sample> take();

  std::int64_t period_ms() const { return options_.period_ms; }

 private:
  void loop(std::set<int> own_pids);
  bool halt();  // stops and joins the thread; false when none ran

  Sampler& sampler_;
  PeriodicSamplingOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_requested_ = false;
  std::set<int> own_pids_;
  std::vector<Sample> samples_;
  std::thread thread_;
};

}  // namespace qgate::cotenant
