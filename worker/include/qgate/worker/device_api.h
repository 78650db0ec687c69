// The worker's view of where a GEMM runs: memory, stream, timing and a description of the device.
// The CPU implementation uses host memory and a steady clock; the CUDA one uses cudaMalloc,
// one stream and CUDA events. The kernel build only ever sees pointers and the stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "qgate/kernel_abi.h"
#include "qgate/v1/worker.pb.h"

namespace qgate::worker {

/// A device call failed; `out_of_memory` tells the caller to report it as such, `cuda_error`
/// names the CUDA error it came from ("cudaErrorIllegalAddress"; "" when none did), and
/// `last_build_call` the build entry point called last when it was thrown (before the unwinding
/// releases anything).
class DeviceError : public std::runtime_error {
 public:
  DeviceError(const std::string& what, bool out_of_memory = false, std::string cuda_error = "",
              std::string last_build_call = "")
      : std::runtime_error(what),
        out_of_memory_(out_of_memory),
        cuda_error_(std::move(cuda_error)),
        last_build_call_(std::move(last_build_call)) {}
  bool out_of_memory() const { return out_of_memory_; }
  const std::string& cuda_error() const { return cuda_error_; }
  const std::string& last_build_call() const { return last_build_call_; }

 private:
  bool out_of_memory_;
  std::string cuda_error_;
  std::string last_build_call_;
};

/// Device memory this process holds, and how it was read.
struct DeviceMemoryUse {
  int64_t bytes = 0;
  std::string source;  // "nvml-process", "cuda-meminfo" (device-wide: every process), "" (none)
};

class DeviceApi {
 public:
  virtual ~DeviceApi() = default;
  virtual qgate_backend backend() const = 0;
  virtual int device_ordinal() const = 0;
  /// Throws DeviceError(out_of_memory=true) when the memory is not there.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* ptr) noexcept = 0;
  virtual void upload(void* dst, const void* src, size_t bytes) = 0;
  virtual void download(void* dst, const void* src, size_t bytes) = 0;
  virtual void fill_bytes(void* dst, uint8_t value, size_t bytes) = 0;
  /// The stream handed to qgate_gemm_run (a cudaStream_t, or nullptr on the CPU).
  virtual void* stream() = 0;
  virtual void synchronize() = 0;
  /// Runs `enqueue` once and returns the device time it took, in microseconds
  /// (events around it on CUDA; the wall clock on the CPU, where the call is synchronous).
  virtual double time_us(const std::function<void()>& enqueue) = 0;
  /// Evicts the last-level cache so the next timed call starts cold (no-op on the CPU).
  virtual void flush_cache() = 0;
  virtual void describe(v1::RunContext* context) const = 0;
  /// Device memory held now: NVML's figure for this process where it lists it, else the
  /// device-wide used memory; nothing on the CPU, whose memory is the process's RSS.
  virtual DeviceMemoryUse memory_in_use() = 0;
};

/// Memory on a DeviceApi, released with the object.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceApi& api, size_t bytes) : api_(&api), ptr_(api.allocate(bytes)), bytes_(bytes) {}
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : api_(o.api_), ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      api_ = o.api_; ptr_ = o.ptr_; bytes_ = o.bytes_;
      o.ptr_ = nullptr;
    }
    return *this;
  }
  void reset() {
    if (ptr_) api_->release(ptr_);
    ptr_ = nullptr;
  }
  template <typename T> T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  DeviceApi* api_ = nullptr;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

/// How the CPU backend presents itself: a daemon serving several fake devices (qgated --backend cpu
/// --gpus 0,1) gives each its own ordinal, name and uuid; `slowdown` > 1 makes every timed call take
/// that many times its real time (the call runs, then the thread sleeps the rest), which simulates
/// a slower device of the same model in tests.
struct CpuDeviceIdentity {
  int ordinal = 0;
  std::string name = "cpu";
  std::string uuid;
  double slowdown = 1.0;
};
std::unique_ptr<DeviceApi> make_cpu_device_api(int threads, CpuDeviceIdentity identity = {});
/// Throws DeviceError when CUDA is not compiled in or the device cannot be opened.
std::unique_ptr<DeviceApi> make_cuda_device_api(int device);
bool cuda_device_api_compiled();
/// Number of CUDA devices visible, 0 when none or when CUDA is not compiled in.
int cuda_device_count();

}  // namespace qgate::worker
