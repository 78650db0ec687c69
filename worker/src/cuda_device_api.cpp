// The CUDA device of the worker: cudaMalloc'd buffers, one non-blocking stream, CUDA events for
// timing and an L2 flush buffer for cold measurements. Host C++ against the runtime API only.
// A timed call is queued behind a host-side gate (nvbench's blocking-kernel idea, as a host
// function): the start event, the build's launches and the stop event are all enqueued before the
// stream may run them, so the interval is the GPU's work, not the host's time to launch it.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <memory>
#include <string>

#include "qgate/worker/device_api.h"
#include "qgate/worker/kernel_build.h"
#include "qgate/worker/memory_probe.h"

namespace qgate::worker {
namespace {

std::string last_call_name() {
  const char* last = last_build_call();
  return last ? last : "";
}

// Holds a stream at a host function until open(). A build whose run() waits for its own stream
// would wait for the gate: the gate gives up after kMaxHold, so that costs time, never a hang.
class LaunchGate {
 public:
  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = false;
  }
  void open() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  static void CUDART_CB wait_on_stream(void* self) {
    auto* gate = static_cast<LaunchGate*>(self);
    std::unique_lock<std::mutex> lock(gate->mu_);
    gate->cv_.wait_for(lock, kMaxHold, [gate] { return gate->open_; });
  }

 private:
  static constexpr std::chrono::milliseconds kMaxHold{100};
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
};

std::string cuda_message(const char* call, cudaError_t err) {
  return std::string(call) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
}

#define QGATE_CUDA_CHECK(call)                                                   \
  do {                                                                           \
    cudaError_t qgate_err_ = (call);                                             \
    if (qgate_err_ != cudaSuccess) {                                             \
      cudaGetLastError();                                                        \
      throw DeviceError(std::string(__FILE__) + ":" + std::to_string(__LINE__) + \
                            ": " + cuda_message(#call, qgate_err_),              \
                        qgate_err_ == cudaErrorMemoryAllocation,                 \
                        cudaGetErrorName(qgate_err_), last_call_name());         \
    }                                                                            \
  } while (0)

std::string uuid_text(const cudaUUID_t& uuid) {
  char buf[64];
  const auto* b = reinterpret_cast<const unsigned char*>(uuid.bytes);
  std::snprintf(buf, sizeof buf,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return buf;
}

std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10); }

class CudaDeviceApi final : public DeviceApi {
 public:
  explicit CudaDeviceApi(int device) : device_(device) {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
      cudaGetLastError();
      throw DeviceError("no CUDA device is available" +
                        (err != cudaSuccess ? " (" + cuda_message("cudaGetDeviceCount", err) + ")" : std::string()));
    }
    if (device < 0 || device >= count)
      throw DeviceError("CUDA device " + std::to_string(device) + " does not exist (" +
                        std::to_string(count) + " visible)");
    QGATE_CUDA_CHECK(cudaSetDevice(device));
    QGATE_CUDA_CHECK(cudaGetDeviceProperties(&props_, device));
    QGATE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    QGATE_CUDA_CHECK(cudaEventCreate(&start_));
    QGATE_CUDA_CHECK(cudaEventCreate(&stop_));
    // Allocated now rather than at the first cold run, so the worker's own buffer is in every
    // memory reading alike and never reads as the build's growth.
    QGATE_CUDA_CHECK(cudaMalloc(&flush_, flush_bytes()));
    nvml_ = std::make_unique<NvmlProcessMemory>(uuid_text(props_.uuid), unsigned(device));
  }
  ~CudaDeviceApi() override {
    if (flush_) cudaFree(flush_);
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  qgate_backend backend() const override { return QGATE_BACKEND_CUDA; }
  int device_ordinal() const override { return device_; }

  void* allocate(size_t bytes) override {
    QGATE_CUDA_CHECK(cudaSetDevice(device_));
    size_t free_bytes = 0, total = 0;
    QGATE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
    if (bytes > free_bytes)
      throw DeviceError("cannot allocate " + gib(bytes) + " on " + props_.name + ": " +
                            gib(free_bytes) + " free of " + gib(total),
                        true);
    void* p = nullptr;
    QGATE_CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
  }
  void release(void* ptr) noexcept override { cudaFree(ptr); }
  void upload(void* dst, const void* src, size_t bytes) override {
    QGATE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    QGATE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void download(void* dst, const void* src, size_t bytes) override {
    QGATE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    QGATE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void fill_bytes(void* dst, uint8_t value, size_t bytes) override {
    QGATE_CUDA_CHECK(cudaMemsetAsync(dst, value, bytes, stream_));
    QGATE_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void* stream() override { return stream_; }
  void synchronize() override { QGATE_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  double time_us(const std::function<void()>& enqueue) override {
    gate_.close();
    QGATE_CUDA_CHECK(cudaLaunchHostFunc(stream_, &LaunchGate::wait_on_stream, &gate_));
    QGATE_CUDA_CHECK(cudaEventRecord(start_, stream_));
    try {
      enqueue();
    } catch (...) {
      gate_.open();
      throw;
    }
    QGATE_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    gate_.open();
    QGATE_CUDA_CHECK(cudaEventSynchronize(stop_));
    // A kernel fault shows up here or at the next call; surface it with this run.
    QGATE_CUDA_CHECK(cudaGetLastError());
    float ms = 0;
    QGATE_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return double(ms) * 1000.0;
  }

  void flush_cache() override {
    // Writing twice the L2 size evicts whatever the last call left there (nvbench's cold mode).
    QGATE_CUDA_CHECK(cudaMemsetAsync(flush_, ++flush_value_, flush_bytes(), stream_));
  }

  DeviceMemoryUse memory_in_use() override {
    if (nvml_) {
      if (const auto bytes = nvml_->used_by(int(getpid()))) return {*bytes, "nvml-process"};
    }
    size_t free_bytes = 0, total = 0;
    if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
      cudaGetLastError();
      return {0, ""};
    }
    return {int64_t(total - free_bytes), "cuda-meminfo"};  // device-wide: other processes count too
  }

  void describe(v1::RunContext* c) const override {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    c->set_host(host);
    c->set_backend(v1::BACKEND_CUDA);
    c->set_device_ordinal(device_);
    c->set_device_name(props_.name);
    c->set_device_uuid(uuid_text(props_.uuid));
    c->set_sm_count(props_.multiProcessorCount);
    c->set_device_memory_bytes(int64_t(props_.totalGlobalMem));
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    // The NVIDIA driver's own version when NVML gives it, with the CUDA version the driver supports.
    const std::string nvidia = nvml_ ? nvml_->driver_version() : "";
    c->set_driver_version(nvidia.empty() ? "CUDA " + version_text(driver) : nvidia + " (CUDA " + version_text(driver) + ")");
    c->set_cuda_runtime_version(version_text(runtime));
    (*c->mutable_options())["compute_capability"] =
        std::to_string(props_.major) + "." + std::to_string(props_.minor);
  }

 private:
  size_t flush_bytes() const { return size_t(props_.l2CacheSize > 0 ? props_.l2CacheSize : (64 << 20)) * 2; }

  static std::string gib(size_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / (1024.0 * 1024.0 * 1024.0));
    return buf;
  }

  int device_;
  cudaDeviceProp props_{};
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  void* flush_ = nullptr;
  LaunchGate gate_;
  uint8_t flush_value_ = 0;
  std::unique_ptr<NvmlProcessMemory> nvml_;
};

}  // namespace

std::unique_ptr<DeviceApi> make_cuda_device_api(int device) {
  return std::make_unique<CudaDeviceApi>(device);
}

bool cuda_device_api_compiled() { return true; }

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

}  // namespace qgate::worker
