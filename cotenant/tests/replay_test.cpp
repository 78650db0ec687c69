// ReplaySampler, TraceRecorder and the trace format: deterministic playback on a ManualClock.
#include "qgate/cotenant/replay.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

namespace qgate::cotenant {
namespace {

// Quiet readings every 100 ms from trace time 10'000; sglang appears at 10'500 (offset 500 ms).
std::vector<Sample> cotenant_at_500ms() {
  std::vector<Sample> trace;
  for (int i = 0; i < 10; ++i) {
    Sample s;
    s.t_ms = 10'000 + i * 100;
    s.sm_clock_mhz = 1815;
    s.clock_event_reasons = 0;
    s.foreign.push_back({777, "qgate-worker", 1 << 30, 90.0});
    if (i >= 5) s.foreign.push_back({4242, "sglang", 2ull << 30, 96.0});
    trace.push_back(s);
  }
  return trace;
}

bool has_pid(const Sample& s, int pid) {
  for (const auto& p : s.foreign) {
    if (p.pid == pid) return true;
  }
  return false;
}

TEST(ReplayTest, CotenantShowsUpExactlyFromItsTraceTime) {
  ManualClock clock(50'000);
  ReplaySampler sampler(cotenant_at_500ms(), clock);
  ASSERT_TRUE(sampler.available());
  for (int offset = 0; offset < 500; offset += 7) {
    clock.set_ms(50'000 + offset);
    const auto s = sampler.read({777});
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(s->t_ms, 50'000 + offset);  // the reader's time, not the recording's
    EXPECT_FALSE(has_pid(*s, 4242)) << offset;
    EXPECT_FALSE(has_pid(*s, 777));  // own pids are filtered at read time
  }
  clock.set_ms(50'499);
  EXPECT_FALSE(has_pid(*sampler.read({777}), 4242));
  clock.set_ms(50'500);
  EXPECT_TRUE(has_pid(*sampler.read({777}), 4242));
  // Reading again at the same time gives the same answer.
  EXPECT_EQ(sampler.read({777}), sampler.read({777}));
  // Past the end the last state persists.
  clock.set_ms(60'000);
  EXPECT_TRUE(has_pid(*sampler.read({}), 4242));
  EXPECT_TRUE(has_pid(*sampler.read({}), 777));
}

TEST(ReplayTest, StopAtEndAndRestart) {
  ManualClock clock(0);
  ReplaySampler sampler(cotenant_at_500ms(), clock, ReplayOptions{.stop_at_end = true});
  clock.set_ms(900);
  EXPECT_TRUE(sampler.read({}).has_value());
  clock.set_ms(901);
  EXPECT_FALSE(sampler.read({}).has_value());
  sampler.restart();
  EXPECT_EQ(sampler.offset_ms(), 0);
  const auto s = sampler.read({777});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->t_ms, 901);
  EXPECT_TRUE(s->foreign.empty());
}

TEST(ReplayTest, EmptyTraceIsUnavailable) {
  ManualClock clock;
  ReplaySampler sampler({}, clock);
  EXPECT_FALSE(sampler.available());
  EXPECT_FALSE(sampler.unavailable_reason().empty());
  EXPECT_FALSE(sampler.read({}).has_value());
}

TEST(ReplayTest, RecordedTraceRoundTripsAndReplaysTheSame) {
  ManualClock clock(0);
  ReplaySampler source(cotenant_at_500ms(), clock);
  std::stringstream trace;
  TraceRecorder recorder(trace);
  RecordingSampler recording(source, recorder);
  std::vector<Sample> seen;
  for (int t = 0; t < 1000; t += 100) {
    clock.set_ms(t);
    seen.push_back(recording.read({777}).value());
  }
  EXPECT_EQ(recorder.lines_written(), 10u);
  const std::vector<Sample> loaded = read_trace(trace);
  EXPECT_EQ(loaded, seen);

  // Played back from a file on a fresh clock: the same readings at the same offsets.
  const auto path = std::filesystem::temp_directory_path() / ("qgate_cotenant_trace_" + std::to_string(getpid()));
  std::filesystem::remove(path);
  {
    TraceRecorder file_recorder(path);
    for (const auto& s : seen) file_recorder.write(s);
  }
  ManualClock replay_clock(7);
  ReplaySampler replay(load_trace(path), replay_clock);
  for (const auto& s : seen) {
    replay_clock.set_ms(7 + s.t_ms);
    Sample expected = s;
    expected.t_ms = 7 + s.t_ms;
    EXPECT_EQ(replay.read({}), expected);
  }
  std::filesystem::remove(path);
}

TEST(ReplayTest, BadTraceLineNamesItsNumber) {
  std::istringstream in("{\"t_ms\":1}\n\n# comment\n{\"t_ms\":\"soon\"}\n");
  try {
    (void)read_trace(in);
    FAIL() << "a bad line was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("line 4"), std::string::npos) << error.what();
  }
  EXPECT_THROW(load_trace("/nonexistent/qgate/trace.jsonl"), std::runtime_error);
}

}  // namespace
}  // namespace qgate::cotenant
