// Sample helpers: clock-event names, foreign load, store rows and the JSON-lines trace format.
#include "qgate/cotenant/sample.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace qgate::cotenant {

std::string clock_event_name(std::uint64_t bit) {
  switch (bit) {
    case kClockEventGpuIdle:
      return "gpu_idle";
    case kClockEventApplicationsClocksSetting:
      return "applications_clocks_setting";
    case kClockEventSwPowerCap:
      return "sw_power_cap";
    case kClockEventHwSlowdown:
      return "hw_slowdown";
    case kClockEventSwThermalSlowdown:
      return "sw_thermal_slowdown";
    case kClockEventHwThermalSlowdown:
      return "hw_thermal_slowdown";
    case kClockEventHwPowerBrakeSlowdown:
      return "hw_power_brake_slowdown";
    case kClockEventDisplayClockSetting:
      return "display_clock_setting";
    default: {
      char text[24];
      std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(bit));
      return text;
    }
  }
}

std::string decode_clock_event_reasons(std::uint64_t mask) {
  std::string text;
  for (int i = 0; i < 64; ++i) {
    const std::uint64_t bit = std::uint64_t{1} << i;
    if ((mask & bit) == 0) continue;
    if (!text.empty()) text += ", ";
    text += clock_event_name(bit);
  }
  return text;
}

std::optional<double> foreign_sm_percent(const Sample& sample) {
  if (!sample.processes_listed) return std::nullopt;
  if (sample.foreign.empty()) return 0.0;
  double sum = 0.0;
  bool any_known = false;
  for (const auto& process : sample.foreign) {
    if (!process.sm_percent) continue;
    sum += *process.sm_percent;
    any_known = true;
  }
  if (!any_known) return std::nullopt;
  return std::min(sum, 100.0);
}

std::string foreign_processes_text(const std::vector<ForeignProcess>& processes, std::size_t limit) {
  std::vector<const ForeignProcess*> order;
  for (const auto& process : processes) order.push_back(&process);
  // Highest SM% first, unknown last; ties by name then pid so the text is stable.
  std::stable_sort(order.begin(), order.end(), [](const ForeignProcess* a, const ForeignProcess* b) {
    const double sa = a->sm_percent.value_or(-1.0);
    const double sb = b->sm_percent.value_or(-1.0);
    if (sa != sb) return sa > sb;
    if (a->name != b->name) return a->name < b->name;
    return a->pid < b->pid;
  });
  std::string text;
  for (std::size_t i = 0; i < order.size() && i < limit; ++i) {
    if (!text.empty()) text += ", ";
    text += order[i]->name + "@";
    text += order[i]->sm_percent ? std::to_string(std::lround(*order[i]->sm_percent)) : "?";
    text += "%";
  }
  return text;
}

SampleRow to_row(const Sample& sample) {
  SampleRow row;
  row.t_ms = sample.t_ms;
  row.foreign_sm = foreign_sm_percent(sample);
  row.device_util = sample.device_util;
  row.sm_clock_mhz = sample.sm_clock_mhz;
  if (sample.clock_event_reasons) row.throttle_reasons = static_cast<std::int64_t>(*sample.clock_event_reasons);
  row.foreign_processes = sample.processes_listed ? foreign_processes_text(sample.foreign) : "?";
  return row;
}

std::vector<SampleRow> to_rows(const std::vector<Sample>& samples) {
  std::vector<SampleRow> rows;
  rows.reserve(samples.size());
  for (const auto& sample : samples) rows.push_back(to_row(sample));
  return rows;
}

namespace {

template <typename T>
void put(nlohmann::json& json, const char* key, const std::optional<T>& value) {
  if (value) json[key] = *value;
}

template <typename T>
void get(const nlohmann::json& json, const char* key, std::optional<T>& value) {
  const auto it = json.find(key);
  if (it == json.end() || it->is_null()) {
    value.reset();
    return;
  }
  value = it->get<T>();
}

}  // namespace

void to_json(nlohmann::json& json, const ForeignProcess& process) {
  json = nlohmann::json::object();
  json["pid"] = process.pid;
  json["name"] = process.name;
  put(json, "used_memory_bytes", process.used_memory_bytes);
  put(json, "sm_percent", process.sm_percent);
}

void from_json(const nlohmann::json& json, ForeignProcess& process) {
  process.pid = json.at("pid").get<int>();
  process.name = json.value("name", std::string{});
  get(json, "used_memory_bytes", process.used_memory_bytes);
  get(json, "sm_percent", process.sm_percent);
}

void to_json(nlohmann::json& json, const Sample& sample) {
  json = nlohmann::json::object();
  json["t_ms"] = sample.t_ms;
  put(json, "device_util", sample.device_util);
  put(json, "sm_clock_mhz", sample.sm_clock_mhz);
  put(json, "max_sm_clock_mhz", sample.max_sm_clock_mhz);
  put(json, "clock_event_reasons", sample.clock_event_reasons);
  put(json, "temperature_c", sample.temperature_c);
  put(json, "power_w", sample.power_w);
  json["processes_listed"] = sample.processes_listed;
  json["foreign"] = sample.foreign;
}

void from_json(const nlohmann::json& json, Sample& sample) {
  sample.t_ms = json.at("t_ms").get<std::int64_t>();
  get(json, "device_util", sample.device_util);
  get(json, "sm_clock_mhz", sample.sm_clock_mhz);
  get(json, "max_sm_clock_mhz", sample.max_sm_clock_mhz);
  get(json, "clock_event_reasons", sample.clock_event_reasons);
  get(json, "temperature_c", sample.temperature_c);
  get(json, "power_w", sample.power_w);
  sample.processes_listed = json.value("processes_listed", true);
  sample.foreign.clear();
  if (const auto it = json.find("foreign"); it != json.end() && !it->is_null()) {
    sample.foreign = it->get<std::vector<ForeignProcess>>();
  }
}

std::string to_json_line(const Sample& sample) { return nlohmann::json(sample).dump(); }

Sample sample_from_json_line(const std::string& line) {
  try {
    const auto json = nlohmann::json::parse(line);
    if (!json.is_object()) throw std::invalid_argument("not a JSON object");
    return json.get<Sample>();
  } catch (const nlohmann::json::exception& error) {
    throw std::invalid_argument(std::string("not a co-tenant sample: ") + error.what());
  }
}

}  // namespace qgate::cotenant
