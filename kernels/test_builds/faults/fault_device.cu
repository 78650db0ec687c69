// CUDA side of the fault builds (see fault_device.h): a kernel that writes through a bad
// pointer, a NaN fill, and a device allocation that is never freed.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "fault_device.h"

namespace {

__global__ void write_through(float* target) { target[threadIdx.x] = 1.0f; }

__global__ void fill_with_nan(float* y, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __int_as_float(0x7fc00000);
}

}  // namespace

bool qgate_fault_device_illegal_write(void* stream) {
  // A low address: never mapped for the device, and aligned, so the error is an illegal address
  // rather than a misaligned one.
  float* bad = reinterpret_cast<float*>(uintptr_t(0x10000));
  write_through<<<1, 32, 0, static_cast<cudaStream_t>(stream)>>>(bad);
  return cudaGetLastError() == cudaSuccess;
}

bool qgate_fault_device_fill_nan(float* y, int64_t n, void* stream) {
  if (n <= 0) return true;
  const int threads = 256;
  const int64_t blocks = (n + threads - 1) / threads;
  fill_with_nan<<<unsigned(blocks), threads, 0, static_cast<cudaStream_t>(stream)>>>(y, n);
  return cudaGetLastError() == cudaSuccess;
}

bool qgate_fault_device_leak(size_t bytes) {
  void* block = nullptr;
  return cudaMalloc(&block, bytes) == cudaSuccess;
}
