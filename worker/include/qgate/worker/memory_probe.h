// How much memory the worker process holds: its resident set from /proc, and the device memory
// NVML accounts to it (libnvidia-ml loaded at run time, no header or library needed to build).
// qgated compares these readings across a build's runs and its release to find leaks.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "qgate/v1/worker.pb.h"
#include "qgate/worker/device_api.h"

namespace qgate::worker {

/// Resident set size of this process in bytes (/proc/self/statm), 0 when it cannot be read.
int64_t host_rss_bytes();
/// The anonymous part of it (RssAnon in /proc/self/status: heap, stacks, anonymous maps, not the
/// pages of mapped files), 0 when it cannot be read.
int64_t host_anon_bytes();

/// Device memory used per process, as NVML lists it for one device. Never throws: a missing
/// library, symbol or device leaves it unavailable with the reason.
class NvmlProcessMemory {
 public:
  /// Opens the device whose UUID is `uuid` ("GPU-..."; the CUDA ordinal and the NVML index can
  /// differ), or NVML index `index` when the UUID is empty or cannot be looked up.
  NvmlProcessMemory(const std::string& uuid, unsigned index, const std::string& nvml_path = "libnvidia-ml.so.1");
  ~NvmlProcessMemory();
  NvmlProcessMemory(const NvmlProcessMemory&) = delete;
  NvmlProcessMemory& operator=(const NvmlProcessMemory&) = delete;

  bool available() const { return nvml_ != nullptr; }
  const std::string& unavailable_reason() const { return unavailable_reason_; }
  /// The device memory NVML accounts to `pid`; nullopt when NVML does not list it (another pid
  /// namespace, as in a container, or no context yet) or does not know its figure.
  std::optional<int64_t> used_by(int pid) const;
  /// The NVIDIA driver's version ("580.159.04"); "" when NVML does not say.
  std::string driver_version() const;

 private:
  struct Nvml;
  std::unique_ptr<Nvml> nvml_;
  std::string unavailable_reason_;
};

/// One reading of this process: the device synchronized first, freed heap pages handed back to
/// the system (malloc_trim), so what remains is what is really held.
v1::MemoryReading read_memory(DeviceApi& device);

}  // namespace qgate::worker
