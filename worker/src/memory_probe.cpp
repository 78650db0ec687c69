// Memory readings of the worker process: /proc/self/statm for the resident set, NVML (dlopen) for
// the device memory accounted to this pid. The NVML declarations are qgate_cotenant's.
#include "qgate/worker/memory_probe.h"

#include <malloc.h>
#include <unistd.h>

#include <fstream>
#include <limits>
#include <vector>

#include "qgate/nvml/nvml_loader.h"

namespace qgate::worker {

using namespace nvml;

int64_t host_rss_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size_pages = 0, resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) return 0;
  return resident_pages * int64_t(sysconf(_SC_PAGESIZE));
}

int64_t host_anon_bytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "RssAnon:") {
      int64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
    status.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

namespace {
using nvmlDeviceGetHandleByUUID_fn = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
}  // namespace

struct NvmlProcessMemory::Nvml {
  nvml::Loader loader;
  nvmlDevice_t device = nullptr;
  nvmlDeviceGetComputeRunningProcesses_fn get_processes = nullptr;
  nvmlSystemGetDriverVersion_fn get_driver_version = nullptr;
};

NvmlProcessMemory::NvmlProcessMemory(const std::string& uuid, unsigned index, const std::string& nvml_path)
    : nvml_(std::make_unique<Nvml>()) {
  auto& n = *nvml_;
  auto unavailable = [&](const std::string& why) {
    unavailable_reason_ = why;
    nvml_.reset();
  };
  if (const std::string why = n.loader.open(nvml_path); !why.empty()) {
    unavailable(why);
    return;
  }
  const auto by_index = n.loader.lookup<nvmlDeviceGetHandleByIndex_fn>(
      {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"});
  const auto by_uuid = n.loader.lookup<nvmlDeviceGetHandleByUUID_fn>({"nvmlDeviceGetHandleByUUID"});
  // _v2 and _v3 fill the nvmlProcessInfo_v2_t layout; the v1 layout differs and is not used.
  n.get_processes = n.loader.lookup<nvmlDeviceGetComputeRunningProcesses_fn>(
      {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"});
  n.get_driver_version = n.loader.lookup<nvmlSystemGetDriverVersion_fn>({"nvmlSystemGetDriverVersion"});
  if (!by_index || !n.get_processes) {
    unavailable(nvml_path + " lacks nvmlDeviceGetHandleByIndex or nvmlDeviceGetComputeRunningProcesses_v2/_v3");
    return;
  }
  if (!uuid.empty() && by_uuid && by_uuid(uuid.c_str(), &n.device) == NVML_SUCCESS) return;
  if (const nvmlReturn_t rc = by_index(index, &n.device); rc != NVML_SUCCESS)
    unavailable("NVML has no device " + (uuid.empty() ? "" : uuid + " or ") + "at index " + std::to_string(index) +
                " (" + n.loader.describe("nvmlDeviceGetHandleByIndex_v2", rc) + ")");
}

NvmlProcessMemory::~NvmlProcessMemory() = default;

std::string NvmlProcessMemory::driver_version() const {
  if (!nvml_ || !nvml_->get_driver_version) return "";
  char text[96] = {};
  if (nvml_->get_driver_version(text, sizeof text) != NVML_SUCCESS) return "";
  return text;
}

std::optional<int64_t> NvmlProcessMemory::used_by(int pid) const {
  if (!nvml_) return std::nullopt;
  std::vector<nvmlProcessInfo_t> processes;
  unsigned count = 0;
  nvmlReturn_t rc = nvml_->get_processes(nvml_->device, &count, nullptr);
  for (int attempt = 0; attempt < 4 && rc == NVML_ERROR_INSUFFICIENT_SIZE; ++attempt) {
    processes.assign(count + 8, nvmlProcessInfo_t{});  // room for processes that start meanwhile
    count = unsigned(processes.size());
    rc = nvml_->get_processes(nvml_->device, &count, processes.data());
  }
  if (rc != NVML_SUCCESS) return std::nullopt;
  processes.resize(std::min<size_t>(count, processes.size()));
  for (const auto& p : processes)
    if (int(p.pid) == pid && p.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE_ULL) return int64_t(p.usedGpuMemory);
  return std::nullopt;
}

v1::MemoryReading read_memory(DeviceApi& device) {
  v1::MemoryReading reading;
  // Work still queued could allocate or free; a sticky CUDA error must not stop the reading.
  try {
    device.synchronize();
  } catch (const DeviceError&) {
  }
  // Freed heap memory stays resident until trimmed; a correct build's frees must not read as held.
  malloc_trim(0);
  reading.set_host_rss_bytes(host_rss_bytes());
  reading.set_host_anon_bytes(host_anon_bytes());
  const DeviceMemoryUse use = device.memory_in_use();
  reading.set_device_bytes(use.bytes);
  reading.set_device_source(use.source);
  return reading;
}

}  // namespace qgate::worker
