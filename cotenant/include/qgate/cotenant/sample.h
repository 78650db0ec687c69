// One reading of the GPU's co-tenant state, its JSON-lines form (traces) and its store-row form.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace qgate::cotenant {

/// A compute process on the device that is not one of the caller's own.
struct ForeignProcess {
  int pid = 0;
  std::string name;                                // /proc/<pid>/comm, or "pid<N>" when unreadable
  std::optional<std::uint64_t> used_memory_bytes;  // none: NVML did not say
  /// SM utilisation in percent over the sampler's look-back window; none when per-process
  /// utilisation is unsupported (then the sample cannot be called quiet).
  std::optional<double> sm_percent;

  bool operator==(const ForeignProcess&) const = default;
};

/// One reading. Every figure is optional: a query that failed or is unsupported stays unknown.
struct Sample {
  std::int64_t t_ms = 0;              // the sampler's Clock (epoch ms by default)
  std::optional<double> device_util;  // percent of time a kernel ran (nvmlDeviceGetUtilizationRates.gpu)
  std::optional<std::int64_t> sm_clock_mhz;
  std::optional<std::int64_t> max_sm_clock_mhz;
  std::optional<std::uint64_t> clock_event_reasons;  // NVML clock-event (throttle) reason bit mask
  std::optional<std::int64_t> temperature_c;
  std::optional<double> power_w;
  /// false when the compute-process list could not be read: `foreign` is then unknown, not empty.
  bool processes_listed = true;
  std::vector<ForeignProcess> foreign;

  bool operator==(const Sample&) const = default;
};

// --- NVML clock-event reason bits (nvmlClocksEventReason*, formerly nvmlClocksThrottleReason*) ---
inline constexpr std::uint64_t kClockEventGpuIdle = 0x1;
inline constexpr std::uint64_t kClockEventApplicationsClocksSetting = 0x2;
inline constexpr std::uint64_t kClockEventSwPowerCap = 0x4;
inline constexpr std::uint64_t kClockEventHwSlowdown = 0x8;
inline constexpr std::uint64_t kClockEventSwThermalSlowdown = 0x20;
inline constexpr std::uint64_t kClockEventHwThermalSlowdown = 0x40;
inline constexpr std::uint64_t kClockEventHwPowerBrakeSlowdown = 0x80;
inline constexpr std::uint64_t kClockEventDisplayClockSetting = 0x100;

/// Name of one known bit ("sw_power_cap"), or "0x200" for a bit NVML added after this list.
std::string clock_event_name(std::uint64_t bit);
/// "sw_power_cap, hw_slowdown, 0x200"; "" for 0.
std::string decode_clock_event_reasons(std::uint64_t mask);

/// Sum of the foreign processes' SM% (capped at 100): the share of the SMs others used. 0 with no
/// foreign process; none when the list is unknown or every foreign process's SM% is unknown.
std::optional<double> foreign_sm_percent(const Sample& sample);
/// "sglang@96%, python@12%": foreign processes by SM% (highest first), at most `limit`; "?" for unknown.
std::string foreign_processes_text(const std::vector<ForeignProcess>& processes, std::size_t limit = 3);

/// Plain mirror of db::CotenantSample (field for field) for the lead to convert.
struct SampleRow {
  std::int64_t t_ms = 0;
  std::optional<double> foreign_sm;
  std::optional<double> device_util;
  std::optional<std::int64_t> sm_clock_mhz;
  std::optional<std::int64_t> throttle_reasons;
  std::string foreign_processes;
};
SampleRow to_row(const Sample& sample);
std::vector<SampleRow> to_rows(const std::vector<Sample>& samples);

// --- JSON: field names are the struct's; unknown figures are left out (null is accepted too) ---
void to_json(nlohmann::json& json, const ForeignProcess& process);
void from_json(const nlohmann::json& json, ForeignProcess& process);
void to_json(nlohmann::json& json, const Sample& sample);
void from_json(const nlohmann::json& json, Sample& sample);
/// One line of a trace, without the newline.
std::string to_json_line(const Sample& sample);
/// Throws std::invalid_argument on text that is not a Sample.
Sample sample_from_json_line(const std::string& line);

}  // namespace qgate::cotenant
