// The few NVML declarations qgate uses, written from NVML's documented ABI (nvml.h is not needed to
// build): opaque handles, the structs' layouts, the constants, and the function-pointer types that
// dlsym results are cast to. For the code that dlopens NVML: the co-tenant sampler, the worker's
// memory probe, and the fake-NVML test fixture (target qgate_nvml_api, a header only).
#pragma once

#include <cstdint>

namespace qgate::nvml {

using nvmlReturn_t = int;  // enum nvmlReturn_enum
using nvmlDevice_t = struct nvmlDevice_st*;
using nvmlClockType_t = int;           // enum nvmlClockType_enum
using nvmlTemperatureSensors_t = int;  // enum nvmlTemperatureSensors_enum

inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
inline constexpr nvmlClockType_t NVML_CLOCK_SM = 1;
inline constexpr nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU = 0;
inline constexpr unsigned NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
inline constexpr unsigned NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;

struct nvmlUtilization_t {
  unsigned int gpu;     // percent of time a kernel was running over the last sample period
  unsigned int memory;  // percent of time device memory was read or written
};

// nvmlProcessInfo_v2_t: what nvmlDeviceGetComputeRunningProcesses_v2/_v3 fill.
struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;  // bytes; NVML_VALUE_NOT_AVAILABLE (all ones) when unknown
  unsigned int gpuInstanceId;        // MIG only, else all ones
  unsigned int computeInstanceId;
};
inline constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE_ULL = ~0ULL;

struct nvmlProcessUtilizationSample_t {
  unsigned int pid;
  unsigned long long timeStamp;  // CPU timestamp, microseconds since the epoch
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};

using nvmlInit_fn = nvmlReturn_t (*)();
using nvmlShutdown_fn = nvmlReturn_t (*)();
using nvmlErrorString_fn = const char* (*)(nvmlReturn_t);
using nvmlSystemGetDriverVersion_fn = nvmlReturn_t (*)(char*, unsigned int);
using nvmlDeviceGetHandleByIndex_fn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using nvmlDeviceGetString_fn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);  // UUID, Name
using nvmlDeviceGetComputeRunningProcesses_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*);
using nvmlDeviceGetProcessUtilization_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlProcessUtilizationSample_t*,
                                                            unsigned int*, unsigned long long);
using nvmlDeviceGetUtilizationRates_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*);
using nvmlDeviceGetClock_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlClockType_t, unsigned int*);  // Clock, MaxClock
using nvmlDeviceGetReasons_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
using nvmlDeviceGetTemperature_fn = nvmlReturn_t (*)(nvmlDevice_t, nvmlTemperatureSensors_t, unsigned int*);
using nvmlDeviceGetPowerUsage_fn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);  // milliwatts

}  // namespace qgate::nvml
