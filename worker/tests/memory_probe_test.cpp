// Memory readings of the worker: the resident set follows touched memory, NVML's per-process
// figure is found for our pid (through a fake libnvidia-ml) and missing when NVML does not list it,
// and the CPU device reads no device memory.
#include "qgate/worker/memory_probe.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "fake_nvml_controls.h"

namespace qgate::worker {
namespace {

constexpr int64_t MiB = int64_t(1) << 20;

TEST(MemoryProbe, HostReadingsFollowTouchedMemory) {
  const int64_t rss = host_rss_bytes(), anon = host_anon_bytes();
  EXPECT_GT(rss, 0);
  EXPECT_GT(anon, 0);
  EXPECT_LE(anon, rss);
  std::vector<char> block(64 * MiB);
  std::memset(block.data(), 1, block.size());
  EXPECT_GE(host_anon_bytes() - anon, 60 * MiB);
  EXPECT_GE(host_rss_bytes() - rss, 60 * MiB);
}

TEST(MemoryProbe, TheCpuDeviceReadsNoDeviceMemory) {
  auto cpu = make_cpu_device_api(1);
  const v1::MemoryReading r = read_memory(*cpu);
  EXPECT_EQ(r.device_bytes(), 0);
  EXPECT_EQ(r.device_source(), "");
  EXPECT_GT(r.host_rss_bytes(), 0);
  EXPECT_GT(r.host_anon_bytes(), 0);
}

TEST(MemoryProbe, AMissingNvmlIsUnavailableWithTheReason) {
  NvmlProcessMemory nvml("", 0, "libnvidia-ml-absent-for-test.so.1");
  EXPECT_FALSE(nvml.available());
  EXPECT_NE(nvml.unavailable_reason().find("libnvidia-ml-absent-for-test"), std::string::npos);
  EXPECT_EQ(nvml.used_by(getpid()), std::nullopt);
}

using qgate::testing::FakeNvml;

TEST(MemoryProbe, NvmlGivesThisProcessesOwnFigure) {
  FakeNvml fake;
  ASSERT_NE(fake.handle, nullptr) << dlerror();
  fake.reset();
  for (unsigned pid = 1; pid < 12; ++pid) fake.add_process(90000 + pid, 1000 * MiB);  // beyond the first probe's size
  fake.add_process(unsigned(getpid()), 640 * MiB);
  NvmlProcessMemory nvml("GPU-not-a-real-uuid", 0, QGATE_FAKE_NVML_LIBRARY);
  ASSERT_TRUE(nvml.available()) << nvml.unavailable_reason();
  EXPECT_EQ(nvml.used_by(getpid()), 640 * MiB);
  EXPECT_EQ(nvml.used_by(12345678), std::nullopt) << "a pid NVML does not list (another pid namespace)";
}

TEST(MemoryProbe, AnUnknownFigureIsNoFigure) {
  FakeNvml fake;
  ASSERT_NE(fake.handle, nullptr) << dlerror();
  fake.reset();
  fake.add_process(unsigned(getpid()), ~0ULL);  // NVML_VALUE_NOT_AVAILABLE
  NvmlProcessMemory nvml("", 0, QGATE_FAKE_NVML_LIBRARY);
  ASSERT_TRUE(nvml.available()) << nvml.unavailable_reason();
  EXPECT_EQ(nvml.used_by(getpid()), std::nullopt);
}

}  // namespace
}  // namespace qgate::worker
