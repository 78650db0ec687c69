// summarize() and classify(): figures, texts and every contended rule, on hand-written readings.
#include "qgate/cotenant/summary.h"

#include <gtest/gtest.h>

#include <sstream>

#include "qgate/cotenant/replay.h"

namespace qgate::cotenant {
namespace {

// A worker (777) and two co-tenants over four readings 100 ms apart.
constexpr const char* kTrace = R"(# t_ms is the recording's clock; 777 is the run's own worker
{"t_ms":1000,"device_util":90,"sm_clock_mhz":1815,"max_sm_clock_mhz":1980,"clock_event_reasons":4,"temperature_c":60,"power_w":600.5,"foreign":[{"pid":777,"name":"qgate-worker","sm_percent":90},{"pid":4242,"name":"sglang","used_memory_bytes":1000,"sm_percent":0}]}
{"t_ms":1100,"device_util":95,"sm_clock_mhz":1800,"max_sm_clock_mhz":1980,"clock_event_reasons":4,"temperature_c":62,"power_w":650,"foreign":[{"pid":777,"name":"qgate-worker","sm_percent":95},{"pid":4242,"name":"sglang","sm_percent":96},{"pid":5000,"name":"python","sm_percent":3}]}
{"t_ms":1200,"device_util":92,"sm_clock_mhz":1830,"max_sm_clock_mhz":1980,"clock_event_reasons":0,"temperature_c":63,"power_w":640,"foreign":[{"pid":777,"name":"qgate-worker","sm_percent":91},{"pid":4242,"name":"sglang","sm_percent":40}]}
{"t_ms":1300,"device_util":80,"sm_clock_mhz":1980,"max_sm_clock_mhz":1980,"clock_event_reasons":513,"temperature_c":61,"power_w":300.25,"foreign":[{"pid":777,"name":"qgate-worker","sm_percent":0}]}
)";

std::vector<Sample> replayed_run(const std::set<int>& own_pids) {
  std::istringstream in(kTrace);
  ManualClock clock(0);
  ReplaySampler sampler(read_trace(in), clock);
  std::vector<Sample> samples;
  for (int i = 0; i < 4; ++i) {
    samples.push_back(sampler.read(own_pids).value());
    clock.advance_ms(100);
  }
  return samples;
}

TEST(SummaryTest, HandWrittenTraceFigures) {
  const RunCotenant run = summarize(replayed_run({777}), QuietPolicy{}, 100);
  EXPECT_TRUE(run.available);
  EXPECT_EQ(run.sample_period_ms, 100);
  // Foreign SM per reading: 0, 96 + 3, 40, 0 (the worker's 90-95% is ours, not foreign).
  EXPECT_DOUBLE_EQ(run.max_foreign_sm.value(), 99.0);
  EXPECT_DOUBLE_EQ(run.mean_foreign_sm.value(), 34.75);
  EXPECT_DOUBLE_EQ(run.device_util_mean.value(), 89.25);
  EXPECT_EQ(run.top_processes, "sglang@96%, python@3%");
  EXPECT_EQ(run.throttle_reasons, "gpu_idle 1/4, sw_power_cap 2/4, 0x200 1/4");
  EXPECT_EQ(run.min_sm_clock_mhz, 1800);
  EXPECT_EQ(run.median_sm_clock_mhz, 1822);  // (1815 + 1830) / 2
  EXPECT_EQ(run.max_sm_clock_mhz, 1980);
  EXPECT_EQ(run.temperature_max_c, 63);
  EXPECT_DOUBLE_EQ(run.power_max_w.value(), 650.0);
  EXPECT_EQ(run.contended, true);
  EXPECT_EQ(run.policy, QuietPolicy{}.describe());
  EXPECT_NE(run.policy.find("5%"), std::string::npos) << run.policy;
}

TEST(SummaryTest, OwnPidIsNeverForeign) {
  // Without naming 777 as ours, the worker counts as a co-tenant and tops the list.
  const RunCotenant theirs = summarize(replayed_run({}));
  EXPECT_EQ(theirs.top_processes, "sglang@96%, qgate-worker@95%, python@3%");
  const RunCotenant ours = summarize(replayed_run({777}));
  EXPECT_EQ(ours.top_processes.find("qgate-worker"), std::string::npos);
}

TEST(SummaryTest, PeriodIsTheMedianGapWhenNotGiven) {
  const RunCotenant run = summarize(replayed_run({777}));
  EXPECT_EQ(run.sample_period_ms, 100);
}

// Ten quiet readings of a busy H200 under our own load: SW power cap on, 1815 of 1980 MHz.
std::vector<Sample> quiet_run() {
  std::vector<Sample> samples;
  for (int i = 0; i < 10; ++i) {
    Sample s;
    s.t_ms = i * 100;
    s.device_util = 100;
    s.sm_clock_mhz = 1815;
    s.max_sm_clock_mhz = 1980;
    s.clock_event_reasons = kClockEventSwPowerCap;
    samples.push_back(s);
  }
  return samples;
}

TEST(SummaryTest, SwPowerCapAloneIsNotContended) {
  const RunCotenant run = summarize(quiet_run());
  EXPECT_TRUE(run.available);
  EXPECT_EQ(run.contended, false);
  EXPECT_EQ(run.throttle_reasons, "sw_power_cap 10/10");
  EXPECT_EQ(run.max_foreign_sm, 0.0);
  EXPECT_EQ(run.top_processes, "");
}

TEST(SummaryTest, ContendedByForeignSmAboveThreshold) {
  auto samples = quiet_run();
  samples[3].foreign.push_back({4242, "sglang", std::nullopt, 5.0});  // at the threshold: still quiet
  EXPECT_EQ(summarize(samples).contended, false);
  samples[7].foreign.push_back({4242, "sglang", std::nullopt, 6.0});
  const RunCotenant run = summarize(samples);
  EXPECT_EQ(run.contended, true);
  EXPECT_EQ(run.top_processes, "sglang@6%");
  QuietPolicy lenient;
  lenient.max_foreign_sm_percent = 10.0;
  EXPECT_EQ(summarize(samples, lenient).contended, false);
}

TEST(SummaryTest, ContendedByEachThermalOrPowerSlowdownBit) {
  for (const std::uint64_t bit : {kClockEventHwSlowdown, kClockEventSwThermalSlowdown, kClockEventHwThermalSlowdown,
                                  kClockEventHwPowerBrakeSlowdown}) {
    auto samples = quiet_run();
    samples[5].clock_event_reasons = kClockEventSwPowerCap | bit;
    const RunCotenant run = summarize(samples);
    EXPECT_EQ(run.contended, true) << std::hex << bit;
    EXPECT_NE(run.throttle_reasons.find(clock_event_name(bit) + " 1/10"), std::string::npos) << run.throttle_reasons;
  }
  // Clock-setting bits are not slowdowns.
  auto samples = quiet_run();
  samples[5].clock_event_reasons = kClockEventApplicationsClocksSetting | kClockEventDisplayClockSetting;
  EXPECT_EQ(summarize(samples).contended, false);
}

TEST(SummaryTest, ContendedWhenClockFallsUnderThreeQuartersInOverTenPercent) {
  auto samples = quiet_run();
  samples[2].sm_clock_mhz = 1400;  // < 0.75 * 1980 = 1485; 1 of 10 is not more than 10%
  EXPECT_EQ(summarize(samples).contended, false);
  samples[6].sm_clock_mhz = 1480;  // 2 of 10
  const RunCotenant run = summarize(samples);
  EXPECT_EQ(run.contended, true);
  EXPECT_EQ(run.min_sm_clock_mhz, 1400);
  EXPECT_EQ(run.median_sm_clock_mhz, 1815);
}

TEST(SummaryTest, IdleDownclockDoesNotCountAsClockDrop) {
  auto samples = quiet_run();
  for (int i : {0, 1, 2}) {
    samples[i].sm_clock_mhz = 345;
    samples[i].clock_event_reasons = kClockEventGpuIdle;
  }
  EXPECT_EQ(summarize(samples).contended, false);
}

TEST(SummaryTest, NoSamplesIsUnavailableAndUnknownNeverQuiet) {
  const RunCotenant run = summarize({}, QuietPolicy{}, 100);
  EXPECT_FALSE(run.available);
  EXPECT_FALSE(run.contended.has_value());
  EXPECT_FALSE(run.max_foreign_sm.has_value());
  EXPECT_FALSE(run.median_sm_clock_mhz.has_value());
  EXPECT_FALSE(run.sample_period_ms.has_value());
  EXPECT_FALSE(run.policy.empty());
}

TEST(SummaryTest, UnknownReadingsLeaveContendedUnknownUnlessARuleFired) {
  auto samples = quiet_run();
  samples[4].processes_listed = false;
  RunCotenant run = summarize(samples);
  EXPECT_TRUE(run.available);
  EXPECT_FALSE(run.contended.has_value());
  samples[4].processes_listed = true;
  samples[4].foreign.push_back({4242, "sglang", std::nullopt, std::nullopt});  // SM% unreadable
  run = summarize(samples);
  EXPECT_FALSE(run.contended.has_value());
  EXPECT_EQ(run.top_processes, "sglang@?%");
  samples[8].clock_event_reasons = kClockEventHwThermalSlowdown;
  EXPECT_EQ(summarize(samples).contended, true);
}

TEST(SummaryTest, ClassifyEachReading) {
  Sample s = quiet_run()[0];
  EXPECT_EQ(classify(s), SampleLoad::kQuiet);
  s.clock_event_reasons.reset();
  EXPECT_EQ(classify(s), SampleLoad::kUnknown);
  s.foreign.push_back({1, "x", std::nullopt, 50.0});
  EXPECT_EQ(classify(s), SampleLoad::kBusy);
  EXPECT_EQ(to_string(SampleLoad::kBusy), "busy");
}

}  // namespace
}  // namespace qgate::cotenant
