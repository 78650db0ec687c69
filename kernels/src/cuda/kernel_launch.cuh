// Host-side launch plumbing the MMQ kernels share: a kernel's one-time shared-memory opt-in per
// device, the launch as a programmatic dependent of the work before it on sm_90+, and the switch
// from a ggml weight type id to the kernel template instantiated for it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <type_traits>
#include <utility>

#include "cuda/block_formats.cuh"

namespace qgate::cuda::launch {

/// Makes the current device allow `Kernel` `smem` bytes of dynamic shared memory (once per device;
/// every call for devices past the 64th), and says in `*pdl` whether the device takes programmatic
/// dependent launches (compute capability 9.0 or newer).
template <auto Kernel>
cudaError_t prepare(int smem, bool* pdl) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  static std::mutex mu;
  static uint64_t done_mask = 0;  // devices that have the opt-in
  static uint64_t pdl_mask = 0;   // devices of sm_90 or newer
  std::lock_guard<std::mutex> lock(mu);
  const uint64_t bit = dev < 64 ? (uint64_t{1} << dev) : 0;
  if (bit == 0 || (done_mask & bit) == 0) {
    e = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess) return e;
    int major = 0;
    e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (e != cudaSuccess) return e;
    if (major >= 9) pdl_mask |= bit;
    done_mask |= bit;
  }
  *pdl = (pdl_mask & bit) != 0;
  return cudaSuccess;
}

/// How many CTAs of `Kernel` (`threads` threads, `smem` bytes of dynamic shared memory) the current
/// device holds at once, over all its multiprocessors, into `*ctas` (at least 1); worked out once per
/// device (every call for devices past the 64th). A persistent grid of that size loops over its work
/// instead of leaving it to a second wave.
template <auto Kernel>
cudaError_t resident_ctas(int threads, int smem, int* ctas) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  static std::mutex mu;
  static int known[64] = {};
  std::lock_guard<std::mutex> lock(mu);
  if (dev < 64 && known[dev] > 0) {
    *ctas = known[dev];
    return cudaSuccess;
  }
  int per_sm = 0, sms = 0;
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, threads, static_cast<size_t>(smem));
  if (e != cudaSuccess) return e;
  e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e != cudaSuccess) return e;
  const int n = per_sm * sms > 0 ? per_sm * sms : 1;
  if (dev < 64) known[dev] = n;
  *ctas = n;
  return cudaSuccess;
}

/// Enqueues `kernel` on `stream`, as a programmatic dependent of the work before it when `pdl`
/// (the kernel then waits with griddepcontrol.wait before it reads that work's results). Returns a
/// cudaError_t value as int.
template <class... Params, class... Args>
int dependent(void (*kernel)(Params...), dim3 grid, dim3 block, int smem, cudaStream_t stream, bool pdl,
              Args&&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = static_cast<size_t>(smem);
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = pdl ? 1 : 0;
  const cudaError_t e = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (e != cudaSuccess) return static_cast<int>(e);
  return static_cast<int>(cudaGetLastError());
}

/// f(std::integral_constant<int, TYPE>{}) for the ggml weight type id `type`, or
/// cudaErrorInvalidValue for an id that is none of the eight types the kernels take.
template <class F>
int with_weight_type(int32_t type, F&& f) {
  using namespace blocks;
  switch (type) {
    case kQ4_0: return f(std::integral_constant<int, kQ4_0>{});
    case kQ4_1: return f(std::integral_constant<int, kQ4_1>{});
    case kQ5_0: return f(std::integral_constant<int, kQ5_0>{});
    case kQ5_1: return f(std::integral_constant<int, kQ5_1>{});
    case kQ8_0: return f(std::integral_constant<int, kQ8_0>{});
    case kQ4_K: return f(std::integral_constant<int, kQ4_K>{});
    case kQ5_K: return f(std::integral_constant<int, kQ5_K>{});
    case kQ6_K: return f(std::integral_constant<int, kQ6_K>{});
    default: return static_cast<int>(cudaErrorInvalidValue);
  }
}

}  // namespace qgate::cuda::launch
