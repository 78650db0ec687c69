// The sampler of a real GPU: NVML, loaded with dlopen at run time (no header or library at build time).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "qgate/cotenant/clock.h"
#include "qgate/cotenant/sampler.h"

namespace qgate::cotenant {

struct NvmlSamplerOptions {
  unsigned device_index = 0;                  // NVML index (not CUDA_VISIBLE_DEVICES order)
  std::string nvml_path = "libnvidia-ml.so.1";  // dlopen name or path (tests point it at a fake)
  /// Look-back of nvmlDeviceGetProcessUtilization (its lastSeenTimeStamp is now minus this): longer
  /// than NVML's ~1/6 s refresh, so every read sees at least one sample of a busy process.
  std::int64_t process_window_ms = 250;
  std::string proc_root = "/proc";  // where <pid>/comm names come from
};

class NvmlSampler final : public Sampler {
 public:
  /// Loads NVML and opens the device; never throws for a missing library or device, it records why.
  explicit NvmlSampler(NvmlSamplerOptions options = {}, const Clock& clock = system_clock());
  ~NvmlSampler() override;
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;

  std::optional<Sample> read(const std::set<int>& own_pids) override;
  bool available() const override;
  std::string unavailable_reason() const override;

  /// The device's NVML UUID and name ("" when unavailable).
  std::string device_uuid() const;
  std::string device_name() const;
  /// The last NVML failure seen by read() ("nvmlDeviceGetPowerUsage: Not Supported"), for logs.
  std::string last_error() const;

 private:
  struct Nvml;
  /// In `own_pids`, or in the process group of one of them (a program an own worker started).
  bool is_own(const std::set<int>& own_pids, int pid);
  NvmlSamplerOptions options_;
  const Clock& clock_;
  std::unique_ptr<Nvml> nvml_;
  std::string unavailable_reason_;
  std::string uuid_;
  std::string name_;
  mutable std::mutex mutex_;
  std::string last_error_;
  std::map<int, int> own_group_of_;  // pids found in an own process group -> that group
};

}  // namespace qgate::cotenant
