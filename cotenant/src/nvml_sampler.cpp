// NvmlSampler: NVML through dlopen. A missing library, symbol or device makes the sampler
// unavailable with the reason; a failing query leaves that figure unknown. Nothing here throws.
#include "qgate/cotenant/nvml_sampler.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <vector>

#include "qgate/nvml/nvml_loader.h"

namespace qgate::cotenant {

using namespace nvml;

struct NvmlSampler::Nvml {
  nvml::Loader loader;
  nvmlDevice_t device = nullptr;

  nvmlDeviceGetHandleByIndex_fn get_handle = nullptr;
  nvmlDeviceGetString_fn get_uuid = nullptr;
  nvmlDeviceGetString_fn get_name = nullptr;
  nvmlDeviceGetComputeRunningProcesses_fn get_processes = nullptr;
  nvmlDeviceGetProcessUtilization_fn get_process_utilization = nullptr;
  nvmlDeviceGetUtilizationRates_fn get_utilization = nullptr;
  nvmlDeviceGetClock_fn get_clock = nullptr;
  nvmlDeviceGetClock_fn get_max_clock = nullptr;
  nvmlDeviceGetReasons_fn get_reasons = nullptr;
  nvmlDeviceGetTemperature_fn get_temperature = nullptr;
  nvmlDeviceGetPowerUsage_fn get_power = nullptr;

  template <typename Fn>
  Fn lookup(std::initializer_list<const char*> names) const {
    return loader.template lookup<Fn>(names);
  }
  std::string describe(const char* call, nvmlReturn_t rc) const { return loader.describe(call, rc); }
};

NvmlSampler::NvmlSampler(NvmlSamplerOptions options, const Clock& clock)
    : options_(std::move(options)), clock_(clock), nvml_(std::make_unique<Nvml>()) {
  auto& n = *nvml_;
  if (std::string why = n.loader.open(options_.nvml_path); !why.empty()) {
    unavailable_reason_ = std::move(why);
    nvml_.reset();
    return;
  }
  n.get_handle =
      n.lookup<nvmlDeviceGetHandleByIndex_fn>({"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  n.get_uuid = n.lookup<nvmlDeviceGetString_fn>({"nvmlDeviceGetUUID"});
  n.get_name = n.lookup<nvmlDeviceGetString_fn>({"nvmlDeviceGetName"});
  // _v2 fills the same nvmlProcessInfo_v2_t layout as _v3; the v1 layout differs and is not used.
  n.get_processes = n.lookup<nvmlDeviceGetComputeRunningProcesses_fn>(
      {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"});
  n.get_process_utilization = n.lookup<nvmlDeviceGetProcessUtilization_fn>({"nvmlDeviceGetProcessUtilization"});
  n.get_utilization = n.lookup<nvmlDeviceGetUtilizationRates_fn>({"nvmlDeviceGetUtilizationRates"});
  n.get_clock = n.lookup<nvmlDeviceGetClock_fn>({"nvmlDeviceGetClockInfo"});
  n.get_max_clock = n.lookup<nvmlDeviceGetClock_fn>({"nvmlDeviceGetMaxClockInfo"});
  n.get_reasons = n.lookup<nvmlDeviceGetReasons_fn>(
      {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"});
  n.get_temperature = n.lookup<nvmlDeviceGetTemperature_fn>({"nvmlDeviceGetTemperature"});
  n.get_power = n.lookup<nvmlDeviceGetPowerUsage_fn>({"nvmlDeviceGetPowerUsage"});

  if (!n.get_handle) {
    unavailable_reason_ = options_.nvml_path + " lacks nvmlDeviceGetHandleByIndex";
    nvml_.reset();
    return;
  }
  if (const nvmlReturn_t rc = n.get_handle(options_.device_index, &n.device); rc != NVML_SUCCESS) {
    unavailable_reason_ = n.describe("nvmlDeviceGetHandleByIndex_v2", rc) + " (device index " +
                          std::to_string(options_.device_index) + ")";
    nvml_.reset();
    return;
  }
  char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  if (n.get_uuid && n.get_uuid(n.device, text, sizeof text) == NVML_SUCCESS) uuid_ = text;
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  if (n.get_name && n.get_name(n.device, name, sizeof name) == NVML_SUCCESS) name_ = name;
}

NvmlSampler::~NvmlSampler() = default;

bool NvmlSampler::available() const { return nvml_ != nullptr; }
std::string NvmlSampler::unavailable_reason() const { return unavailable_reason_; }
std::string NvmlSampler::device_uuid() const { return uuid_; }
std::string NvmlSampler::device_name() const { return name_; }

std::string NvmlSampler::last_error() const {
  std::lock_guard lock(mutex_);
  return last_error_;
}

namespace {

std::string process_name(const std::string& proc_root, int pid) {
  std::ifstream comm(proc_root + "/" + std::to_string(pid) + "/comm");
  std::string name;
  if (comm && std::getline(comm, name) && !name.empty()) return name;
  return "pid" + std::to_string(pid);
}

/// The process group of `pid` from /proc/<pid>/stat ("pid (comm) state ppid pgrp ..."), 0 when unknown.
int process_group(const std::string& proc_root, int pid) {
  std::ifstream stat(proc_root + "/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(text.substr(close + 1));
  std::string state;
  int ppid = 0, pgrp = 0;
  return rest >> state >> ppid >> pgrp ? pgrp : 0;
}

// Calls a "fill an array, or say how big it must be" NVML function until the array is big enough.
// Returns the call's final code; `items` holds what it filled.
template <typename T, typename Call>
nvmlReturn_t fill_array(std::vector<T>& items, Call call) {
  unsigned count = 0;
  nvmlReturn_t rc = call(nullptr, &count);
  for (int attempt = 0; attempt < 4 && rc == NVML_ERROR_INSUFFICIENT_SIZE; ++attempt) {
    // Room for a few more: processes can start between the size probe and the fill.
    items.assign(count + 8, T{});
    count = static_cast<unsigned>(items.size());
    rc = call(items.data(), &count);
  }
  items.resize(rc == NVML_SUCCESS ? std::min<std::size_t>(count, items.size()) : 0);
  return rc;
}

}  // namespace

bool NvmlSampler::is_own(const std::set<int>& own_pids, int pid) {
  if (own_pids.contains(pid)) return true;
  // What an own process starts (a command arm's program) stays in its process group, whose leader
  // is the own worker. Remembered, so a program that has exited but still shows in the window's
  // utilization samples is still known.
  if (const auto seen = own_group_of_.find(pid); seen != own_group_of_.end()) return own_pids.contains(seen->second);
  const int group = process_group(options_.proc_root, pid);
  if (group > 0 && group != pid && own_pids.contains(group)) {
    if (own_group_of_.size() > 4096) own_group_of_.clear();
    own_group_of_[pid] = group;
    return true;
  }
  return false;
}

std::optional<Sample> NvmlSampler::read(const std::set<int>& own_pids) {
  std::lock_guard lock(mutex_);
  if (!nvml_) return std::nullopt;
  auto& n = *nvml_;
  Sample sample;
  sample.t_ms = clock_.now_ms();
  bool any = false;
  auto failed = [&](const char* call, nvmlReturn_t rc) { last_error_ = n.describe(call, rc); };

  if (n.get_utilization) {
    nvmlUtilization_t utilization{};
    if (const auto rc = n.get_utilization(n.device, &utilization); rc == NVML_SUCCESS) {
      sample.device_util = utilization.gpu;
      any = true;
    } else {
      failed("nvmlDeviceGetUtilizationRates", rc);
    }
  }
  unsigned value = 0;
  if (n.get_clock) {
    if (const auto rc = n.get_clock(n.device, NVML_CLOCK_SM, &value); rc == NVML_SUCCESS) {
      sample.sm_clock_mhz = value;
      any = true;
    } else {
      failed("nvmlDeviceGetClockInfo", rc);
    }
  }
  if (n.get_max_clock) {
    if (const auto rc = n.get_max_clock(n.device, NVML_CLOCK_SM, &value); rc == NVML_SUCCESS) {
      sample.max_sm_clock_mhz = value;
    } else {
      failed("nvmlDeviceGetMaxClockInfo", rc);
    }
  }
  if (n.get_reasons) {
    unsigned long long reasons = 0;
    if (const auto rc = n.get_reasons(n.device, &reasons); rc == NVML_SUCCESS) {
      sample.clock_event_reasons = reasons;
      any = true;
    } else {
      failed("nvmlDeviceGetCurrentClocksEventReasons", rc);
    }
  }
  if (n.get_temperature) {
    if (const auto rc = n.get_temperature(n.device, NVML_TEMPERATURE_GPU, &value); rc == NVML_SUCCESS) {
      sample.temperature_c = value;
      any = true;
    } else {
      failed("nvmlDeviceGetTemperature", rc);
    }
  }
  if (n.get_power) {
    if (const auto rc = n.get_power(n.device, &value); rc == NVML_SUCCESS) {
      sample.power_w = value / 1000.0;
      any = true;
    } else {
      failed("nvmlDeviceGetPowerUsage", rc);
    }
  }

  // Per-process SM%: the highest of each pid's samples in the look-back window. NOT_FOUND means no
  // process ran a kernel in the window: every listed process is at 0%.
  bool utilization_known = false;
  std::map<int, double> sm_by_pid;
  if (n.get_process_utilization) {
    const auto now_us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    const long long since_us = now_us - options_.process_window_ms * 1000;
    const auto last_seen = static_cast<unsigned long long>(std::max<long long>(since_us, 0));
    std::vector<nvmlProcessUtilizationSample_t> utilization;
    const auto rc = fill_array(utilization, [&](nvmlProcessUtilizationSample_t* data, unsigned* count) {
      return n.get_process_utilization(n.device, data, count, last_seen);
    });
    if (rc == NVML_SUCCESS || rc == NVML_ERROR_NOT_FOUND) {
      utilization_known = true;
      for (const auto& entry : utilization) {
        // Entries older than the window can come back on some drivers; ignore them.
        if (entry.timeStamp < last_seen) continue;
        auto& sm = sm_by_pid[static_cast<int>(entry.pid)];
        sm = std::max(sm, static_cast<double>(entry.smUtil));
      }
    } else {
      failed("nvmlDeviceGetProcessUtilization", rc);
    }
  }

  sample.processes_listed = false;
  if (n.get_processes) {
    std::vector<nvmlProcessInfo_t> processes;
    const auto rc = fill_array(
        processes, [&](nvmlProcessInfo_t* data, unsigned* count) { return n.get_processes(n.device, count, data); });
    if (rc == NVML_SUCCESS) {
      sample.processes_listed = true;
      any = true;
      std::set<int> listed;
      for (const auto& info : processes) {
        const int pid = static_cast<int>(info.pid);
        if (is_own(own_pids, pid) || !listed.insert(pid).second) continue;
        ForeignProcess process;
        process.pid = pid;
        process.name = process_name(options_.proc_root, pid);
        if (info.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE_ULL) process.used_memory_bytes = info.usedGpuMemory;
        if (utilization_known) {
          const auto it = sm_by_pid.find(pid);
          process.sm_percent = it == sm_by_pid.end() ? 0.0 : it->second;
        }
        sample.foreign.push_back(std::move(process));
      }
      // A process that ran kernels in the window but has left the compute list (or is a graphics
      // context) still used the SMs during the run: keep it.
      for (const auto& [pid, sm] : sm_by_pid) {
        if (listed.contains(pid) || sm <= 0.0 || is_own(own_pids, pid)) continue;
        sample.foreign.push_back({pid, process_name(options_.proc_root, pid), std::nullopt, sm});
      }
    } else {
      failed("nvmlDeviceGetComputeRunningProcesses_v3", rc);
    }
  }
  if (!any) return std::nullopt;
  return sample;
}

}  // namespace qgate::cotenant
