// The time source of the co-tenant sampler, injected so that replays and tests are deterministic.
#pragma once

#include <atomic>
#include <cstdint>

namespace qgate::cotenant {

/// Milliseconds on some fixed base. Samples carry this time as t_ms.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::int64_t now_ms() const = 0;
};

/// Wall-clock milliseconds since the Unix epoch: the base of the store's started_ms, so sample
/// times line up with run times.
class SystemClock final : public Clock {
 public:
  std::int64_t now_ms() const override;
};

/// The process-wide SystemClock.
const Clock& system_clock();

/// A clock that moves only when told to (tests, replays driven step by step). Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(std::int64_t start_ms = 0) : now_(start_ms) {}
  std::int64_t now_ms() const override { return now_.load(); }
  void set_ms(std::int64_t t_ms) { now_.store(t_ms); }
  void advance_ms(std::int64_t delta_ms) { now_.fetch_add(delta_ms); }

 private:
  std::atomic<std::int64_t> now_;
};

}  // namespace qgate::cotenant
