// The benchmark's timed sample: how per_call_us queues back-to-back calls inside one timing and
// divides the time among them, against a device whose clock is a count of what it was given.
#include <gtest/gtest.h>

#include <vector>

#include "qgate/worker/bench.h"

namespace qgate::worker {
namespace {

// A device that reports, for each timing, 100 us per call enqueued inside it, and records how many
// calls each timing held.
class CountingDevice final : public DeviceApi {
 public:
  std::vector<int> calls_per_timing;
  int calls = 0;
  qgate_backend backend() const override { return QGATE_BACKEND_CPU; }
  int device_ordinal() const override { return 0; }
  void* allocate(size_t) override { return nullptr; }
  void release(void*) noexcept override {}
  void upload(void*, const void*, size_t) override {}
  void download(void*, const void*, size_t) override {}
  void fill_bytes(void*, uint8_t, size_t) override {}
  void* stream() override { return nullptr; }
  void synchronize() override {}
  double time_us(const std::function<void()>& enqueue) override {
    const int before = calls;
    enqueue();
    calls_per_timing.push_back(calls - before);
    return 100.0 * (calls - before);
  }
  void flush_cache() override {}
  void describe(v1::RunContext*) const override {}
  DeviceMemoryUse memory_in_use() override { return {}; }
};

TEST(BenchTiming, QueuesTheCallsOfASampleInsideOneTimingAndReportsPerCall) {
  CountingDevice device;
  EXPECT_DOUBLE_EQ(per_call_us(device, 8, [&] { ++device.calls; }), 100.0);
  EXPECT_DOUBLE_EQ(per_call_us(device, 1, [&] { ++device.calls; }), 100.0);
  ASSERT_EQ(device.calls_per_timing, (std::vector<int>{8, 1}));
  EXPECT_EQ(device.calls, 9);
}

TEST(BenchTiming, ASampleHasAtLeastOneCall) {
  CountingDevice device;
  EXPECT_DOUBLE_EQ(per_call_us(device, 0, [&] { ++device.calls; }), 100.0);
  EXPECT_DOUBLE_EQ(per_call_us(device, -3, [&] { ++device.calls; }), 100.0);
  EXPECT_EQ(device.calls_per_timing, (std::vector<int>{1, 1}));
}

}  // namespace
}  // namespace qgate::worker
