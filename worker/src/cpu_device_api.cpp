// The CPU backend's device: host memory, no stream, the steady clock for timing.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "qgate/worker/device_api.h"

namespace qgate::worker {
namespace {

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

class CpuDeviceApi final : public DeviceApi {
 public:
  CpuDeviceApi(int threads, CpuDeviceIdentity identity) : threads_(threads), identity_(std::move(identity)) {}
  qgate_backend backend() const override { return QGATE_BACKEND_CPU; }
  int device_ordinal() const override { return identity_.ordinal; }
  void* allocate(size_t bytes) override {
    void* p = std::malloc(bytes ? bytes : 1);
    if (!p) throw DeviceError("cannot allocate " + std::to_string(bytes) + " bytes of host memory", true);
    return p;
  }
  void release(void* ptr) noexcept override { std::free(ptr); }
  void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void fill_bytes(void* dst, uint8_t value, size_t bytes) override { std::memset(dst, value, bytes); }
  void* stream() override { return nullptr; }
  void synchronize() override {}
  double time_us(const std::function<void()>& enqueue) override {
    auto t0 = std::chrono::steady_clock::now();
    enqueue();
    auto t1 = std::chrono::steady_clock::now();
    if (identity_.slowdown > 1.0) {
      // A simulated slower device: the call really takes `slowdown` times as long.
      std::this_thread::sleep_for((t1 - t0) * (identity_.slowdown - 1.0));
      t1 = std::chrono::steady_clock::now();
    }
    return std::chrono::duration<double, std::micro>(t1 - t0).count();
  }
  void flush_cache() override {}
  void describe(v1::RunContext* c) const override {
    c->set_host(host_name());
    c->set_backend(v1::BACKEND_CPU);
    c->set_device_ordinal(identity_.ordinal);
    c->set_device_name(identity_.name);
    c->set_device_uuid(identity_.uuid);
    unsigned hw = std::thread::hardware_concurrency();
    c->set_cpu_threads(threads_ > 0 ? threads_ : int(hw));
    c->set_device_memory_bytes(int64_t(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE));
  }
  DeviceMemoryUse memory_in_use() override { return {}; }

 private:
  int threads_;
  CpuDeviceIdentity identity_;
};

}  // namespace

std::unique_ptr<DeviceApi> make_cpu_device_api(int threads, CpuDeviceIdentity identity) {
  return std::make_unique<CpuDeviceApi>(threads, std::move(identity));
}

}  // namespace qgate::worker
