// NvmlSampler: absent NVML (this machine, CI) and, through a fake libnvidia-ml, the call sequences.
#include "qgate/cotenant/nvml_sampler.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "fake_nvml_controls.h"

namespace qgate::cotenant {
namespace {

TEST(NvmlSamplerTest, MissingLibraryIsUnavailableWithReasonAndReadsNothing) {
  NvmlSamplerOptions options;
  options.nvml_path = "libnvidia-ml-absent-for-test.so.1";
  NvmlSampler sampler(options);
  EXPECT_FALSE(sampler.available());
  EXPECT_NE(sampler.unavailable_reason().find("libnvidia-ml"), std::string::npos) << sampler.unavailable_reason();
  EXPECT_FALSE(sampler.read({}).has_value());
  EXPECT_EQ(sampler.device_uuid(), "");
}

TEST(NvmlSamplerTest, DefaultLibraryOnThisMachineDoesNotCrash) {
  NvmlSampler sampler;  // the real libnvidia-ml.so.1: absent in CI, present on a GPU host
  if (sampler.available()) {
    // A GPU host: a reading must come back with at least the clocks.
    const auto sample = sampler.read({getpid()});
    ASSERT_TRUE(sample.has_value()) << sampler.last_error();
    EXPECT_TRUE(sample->sm_clock_mhz.has_value());
  } else {
    EXPECT_NE(sampler.unavailable_reason().find("libnvidia-ml"), std::string::npos) << sampler.unavailable_reason();
    EXPECT_FALSE(sampler.read({}).has_value());
  }
}

using qgate::testing::FakeNvml;

class FakeNvmlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(fake_.handle, nullptr) << dlerror();
    fake_.reset();
    proc_root_ = std::filesystem::temp_directory_path() / ("qgate_cotenant_proc_" + std::to_string(getpid()));
    std::filesystem::create_directories(proc_root_ / "4242");
    std::ofstream(proc_root_ / "4242" / "comm") << "sglang\n";
    std::filesystem::create_directories(proc_root_ / "777");
    std::ofstream(proc_root_ / "777" / "comm") << "qgate-worker\n";
    options_.nvml_path = QGATE_FAKE_NVML_LIBRARY;
    options_.proc_root = proc_root_.string();
  }
  void TearDown() override { std::filesystem::remove_all(proc_root_); }

  FakeNvml fake_;
  std::filesystem::path proc_root_;
  NvmlSamplerOptions options_;
};

TEST_F(FakeNvmlTest, ReadsEveryFigureAndLeavesOwnPidsOut) {
  fake_.add_process(777, 8ull << 30, 90);    // our worker
  fake_.add_process(4242, 20ull << 30, 96);  // a co-tenant
  fake_.add_process(5151, ~0ull, -1);        // listed, no utilisation sample, memory unknown, no /proc entry
  fake_.set_reasons(0x4);
  ManualClock clock(123'456);
  NvmlSampler sampler(options_, clock);
  ASSERT_TRUE(sampler.available()) << sampler.unavailable_reason();
  EXPECT_EQ(sampler.device_uuid(), "GPU-fake-0000");
  EXPECT_EQ(sampler.device_name(), "Fake H200");

  const auto sample = sampler.read({777});
  ASSERT_TRUE(sample.has_value());
  EXPECT_EQ(sample->t_ms, 123'456);
  EXPECT_EQ(sample->device_util, 87.0);
  EXPECT_EQ(sample->sm_clock_mhz, 1815);
  EXPECT_EQ(sample->max_sm_clock_mhz, 1980);
  EXPECT_EQ(sample->clock_event_reasons, 0x4u);
  EXPECT_EQ(sample->temperature_c, 61);
  EXPECT_DOUBLE_EQ(sample->power_w.value_or(0), 612.345);
  ASSERT_TRUE(sample->processes_listed);
  ASSERT_EQ(sample->foreign.size(), 2u);
  EXPECT_EQ(sample->foreign[0].pid, 4242);
  EXPECT_EQ(sample->foreign[0].name, "sglang");
  EXPECT_EQ(sample->foreign[0].used_memory_bytes, 20ull << 30);
  // The highest in-window sample; the 100% one from 10 s ago is outside the look-back window.
  EXPECT_EQ(sample->foreign[0].sm_percent, 96.0);
  EXPECT_EQ(sample->foreign[1].pid, 5151);
  EXPECT_EQ(sample->foreign[1].name, "pid5151");
  EXPECT_FALSE(sample->foreign[1].used_memory_bytes.has_value());
  EXPECT_EQ(sample->foreign[1].sm_percent, 0.0);  // utilisation known, no kernel in the window

  // lastSeenTimeStamp is now minus the 250 ms window, in microseconds.
  const auto now_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const auto last_seen = static_cast<long long>(fake_.last_seen());
  EXPECT_GE(now_us - last_seen, 250'000);
  EXPECT_LT(now_us - last_seen, 250'000 + 5'000'000);
}

TEST_F(FakeNvmlTest, WhatAnOwnWorkerStartsIsOwnEvenAfterItExits) {
  // 888 is a command arm's program: in the process group of worker 777 (/proc/888/stat's pgrp).
  std::filesystem::create_directories(proc_root_ / "888");
  std::ofstream(proc_root_ / "888" / "comm") << "minfer\n";
  std::ofstream(proc_root_ / "888" / "stat") << "888 (minfer bench) S 777 777 777 0 -1 4194560 0 0\n";
  std::filesystem::create_directories(proc_root_ / "999");
  std::ofstream(proc_root_ / "999" / "stat") << "999 (other) S 1 999 999 0 -1 4194560 0 0\n";
  fake_.add_process(777, 1ull << 30, 1);
  fake_.add_process(888, 8ull << 30, 90);
  fake_.add_process(999, 1ull << 30, 50);  // a group of its own: foreign
  ManualClock clock(1'000);
  NvmlSampler sampler(options_, clock);
  auto sample = sampler.read({777});
  ASSERT_TRUE(sample.has_value());
  ASSERT_EQ(sample->foreign.size(), 1u);
  EXPECT_EQ(sample->foreign[0].pid, 999);
  // The program exits (its /proc entry goes) but NVML still lists it: still own, not a co-tenant.
  std::filesystem::remove_all(proc_root_ / "888");
  sample = sampler.read({777});
  ASSERT_TRUE(sample.has_value());
  ASSERT_EQ(sample->foreign.size(), 1u);
  EXPECT_EQ(sample->foreign[0].pid, 999);
  // Once its worker is no longer own, neither is it.
  sample = sampler.read({});
  ASSERT_TRUE(sample.has_value());
  EXPECT_EQ(sample->foreign.size(), 3u);
}

TEST_F(FakeNvmlTest, NoUtilisationSamplesMeansZeroPercentNotUnknown) {
  fake_.add_process(4242, 1 << 20, 50);
  fake_.set("fake_nvml_set_utilization_status", 6);  // NVML_ERROR_NOT_FOUND
  NvmlSampler sampler(options_);
  const auto sample = sampler.read({});
  ASSERT_TRUE(sample.has_value());
  ASSERT_EQ(sample->foreign.size(), 1u);
  EXPECT_EQ(sample->foreign[0].sm_percent, 0.0);
}

TEST_F(FakeNvmlTest, UnsupportedUtilisationLeavesSmUnknownAndRecordsTheError) {
  fake_.add_process(4242, 1 << 20, 50);
  fake_.set("fake_nvml_set_utilization_status", 3);  // NVML_ERROR_NOT_SUPPORTED
  fake_.set("fake_nvml_set_power_status", 3);
  NvmlSampler sampler(options_);
  const auto sample = sampler.read({});
  ASSERT_TRUE(sample.has_value());
  ASSERT_EQ(sample->foreign.size(), 1u);
  EXPECT_FALSE(sample->foreign[0].sm_percent.has_value());
  EXPECT_FALSE(sample->power_w.has_value());
  EXPECT_NE(sampler.last_error().find("Not Supported"), std::string::npos) << sampler.last_error();
}

TEST_F(FakeNvmlTest, ProcessesStartingBetweenProbeAndFillAreKept) {
  fake_.add_process(4242, 1 << 20, 10);
  fake_.set_extra_after_probe(3);
  NvmlSampler sampler(options_);
  const auto sample = sampler.read({});
  ASSERT_TRUE(sample.has_value());
  EXPECT_TRUE(sample->processes_listed);
  EXPECT_EQ(sample->foreign.size(), 4u);
}

TEST_F(FakeNvmlTest, NoProcessesIsAnEmptyKnownList) {
  NvmlSampler sampler(options_);
  const auto sample = sampler.read({});
  ASSERT_TRUE(sample.has_value());
  EXPECT_TRUE(sample->processes_listed);
  EXPECT_TRUE(sample->foreign.empty());
}

TEST_F(FakeNvmlTest, InitFailureAndMissingDeviceAreUnavailableWithReason) {
  {
    NvmlSamplerOptions options = options_;
    options.device_index = 3;
    NvmlSampler sampler(options);
    EXPECT_FALSE(sampler.available());
    EXPECT_NE(sampler.unavailable_reason().find("device index 3"), std::string::npos) << sampler.unavailable_reason();
    EXPECT_FALSE(sampler.read({}).has_value());
  }
  EXPECT_EQ(fake_.initialized(), 0);          // nvmlShutdown balanced nvmlInit
  fake_.set("fake_nvml_set_init_status", 9);  // NVML_ERROR_DRIVER_NOT_LOADED
  NvmlSampler sampler(options_);
  EXPECT_FALSE(sampler.available());
  EXPECT_NE(sampler.unavailable_reason().find("Driver Not Loaded"), std::string::npos) << sampler.unavailable_reason();
}

}  // namespace
}  // namespace qgate::cotenant
