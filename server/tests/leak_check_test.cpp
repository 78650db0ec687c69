// The leak judge on scripted readings: a correct build's allocator noise is no leak; the leak
// fault build's growth, memory kept at release and memory kept by a parity sweep are; missing or
// mismatched readings never make a finding up.
#include "qgate/server/leak_check.h"

#include <gtest/gtest.h>

#include <initializer_list>

namespace {

using qgate::server::ArmMemory;
using qgate::server::judge_arm_memory;
using qgate::server::judge_parity_memory;
namespace v1 = qgate::v1;

constexpr int64_t MiB = int64_t(1) << 20;

v1::MemoryReading reading(int64_t device, int64_t host, const std::string& source = "nvml-process") {
  v1::MemoryReading r;
  r.set_device_bytes(device);
  r.set_device_source(source);
  r.set_host_rss_bytes(host + 30 * MiB);  // the library pages, which the judge leaves out
  r.set_host_anon_bytes(host);
  return r;
}

ArmMemory arm(std::initializer_list<v1::MemoryReading> runs) {
  ArmMemory a;
  a.arm = "A";
  *a.prepared.mutable_memory_before() = reading(600 * MiB, 40 * MiB);
  *a.prepared.mutable_memory_after() = reading(900 * MiB, 60 * MiB);
  a.runs = runs;
  v1::ReleaseDone released;
  released.set_released_gemms(3);
  *released.mutable_memory() = reading(602 * MiB, 41 * MiB);
  a.released = released;
  return a;
}

TEST(LeakCheck, ACorrectBuildWithAllocatorNoiseIsNoLeak) {
  // The first run loads kernels lazily (+150 MiB device, +25 MiB host); after it, one pool step of
  // 2 MiB, a heap fragment, and a reading that dips back.
  const ArmMemory a = arm({reading(1050 * MiB, 85 * MiB), reading(1052 * MiB, 85 * MiB), reading(1052 * MiB, 86 * MiB),
                           reading(1052 * MiB, 86 * MiB), reading(1054 * MiB, 85 * MiB), reading(1054 * MiB, 86 * MiB),
                           reading(1054 * MiB, 86 * MiB), reading(1054 * MiB, 86 * MiB)});
  EXPECT_EQ(judge_arm_memory(a), std::nullopt);
}

TEST(LeakCheck, OneLargeAllocatorStepAmongFlatReadingsIsNoLeak) {
  // A workspace of 256 MiB allocated once, at the fourth run, then reused.
  ArmMemory a = arm({});
  for (int i = 0; i < 8; ++i) a.runs.push_back(reading((i < 3 ? 1000 : 1256) * MiB, 80 * MiB));
  EXPECT_EQ(judge_arm_memory(a), std::nullopt);
}

TEST(LeakCheck, TheLeakFaultBuildsGrowthIsALeak) {
  // 64 MiB per GEMM call, 6 calls per run: 384 MiB per run on the device.
  ArmMemory a = arm({});
  for (int i = 0; i < 8; ++i) a.runs.push_back(reading((1000 + 384 * i) * MiB, 80 * MiB + (i % 2) * 256 * 1024));
  a.released->mutable_memory()->set_device_bytes((600 + 384 * 8) * MiB);
  const auto leak = judge_arm_memory(a);
  ASSERT_TRUE(leak.has_value());
  EXPECT_EQ(leak->where(), "arm A across runs");
  EXPECT_EQ(leak->device_bytes(), 7 * 384 * MiB);
  EXPECT_EQ(leak->host_bytes(), 0) << "the host readings were flat";
  EXPECT_EQ(leak->detail(), "device memory grew 384.0 MiB per run over 8 runs (2.62 GiB; 7 of 7 steps grew)");
}

TEST(LeakCheck, HostGrowthOnTheCpuIsALeak) {
  // The CPU backend: no device reading, 4 MiB of touched host memory per call, 6 calls per run.
  ArmMemory a = arm({});
  a.prepared = v1::PrepareDone();
  *a.prepared.mutable_memory_before() = reading(0, 40 * MiB, "");
  for (int i = 0; i < 5; ++i) a.runs.push_back(reading(0, (70 + 24 * i) * MiB, ""));
  const auto leak = judge_arm_memory(a);
  ASSERT_TRUE(leak.has_value());
  EXPECT_EQ(leak->host_bytes(), 4 * 24 * MiB);
  EXPECT_EQ(leak->device_bytes(), 0);
  EXPECT_EQ(leak->detail(), "host memory grew 24.0 MiB per run over 5 runs (96.0 MiB; 4 of 4 steps grew)");
}

TEST(LeakCheck, GrowthIsJudgedOnTheAnonymousResidentSetWhenItIsThere) {
  // The RSS grows as library code pages in; the anonymous memory does not.
  ArmMemory a = arm({});
  for (int i = 0; i < 6; ++i) {
    v1::MemoryReading r = reading(1000 * MiB, 80 * MiB);
    r.set_host_rss_bytes((200 + 20 * i) * MiB);
    a.runs.push_back(r);
  }
  EXPECT_EQ(judge_arm_memory(a), std::nullopt);
  // A worker that does not send RssAnon is judged on its RSS.
  for (auto& r : a.runs) r.set_host_anon_bytes(0);
  const auto leak = judge_arm_memory(a);
  ASSERT_TRUE(leak.has_value());
  EXPECT_NE(leak->detail().find("host RSS grew 20.0 MiB per run"), std::string::npos) << leak->detail();
}

TEST(LeakCheck, MostStepsMustGrow) {
  // 200 MiB in two jumps among seven steps: not a steady growth.
  ArmMemory a = arm({});
  for (int64_t device : {1000, 1000, 1100, 1100, 1100, 1200, 1200, 1200}) a.runs.push_back(reading(device * MiB, 80 * MiB));
  EXPECT_EQ(judge_arm_memory(a), std::nullopt);
}

TEST(LeakCheck, SlowSteadyGrowthBelowTheThresholdIsNoLeak) {
  ArmMemory a = arm({});
  for (int i = 0; i < 6; ++i) a.runs.push_back(reading((1000 + 3 * i) * MiB, 80 * MiB));
  EXPECT_EQ(judge_arm_memory(a), std::nullopt) << "15 MiB over 5 steps is under 32 MiB";
}

TEST(LeakCheck, MemoryKeptAtReleaseIsALeak) {
  // Flat runs, but gemm_release keeps the weights: 300 MiB of device memory stays.
  ArmMemory a = arm({});
  for (int i = 0; i < 6; ++i) a.runs.push_back(reading(1050 * MiB, 85 * MiB));
  a.released->mutable_memory()->set_device_bytes(900 * MiB);
  const auto leak = judge_arm_memory(a);
  ASSERT_TRUE(leak.has_value());
  EXPECT_EQ(leak->where(), "arm A at release");
  EXPECT_EQ(leak->device_bytes(), 300 * MiB);
  EXPECT_EQ(leak->host_bytes(), 0);
  EXPECT_EQ(leak->detail(),
            "after releasing 3 GEMM(s) and the context: device memory 300.0 MiB more than before prepare "
            "(600.0 MiB -> 900.0 MiB)");
}

TEST(LeakCheck, LazyLoadingLeftAtReleaseIsNoLeak) {
  ArmMemory a = arm({});
  a.released->mutable_memory()->set_device_bytes(640 * MiB);  // kernel code and a larger stack reservation
  a.released->mutable_memory()->set_host_anon_bytes(70 * MiB);  // driver staging buffers
  EXPECT_EQ(judge_arm_memory(a), std::nullopt);
}

TEST(LeakCheck, MissingReadingsAreHandled) {
  // A worker that died: no release, and runs without readings.
  ArmMemory died = arm({v1::MemoryReading(), v1::MemoryReading()});
  died.released.reset();
  EXPECT_EQ(judge_arm_memory(died), std::nullopt);
  // An old worker: no readings anywhere.
  ArmMemory old;
  old.arm = "B";
  old.runs.resize(8);
  old.released = v1::ReleaseDone();
  EXPECT_EQ(judge_arm_memory(old), std::nullopt);
  // Too few runs to judge growth (one step after the first run), even a steep one.
  ArmMemory short_arm = arm({reading(1000 * MiB, 80 * MiB), reading(2000 * MiB, 80 * MiB)});
  short_arm.released.reset();
  EXPECT_EQ(judge_arm_memory(short_arm), std::nullopt);
  // Runs without readings are skipped, the rest still judged.
  ArmMemory gaps = arm({});
  for (int i = 0; i < 6; ++i)
    gaps.runs.push_back(i == 2 ? v1::MemoryReading() : reading((1000 + 512 * i) * MiB, 80 * MiB));
  const auto leak = judge_arm_memory(gaps);
  ASSERT_TRUE(leak.has_value());
  EXPECT_EQ(leak->where(), "arm A across runs");
}

TEST(LeakCheck, DeviceReadingsOfDifferentSourcesAreNotCompared) {
  // NVML listed the process for the first run only; the device-wide readings after it are higher.
  ArmMemory a = arm({reading(1000 * MiB, 80 * MiB)});
  for (int i = 1; i < 6; ++i) a.runs.push_back(reading((20000 + 100 * i) * MiB, 80 * MiB, "cuda-meminfo"));
  a.released->mutable_memory()->set_device_source("cuda-meminfo");
  a.released->mutable_memory()->set_device_bytes(30000 * MiB);
  EXPECT_EQ(judge_arm_memory(a), std::nullopt);
}

TEST(LeakCheck, ADeviceWideFindingSaysSo) {
  ArmMemory a = arm({});
  for (int i = 0; i < 5; ++i) a.runs.push_back(reading((20000 + 384 * i) * MiB, 80 * MiB, "cuda-meminfo"));
  const auto leak = judge_arm_memory(a);
  ASSERT_TRUE(leak.has_value());
  EXPECT_NE(leak->detail().find("device-wide reading"), std::string::npos) << leak->detail();
}

TEST(LeakCheck, AParitySweepThatKeptMemoryLeaks) {
  v1::WorkerSummary s;
  s.set_cases(192);
  *s.mutable_memory_before() = reading(0, 40 * MiB, "");
  *s.mutable_memory_after() = reading(0, (40 + 4 * 192) * MiB, "");
  const auto leak = judge_parity_memory(s);
  ASSERT_TRUE(leak.has_value());
  EXPECT_EQ(leak->where(), "parity sweep");
  EXPECT_EQ(leak->host_bytes(), 768 * MiB);
  EXPECT_EQ(leak->detail(),
            "after the last of 192 cases: host memory 768.0 MiB more than before the first (40.0 MiB -> 808.0 MiB)");
}

TEST(LeakCheck, AParitySweepOfACorrectBuildDoesNotLeak) {
  v1::WorkerSummary s;
  s.set_cases(192);
  *s.mutable_memory_before() = reading(600 * MiB, 40 * MiB);
  *s.mutable_memory_after() = reading(700 * MiB, 52 * MiB);  // every kernel loaded, arenas of the reference threads
  EXPECT_EQ(judge_parity_memory(s), std::nullopt);
  v1::WorkerSummary missing;
  *missing.mutable_memory_before() = reading(600 * MiB, 40 * MiB);
  EXPECT_EQ(judge_parity_memory(missing), std::nullopt);
}

// ggml's CUDA backend as measured: its pool and handles stay after the first cycle (68 MiB of device
// memory, 160.9 MiB of host memory after a sweep) and are level across the next.
TEST(LeakCheck, AParitySweepThatKeepsStateOnceIsReportedNotLeaked) {
  v1::WorkerSummary s;
  s.set_cases(208);
  *s.mutable_memory_before() = reading(638 * MiB, 40 * MiB);
  *s.mutable_memory_after() = reading(962 * MiB, 201 * MiB);
  *s.mutable_memory_after_second_cycle() = reading(962 * MiB, 209 * MiB);
  s.set_second_cycle_runs(16);
  const auto finding = judge_parity_memory(s);
  ASSERT_TRUE(finding.has_value());
  EXPECT_TRUE(finding->kept_once());
  EXPECT_EQ(finding->device_bytes(), 324 * MiB);
  EXPECT_EQ(finding->host_bytes(), 161 * MiB);
  EXPECT_EQ(finding->detail().rfind("kept once: after the last of 208 cases: device memory 324.0 MiB more", 0), 0u)
      << finding->detail();
  EXPECT_NE(finding->detail().find("level after a second cycle of 16 runs"), std::string::npos) << finding->detail();
}

TEST(LeakCheck, AParitySweepThatGrowsAgainInItsSecondCycleLeaks) {
  // The leak fault build on the CPU: 4 MiB per call, 16 calls in the second cycle.
  v1::WorkerSummary s;
  s.set_cases(192);
  *s.mutable_memory_before() = reading(0, 40 * MiB, "");
  *s.mutable_memory_after() = reading(0, (40 + 4 * 192) * MiB, "");
  *s.mutable_memory_after_second_cycle() = reading(0, (40 + 4 * 208) * MiB, "");
  s.set_second_cycle_runs(16);
  const auto leak = judge_parity_memory(s);
  ASSERT_TRUE(leak.has_value());
  EXPECT_FALSE(leak->kept_once());
  EXPECT_EQ(leak->host_bytes(), 832 * MiB) << "all it holds beyond the start";
  EXPECT_EQ(leak->detail(),
            "after a second cycle of 16 runs: host memory 64.0 MiB more than after the first cycle (808.0 MiB -> "
            "872.0 MiB); the first cycle: after the last of 192 cases: host memory 768.0 MiB more than before the "
            "first (40.0 MiB -> 808.0 MiB)");
  // Growth in the second cycle alone, after a first that kept nothing, is a leak too.
  *s.mutable_memory_after() = reading(0, 41 * MiB, "");
  *s.mutable_memory_after_second_cycle() = reading(0, 105 * MiB, "");
  const auto late = judge_parity_memory(s);
  ASSERT_TRUE(late.has_value());
  EXPECT_FALSE(late->kept_once());
}

TEST(LeakCheck, AnArmReleaseThatASecondCycleFindsLevelIsKeptOnce) {
  ArmMemory a = arm({reading(900 * MiB, 60 * MiB), reading(900 * MiB, 60 * MiB), reading(900 * MiB, 60 * MiB)});
  v1::ReleaseDone released;
  released.set_released_gemms(3);
  *released.mutable_memory() = reading(668 * MiB, 41 * MiB);  // 68 MiB of device memory stays
  a.released = released;
  const auto without_second = judge_arm_memory(a);
  ASSERT_TRUE(without_second.has_value());
  EXPECT_FALSE(without_second->kept_once()) << "without a second cycle the judge cannot tell: a leak";
  released.set_second_cycle(true);
  *released.mutable_memory_after_second_cycle() = reading(669 * MiB, 42 * MiB);
  a.released = released;
  const auto once = judge_arm_memory(a);
  ASSERT_TRUE(once.has_value());
  EXPECT_TRUE(once->kept_once());
  EXPECT_EQ(once->device_bytes(), 68 * MiB);
  // A release that keeps a GEMM's weights each time grows across the second cycle: a leak.
  *released.mutable_memory_after_second_cycle() = reading(968 * MiB, 42 * MiB);
  a.released = released;
  const auto leak = judge_arm_memory(a);
  ASSERT_TRUE(leak.has_value());
  EXPECT_FALSE(leak->kept_once());
  EXPECT_EQ(leak->device_bytes(), 368 * MiB);
}

TEST(LeakCheck, BytesAreFormattedForPeople) {
  EXPECT_EQ(qgate::server::format_bytes(64 * MiB), "64.0 MiB");
  EXPECT_EQ(qgate::server::format_bytes(1536 * MiB), "1.50 GiB");
  EXPECT_EQ(qgate::server::format_bytes(-2 * MiB), "-2.0 MiB");
}

}  // namespace
