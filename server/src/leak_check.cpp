// The leak judge (see leak_check.h): growth across runs, memory kept at release or by a sweep.
#include "qgate/server/leak_check.h"

#include <cmath>
#include <cstdio>

namespace qgate::server {
namespace {

/// The host figure a reading is judged by: RssAnon when the worker sent it, else the whole RSS.
int64_t host_bytes(const v1::MemoryReading& r) {
  return r.host_anon_bytes() > 0 ? r.host_anon_bytes() : r.host_rss_bytes();
}
const char* host_name(const v1::MemoryReading& r) {
  return r.host_anon_bytes() > 0 ? "host memory" : "host RSS";
}
bool has_host(const v1::MemoryReading& r) { return host_bytes(r) > 0; }
bool has_device(const v1::MemoryReading& r) { return !r.device_source().empty(); }
bool same_device_source(const v1::MemoryReading& a, const v1::MemoryReading& b) {
  return has_device(a) && a.device_source() == b.device_source();
}
std::string source_note(const v1::MemoryReading& r) {
  return r.device_source() == "cuda-meminfo" ? " (device-wide reading: other processes count too)" : "";
}

/// One quantity's readings after the first run, and what they say.
struct Growth {
  int64_t total = 0;
  int steps = 0;
  int growing = 0;
};

Growth growth_of(const std::vector<int64_t>& series, int64_t step_bytes) {
  Growth g;
  for (size_t i = 1; i < series.size(); ++i) {
    ++g.steps;
    if (series[i] - series[i - 1] > step_bytes) ++g.growing;
  }
  if (!series.empty()) g.total = series.back() - series.front();
  return g;
}

bool is_leak(const Growth& g, int64_t threshold, const LeakThresholds& limits) {
  return g.steps >= limits.min_steps && g.total > threshold &&
         double(g.growing) >= std::ceil(limits.growing_step_fraction * double(g.steps) - 1e-9);
}

std::string growth_detail(const char* what, const Growth& g) {
  return std::string(what) + " grew " + format_bytes(g.total / g.steps) + " per run over " +
         std::to_string(g.steps + 1) + " runs (" + format_bytes(g.total) + "; " + std::to_string(g.growing) +
         " of " + std::to_string(g.steps) + " steps grew)";
}

std::optional<v1::MemoryLeak> growth_across_runs(const ArmMemory& arm, const LeakThresholds& limits) {
  // The first run's reading is the base: its lazy allocations are not the build's growth.
  std::vector<v1::MemoryReading> readings;
  for (const auto& r : arm.runs)
    if (has_host(r) || has_device(r)) readings.push_back(r);
  if (readings.size() < 2) return std::nullopt;
  const v1::MemoryReading& first = readings.front();

  std::vector<int64_t> device, host;
  for (const auto& r : readings) {
    if (same_device_source(first, r)) device.push_back(r.device_bytes());
    if (has_host(first) && has_host(r)) host.push_back(host_bytes(r));
  }
  v1::MemoryLeak leak;
  std::string detail;
  if (device.size() == readings.size()) {
    const Growth g = growth_of(device, limits.device_step_bytes);
    if (is_leak(g, limits.device_growth_bytes, limits)) {
      leak.set_device_bytes(g.total);
      detail = growth_detail("device memory", g) + source_note(first);
    }
  }
  if (host.size() == readings.size()) {
    const Growth g = growth_of(host, limits.host_step_bytes);
    if (is_leak(g, limits.host_growth_bytes, limits)) {
      leak.set_host_bytes(g.total);
      detail += (detail.empty() ? "" : "; ") + growth_detail(host_name(first), g);
    }
  }
  if (detail.empty()) return std::nullopt;
  leak.set_where("arm " + arm.arm + " across runs");
  leak.set_detail(detail);
  return leak;
}

/// What `after` holds beyond `before`, for the quantities over their thresholds. The detail reads
/// "<moment>: device memory 1.20 GiB more than <baseline> (512.0 MiB -> 1.70 GiB)".
std::optional<v1::MemoryLeak> kept(const v1::MemoryReading& before, const v1::MemoryReading& after,
                                   int64_t device_threshold, int64_t host_threshold, const std::string& where,
                                   const std::string& moment, const std::string& baseline) {
  v1::MemoryLeak leak;
  std::vector<std::string> findings;
  auto finding = [&](const std::string& what, int64_t a, int64_t b, const std::string& note) {
    return what + " " + format_bytes(b - a) + " more than " + baseline + " (" + format_bytes(a) + " -> " +
           format_bytes(b) + ")" + note;
  };
  if (same_device_source(before, after) && after.device_bytes() - before.device_bytes() > device_threshold) {
    leak.set_device_bytes(after.device_bytes() - before.device_bytes());
    findings.push_back(finding("device memory", before.device_bytes(), after.device_bytes(), source_note(before)));
  }
  if (has_host(before) && has_host(after) && host_bytes(after) - host_bytes(before) > host_threshold) {
    leak.set_host_bytes(host_bytes(after) - host_bytes(before));
    findings.push_back(finding(host_name(before), host_bytes(before), host_bytes(after), ""));
  }
  if (findings.empty()) return std::nullopt;
  std::string detail = moment + ": " + findings.front();
  for (size_t i = 1; i < findings.size(); ++i) detail += "; " + findings[i];
  leak.set_where(where);
  leak.set_detail(detail);
  return leak;
}

}  // namespace

std::string format_bytes(int64_t bytes) {
  char buf[32];
  const double mib = double(bytes) / (1024.0 * 1024.0);
  if (std::fabs(mib) >= 1024.0)
    std::snprintf(buf, sizeof buf, "%.2f GiB", mib / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", mib);
  return buf;
}

namespace {

/// What the first cycle kept (`first_kept`), judged again by a second cycle: growth across the
/// second is a leak of everything kept from `before` on, with each cycle's figures in the detail;
/// no growth makes the first's finding memory kept once.
std::optional<v1::MemoryLeak> judged_by_second_cycle(std::optional<v1::MemoryLeak> first_kept,
                                                     const v1::MemoryReading& before,
                                                     const v1::MemoryReading& after_first,
                                                     const v1::MemoryReading& after_second,
                                                     const std::string& where, const std::string& second_cycle,
                                                     const LeakThresholds& limits) {
  if (auto grew = kept(after_first, after_second, limits.device_cycle_bytes, limits.host_cycle_bytes, where,
                       "after " + second_cycle, "after the first cycle")) {
    if (first_kept) grew->set_detail(grew->detail() + "; the first cycle: " + first_kept->detail());
    // The bytes are all the build holds beyond `before` of what grew again.
    if (grew->device_bytes() > 0) grew->set_device_bytes(after_second.device_bytes() - before.device_bytes());
    if (grew->host_bytes() > 0) grew->set_host_bytes(host_bytes(after_second) - host_bytes(before));
    return grew;
  }
  if (!first_kept) return std::nullopt;
  first_kept->set_kept_once(true);
  first_kept->set_detail("kept once: " + first_kept->detail() + "; level after " + second_cycle);
  return first_kept;
}

}  // namespace

std::optional<v1::MemoryLeak> judge_arm_memory(const ArmMemory& arm, const LeakThresholds& limits) {
  if (auto leak = growth_across_runs(arm, limits)) return leak;
  if (!arm.released || !arm.prepared.has_memory_before() || !arm.released->has_memory()) return std::nullopt;
  const std::string where = "arm " + arm.arm + " at release";
  auto first = kept(arm.prepared.memory_before(), arm.released->memory(), limits.device_release_bytes,
                    limits.host_release_bytes, where,
                    "after releasing " + std::to_string(arm.released->released_gemms()) + " GEMM(s) and the context",
                    "before prepare");
  if (!arm.released->second_cycle()) return first;
  return judged_by_second_cycle(std::move(first), arm.prepared.memory_before(), arm.released->memory(),
                                arm.released->memory_after_second_cycle(),
                                where, "a second prepare, run and release", limits);
}

std::optional<v1::MemoryLeak> judge_parity_memory(const v1::WorkerSummary& summary, const LeakThresholds& limits) {
  if (!summary.has_memory_before() || !summary.has_memory_after()) return std::nullopt;
  auto first = kept(summary.memory_before(), summary.memory_after(), limits.device_sweep_bytes,
                    limits.host_sweep_bytes, "parity sweep",
                    "after the last of " + std::to_string(summary.cases()) + " cases", "before the first");
  if (!summary.has_memory_after_second_cycle()) return first;
  return judged_by_second_cycle(std::move(first), summary.memory_before(), summary.memory_after(),
                                summary.memory_after_second_cycle(),
                                "parity sweep",
                                "a second cycle of " + std::to_string(summary.second_cycle_runs()) + " runs", limits);
}

}  // namespace qgate::server
