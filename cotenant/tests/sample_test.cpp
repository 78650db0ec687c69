// Sample helpers: clock-event names, foreign load, store rows, JSON lines.
#include "qgate/cotenant/sample.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace qgate::cotenant {
namespace {

TEST(SampleTest, DecodesKnownClockEventBitsAndUnknownAsHex) {
  EXPECT_EQ(decode_clock_event_reasons(0), "");
  EXPECT_EQ(decode_clock_event_reasons(0x4), "sw_power_cap");
  EXPECT_EQ(decode_clock_event_reasons(0x1 | 0x2 | 0x8 | 0x20 | 0x40 | 0x80 | 0x100),
            "gpu_idle, applications_clocks_setting, hw_slowdown, sw_thermal_slowdown, hw_thermal_slowdown, "
            "hw_power_brake_slowdown, display_clock_setting");
  EXPECT_EQ(decode_clock_event_reasons(0x10 | 0x400), "0x10, 0x400");
}

TEST(SampleTest, ForeignSmIsTheCappedSumAndUnknownWhenUnlisted) {
  Sample s;
  EXPECT_EQ(foreign_sm_percent(s), 0.0);
  s.foreign = {{1, "a", std::nullopt, 70.0}, {2, "b", std::nullopt, 20.0}, {3, "c", std::nullopt, std::nullopt}};
  EXPECT_EQ(foreign_sm_percent(s), 90.0);
  s.foreign.push_back({4, "d", std::nullopt, 30.0});
  EXPECT_EQ(foreign_sm_percent(s), 100.0);
  s.foreign = {{3, "c", std::nullopt, std::nullopt}};
  EXPECT_FALSE(foreign_sm_percent(s).has_value());
  s.processes_listed = false;
  s.foreign.clear();
  EXPECT_FALSE(foreign_sm_percent(s).has_value());
}

TEST(SampleTest, ProcessesTextIsTopByPercent) {
  const std::vector<ForeignProcess> processes = {{1, "python", std::nullopt, 12.4},
                                                 {2, "sglang", std::nullopt, 95.6},
                                                 {3, "idle", std::nullopt, 0.0},
                                                 {4, "tail", std::nullopt, 0.0}};
  EXPECT_EQ(foreign_processes_text(processes), "sglang@96%, python@12%, idle@0%");
  EXPECT_EQ(foreign_processes_text(processes, 1), "sglang@96%");
  EXPECT_EQ(foreign_processes_text({}), "");
}

TEST(SampleTest, RowMirrorsTheStoreSample) {
  Sample s;
  s.t_ms = 42;
  s.device_util = 99;
  s.sm_clock_mhz = 1815;
  s.clock_event_reasons = 0x4;
  s.foreign = {{9, "sglang", 5, 96.0}};
  const SampleRow row = to_row(s);
  EXPECT_EQ(row.t_ms, 42);
  EXPECT_EQ(row.foreign_sm, 96.0);
  EXPECT_EQ(row.device_util, 99.0);
  EXPECT_EQ(row.sm_clock_mhz, 1815);
  EXPECT_EQ(row.throttle_reasons, 4);
  EXPECT_EQ(row.foreign_processes, "sglang@96%");
  s.processes_listed = false;
  EXPECT_EQ(to_row(s).foreign_processes, "?");
  EXPECT_EQ(to_rows({s, s}).size(), 2u);
}

TEST(SampleTest, JsonLineRoundTripsAndLeavesUnknownOut) {
  Sample s;
  s.t_ms = 1'700'000'000'123;
  s.power_w = 612.5;
  s.clock_event_reasons = 0x8000000000000004ull;
  s.foreign = {{4242, "sglang", 20ull << 30, 96.0}, {5, "pid5", std::nullopt, std::nullopt}};
  const std::string line = to_json_line(s);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_EQ(line.find("device_util"), std::string::npos);
  EXPECT_EQ(sample_from_json_line(line), s);
  // Nulls read as unknown; a missing processes_listed means listed.
  const Sample n = sample_from_json_line(R"({"t_ms":5,"device_util":null,"foreign":null})");
  EXPECT_EQ(n.t_ms, 5);
  EXPECT_FALSE(n.device_util.has_value());
  EXPECT_TRUE(n.processes_listed);
  EXPECT_THROW(sample_from_json_line("[1,2]"), std::invalid_argument);
  EXPECT_THROW(sample_from_json_line("{\"device_util\":3}"), std::invalid_argument);
  EXPECT_THROW(sample_from_json_line("not json"), std::invalid_argument);
}

}  // namespace
}  // namespace qgate::cotenant
