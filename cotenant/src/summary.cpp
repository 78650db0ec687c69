// summarize(): one run's readings to the figures and the contended verdict the store keeps.
#include "qgate/cotenant/summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>

namespace qgate::cotenant {

namespace {

std::string percent_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g%%", value);
  return text;
}

template <typename T>
T median_of(std::vector<T> values) {
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  if (values.size() % 2 == 1) return values[mid];
  return (values[mid - 1] + values[mid]) / 2;
}

}  // namespace

std::string QuietPolicy::describe() const {
  char mask[24];
  std::snprintf(mask, sizeof mask, "0x%llx", static_cast<unsigned long long>(slowdown_mask));
  return "foreign_sm<=" + percent_text(max_foreign_sm_percent) + " per process; no slowdown " + mask + " (" +
         decode_clock_event_reasons(slowdown_mask) + "); sm_clock>=" + percent_text(min_clock_fraction * 100) +
         " of max in >=" + percent_text((1.0 - max_low_clock_sample_fraction) * 100) + " of non-idle samples";
}

std::string to_string(SampleLoad load) {
  switch (load) {
    case SampleLoad::kQuiet:
      return "quiet";
    case SampleLoad::kBusy:
      return "busy";
    case SampleLoad::kUnknown:
      return "unknown";
  }
  return "unknown";
}

SampleLoad classify(const Sample& sample, const QuietPolicy& policy) {
  bool unknown = !sample.processes_listed || !sample.clock_event_reasons;
  for (const auto& process : sample.foreign) {
    if (!process.sm_percent) {
      unknown = true;
    } else if (*process.sm_percent > policy.max_foreign_sm_percent) {
      return SampleLoad::kBusy;
    }
  }
  if (sample.clock_event_reasons && (*sample.clock_event_reasons & policy.slowdown_mask) != 0) return SampleLoad::kBusy;
  return unknown ? SampleLoad::kUnknown : SampleLoad::kQuiet;
}

RunCotenant summarize(const std::vector<Sample>& samples, const QuietPolicy& policy,
                      std::optional<std::int64_t> sample_period_ms) {
  RunCotenant out;
  out.policy = policy.describe();
  if (samples.empty()) return out;  // unavailable: contended stays unknown, never "quiet"
  out.available = true;

  std::vector<const Sample*> ordered;
  for (const auto& sample : samples) ordered.push_back(&sample);
  std::stable_sort(ordered.begin(), ordered.end(), [](const Sample* a, const Sample* b) { return a->t_ms < b->t_ms; });

  out.sample_period_ms = sample_period_ms;
  if (!out.sample_period_ms && ordered.size() >= 2) {
    std::vector<std::int64_t> gaps;
    for (std::size_t i = 1; i < ordered.size(); ++i) gaps.push_back(ordered[i]->t_ms - ordered[i - 1]->t_ms);
    out.sample_period_ms = median_of(gaps);
  }

  std::vector<double> foreign_sm, device_util;
  std::vector<std::int64_t> clocks;
  std::map<std::uint64_t, std::size_t> bit_counts;
  std::map<int, ForeignProcess> by_pid;
  std::size_t busy = 0, unknown = 0, clock_checked = 0, clock_low = 0;

  for (const Sample* sample : ordered) {
    if (const auto sm = foreign_sm_percent(*sample)) foreign_sm.push_back(*sm);
    if (sample->device_util) device_util.push_back(*sample->device_util);
    if (sample->sm_clock_mhz) clocks.push_back(*sample->sm_clock_mhz);
    if (sample->temperature_c) {
      out.temperature_max_c = std::max(out.temperature_max_c.value_or(*sample->temperature_c), *sample->temperature_c);
    }
    if (sample->power_w) out.power_max_w = std::max(out.power_max_w.value_or(*sample->power_w), *sample->power_w);
    const std::uint64_t reasons = sample->clock_event_reasons.value_or(0);
    for (int i = 0; i < 64; ++i) {
      if (reasons & (std::uint64_t{1} << i)) ++bit_counts[std::uint64_t{1} << i];
    }
    for (const auto& process : sample->foreign) {
      auto [it, inserted] = by_pid.try_emplace(process.pid, process);
      if (inserted) continue;
      auto& seen = it->second;
      if (process.sm_percent && (!seen.sm_percent || *process.sm_percent > *seen.sm_percent)) {
        seen.sm_percent = process.sm_percent;
      }
      if (seen.name.rfind("pid", 0) == 0 && process.name.rfind("pid", 0) != 0) seen.name = process.name;
    }

    switch (classify(*sample, policy)) {
      case SampleLoad::kBusy:
        ++busy;
        break;
      case SampleLoad::kUnknown:
        ++unknown;
        break;
      case SampleLoad::kQuiet:
        break;
    }
    const bool idle = (reasons & kClockEventGpuIdle) != 0;
    if (sample->sm_clock_mhz && sample->max_sm_clock_mhz && *sample->max_sm_clock_mhz > 0 && !idle) {
      ++clock_checked;
      if (*sample->sm_clock_mhz < policy.min_clock_fraction * static_cast<double>(*sample->max_sm_clock_mhz)) {
        ++clock_low;
      }
    }
  }

  if (!foreign_sm.empty()) {
    out.max_foreign_sm = *std::max_element(foreign_sm.begin(), foreign_sm.end());
    out.mean_foreign_sm = std::accumulate(foreign_sm.begin(), foreign_sm.end(), 0.0) / foreign_sm.size();
  }
  if (!device_util.empty()) {
    out.device_util_mean = std::accumulate(device_util.begin(), device_util.end(), 0.0) / device_util.size();
  }
  if (!clocks.empty()) {
    out.min_sm_clock_mhz = *std::min_element(clocks.begin(), clocks.end());
    out.median_sm_clock_mhz = median_of(clocks);
    out.max_sm_clock_mhz = *std::max_element(clocks.begin(), clocks.end());
  }

  std::vector<ForeignProcess> processes;
  for (const auto& [pid, process] : by_pid) processes.push_back(process);
  out.top_processes = foreign_processes_text(processes, 3);

  for (const auto& [bit, count] : bit_counts) {
    if (!out.throttle_reasons.empty()) out.throttle_reasons += ", ";
    out.throttle_reasons += clock_event_name(bit) + " " + std::to_string(count) + "/" + std::to_string(ordered.size());
  }

  const bool clock_dropped =
      clock_checked > 0 && static_cast<double>(clock_low) > policy.max_low_clock_sample_fraction * clock_checked;
  if (busy > 0 || clock_dropped) {
    out.contended = true;
  } else if (unknown == 0) {
    out.contended = false;
  }
  return out;
}

}  // namespace qgate::cotenant
