// The verdict on one run's readings: figures for the store and the `contended` flag.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qgate/cotenant/sample.h"

namespace qgate::cotenant {

/// When a run counts as contended. Defaults (beside each field):
/// - a foreign process above 5% SM in any reading;
/// - a thermal or power slowdown bit in any reading: HW slowdown 0x8, SW thermal 0x20, HW thermal
///   0x40, HW power brake 0x80. Not SW power cap 0x4: a busy H200 reports it under our own GEMM loop
///   (the driver holds the board at its power limit), so it says how hard *we* work, not that anyone
///   else slows us; GPU idle 0x1, applications/display clock settings 0x2/0x100 are not slowdowns;
/// - the SM clock under 75% of its max (nvbench's throttle rule) in more than 10% of the readings
///   that are not GPU-idle (an idle GPU clocks down by design, which says nothing about contention).
struct QuietPolicy {
  double max_foreign_sm_percent = 5.0;  // a foreign process above this is load
  std::uint64_t slowdown_mask = kClockEventHwSlowdown | kClockEventSwThermalSlowdown | kClockEventHwThermalSlowdown |
                                kClockEventHwPowerBrakeSlowdown;  // 0xe8
  double min_clock_fraction = 0.75;                               // of max_sm_clock_mhz
  double max_low_clock_sample_fraction = 0.10;                    // of the non-idle readings with both clocks known

  /// "foreign_sm<=5%; no slowdown 0xe8 (hw_slowdown, ...); sm_clock>=75% max in >=90% of samples"
  std::string describe() const;
};

/// Plain mirror of db::CotenantSummary (less run_id, which the store fills) for the lead to convert.
struct RunCotenant {
  bool available = false;  // false: no readings (NVML missing); every figure below is unknown
  std::optional<std::int64_t> sample_period_ms;
  std::optional<double> max_foreign_sm;  // of the per-reading foreign_sm_percent
  std::optional<double> mean_foreign_sm;
  std::optional<double> device_util_mean;
  std::string top_processes;                     // "sglang@96%, python@12%": by each process's max SM%, top 3
  std::string throttle_reasons;                  // "sw_power_cap 12/40, hw_slowdown 1/40": bit and readings showing it
  std::optional<std::int64_t> min_sm_clock_mhz;  // of the SM clocks read (not NVML's max clock)
  std::optional<std::int64_t> median_sm_clock_mhz;
  std::optional<std::int64_t> max_sm_clock_mhz;
  std::optional<std::int64_t> temperature_max_c;
  std::optional<double> power_max_w;
  /// true: some rule fired; false: every reading was known and quiet; none: not available, or some
  /// reading was unknown (process list or a foreign SM% or the clock reasons unreadable) and no rule fired.
  std::optional<bool> contended;
  std::string policy;  // QuietPolicy::describe()
};

/// How one reading looks on its own (the clock-drop rule needs the whole run and is not part of it).
enum class SampleLoad { kQuiet, kBusy, kUnknown };
std::string to_string(SampleLoad load);
/// kBusy: a foreign process above the threshold or a slowdown bit set. kUnknown: neither, but the
/// process list, a foreign process's SM% or the clock reasons are unknown. kQuiet otherwise.
SampleLoad classify(const Sample& sample, const QuietPolicy& policy = {});

/// The summary of one run's readings (in any order). sample_period_ms: the sampler's period; when
/// none, the median gap between readings (none with fewer than two).
RunCotenant summarize(const std::vector<Sample>& samples, const QuietPolicy& policy = {},
                      std::optional<std::int64_t> sample_period_ms = std::nullopt);

}  // namespace qgate::cotenant
