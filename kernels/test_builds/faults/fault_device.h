// The device side of the fault builds: what a fault does to CUDA memory. Compiled as CUDA
// (fault_device.cu) for the faults that need it when CUDA is enabled, else as the CPU-only
// fault_device_absent.cpp, whose functions report that they could not act.
#pragma once

#include <cstddef>
#include <cstdint>

/// Launches, on `stream`, a kernel that writes through a bad device pointer. False when no kernel
/// could be launched.
bool qgate_fault_device_illegal_write(void* stream);
/// Fills the n floats of device memory at y with NaN, enqueued on `stream`.
bool qgate_fault_device_fill_nan(float* y, int64_t n, void* stream);
/// Allocates `bytes` of device memory and never frees it.
bool qgate_fault_device_leak(size_t bytes);
