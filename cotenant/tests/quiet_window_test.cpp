// QuietWindow: wait, hold, reset, staleness and expiry, driven by replayed traces on a ManualClock.
#include "qgate/cotenant/quiet_window.h"

#include <gtest/gtest.h>

#include <sstream>

#include "qgate/cotenant/replay.h"

namespace qgate::cotenant {
namespace {

constexpr std::int64_t kStart = 1'000'000;

QuietWindowOptions options(std::int64_t hold_ms, std::int64_t max_sample_gap_ms = 1'000) {
  QuietWindowOptions options;
  options.hold_ms = hold_ms;
  options.max_sample_gap_ms = max_sample_gap_ms;
  return options;
}

// A JSON-lines trace: every 100 ms for `seconds`; sglang at 90% SM while busy(t) says so.
template <typename Busy>
std::vector<Sample> trace_of(int seconds, Busy busy) {
  std::ostringstream text;
  for (int t = 0; t < seconds * 1000; t += 100) {
    Sample s;
    s.t_ms = t;
    s.sm_clock_mhz = 1815;
    s.max_sm_clock_mhz = 1980;
    s.clock_event_reasons = kClockEventSwPowerCap;  // our own load: not a slowdown
    s.foreign.push_back({777, "qgate-worker", std::nullopt, 95.0});
    if (busy(t)) s.foreign.push_back({4242, "sglang", std::nullopt, 90.0});
    text << to_json_line(s) << "\n";
  }
  std::istringstream in(text.str());
  return read_trace(in);
}

// Plays the trace at 100 ms steps into the window, calling `check(now)` after each reading.
template <typename Check>
void play(const std::vector<Sample>& trace, QuietWindow& window, ManualClock& clock, std::int64_t until_offset,
          Check check) {
  ReplaySampler sampler(trace, clock);
  for (std::int64_t offset = 0; offset <= until_offset; offset += 100) {
    clock.set_ms(kStart + offset);
    window.add(sampler.read({777}).value());
    check(clock.now_ms());
  }
}

TEST(QuietWindowTest, LoadForTwoSecondsThenQuietHoldsAfterTheHoldTime) {
  const auto trace = trace_of(40, [](int t) { return t < 2000; });
  ManualClock clock(kStart);
  QuietWindow window;  // hold 30 s
  EXPECT_EQ(window.options().hold_ms, 30'000);
  play(trace, window, clock, 39'900, [&](std::int64_t now) {
    const std::int64_t offset = now - kStart;
    if (offset < 2000) {
      EXPECT_FALSE(window.quiet_since_ms().has_value()) << offset;
    } else {
      EXPECT_EQ(window.quiet_since_ms(), kStart + 2000) << offset;
    }
    // Quiet exactly once the stretch that began at 2 s has held 30 s.
    EXPECT_EQ(window.is_quiet(now), offset >= 32'000) << offset;
  });
  EXPECT_TRUE(window.is_quiet_for(37'900, clock.now_ms()));
  EXPECT_FALSE(window.is_quiet_for(38'000, clock.now_ms()));
  EXPECT_EQ(window.ms_since_quiet(clock.now_ms()), 0);
  EXPECT_FALSE(window.last_quiet_window_end_ms(clock.now_ms()).has_value());
}

TEST(QuietWindowTest, ABlipResetsTheStretchAndMarksTheEndOfTheHeldWindow) {
  // Quiet 0-12 s, a blip at 12 s, quiet again after.
  const auto trace = trace_of(30, [](int t) { return t == 12'000; });
  ManualClock clock(kStart);
  QuietWindow window(options(10'000));
  play(trace, window, clock, 25'000, [&](std::int64_t now) {
    const std::int64_t offset = now - kStart;
    if (offset == 11'900) {
      EXPECT_TRUE(window.is_quiet(now));
    }
    if (offset == 12'000) {
      EXPECT_FALSE(window.quiet_since_ms().has_value());
      EXPECT_FALSE(window.is_quiet(now));
      EXPECT_EQ(window.last_quiet_window_end_ms(now), kStart + 11'900);
    }
    if (offset == 12'100) {
      EXPECT_EQ(window.quiet_since_ms(), kStart + 12'100);
    }
    if (offset == 22'000) {
      EXPECT_FALSE(window.is_quiet(now));
      EXPECT_EQ(window.ms_since_quiet(now), 22'000 - 11'900);
    }
    if (offset == 22'100) {
      EXPECT_TRUE(window.is_quiet(now));
    }
  });
  window.reset();
  EXPECT_FALSE(window.quiet_since_ms().has_value());
  EXPECT_FALSE(window.last_quiet_window_end_ms(clock.now_ms()).has_value());
}

TEST(QuietWindowTest, WaitForQuietUntilADeadlineExpiresOrSucceeds) {
  // Busy for 20 s, then quiet. Hold 5 s: quiet from 25 s.
  const auto trace = trace_of(40, [](int t) { return t < 20'000; });
  {
    ManualClock clock(kStart);
    QuietWindow window(options(5'000));
    const std::int64_t deadline = kStart + 15'000;  // gives up before the co-tenant stops
    play(trace, window, clock, 24'900, [&](std::int64_t now) {
      EXPECT_EQ(window.wait_state(now, deadline), now < deadline ? QuietWait::kWaiting : QuietWait::kExpired)
          << now - kStart;
    });
  }
  {
    ManualClock clock(kStart);
    QuietWindow window(options(5'000));
    const std::int64_t deadline = kStart + 60'000;
    play(trace, window, clock, 30'000, [&](std::int64_t now) {
      EXPECT_EQ(window.wait_state(now, deadline), now - kStart >= 25'000 ? QuietWait::kQuiet : QuietWait::kWaiting)
          << now - kStart;
    });
  }
  EXPECT_EQ(to_string(QuietWait::kExpired), "expired");
}

TEST(QuietWindowTest, StaleOrGappedReadingsAreNotQuiet) {
  QuietWindow window(options(1'000, 500));
  Sample quiet;
  quiet.clock_event_reasons = 0;
  for (std::int64_t t = 0; t <= 2'000; t += 100) {
    quiet.t_ms = t;
    window.add(quiet);
  }
  EXPECT_TRUE(window.is_quiet(2'000));
  EXPECT_TRUE(window.is_quiet(2'500));
  EXPECT_FALSE(window.is_quiet(2'501));  // the sampler went silent: stale
  EXPECT_EQ(window.last_quiet_window_end_ms(2'501), 2'000);
  EXPECT_EQ(window.ms_since_quiet(3'000), 1'000);
  // A reading after a long gap starts a new stretch.
  quiet.t_ms = 5'000;
  window.add(quiet);
  EXPECT_EQ(window.quiet_since_ms(), 5'000);
  EXPECT_FALSE(window.is_quiet(5'000));
  EXPECT_EQ(window.last_quiet_window_end_ms(5'000), 2'000);
  // Older readings are ignored.
  quiet.t_ms = 4'000;
  EXPECT_FALSE(window.add(quiet));
}

TEST(QuietWindowTest, UnknownAndSlowdownReadingsBreakTheStretch) {
  QuietWindow window(options(0));
  Sample s;
  s.t_ms = 0;
  s.clock_event_reasons = 0;
  window.add(s);
  EXPECT_TRUE(window.is_quiet(0));
  s.t_ms = 100;
  s.processes_listed = false;  // cannot tell who else is there
  window.add(s);
  EXPECT_FALSE(window.is_quiet(100));
  s.t_ms = 200;
  s.processes_listed = true;
  s.clock_event_reasons = kClockEventHwThermalSlowdown;
  window.add(s);
  EXPECT_FALSE(window.is_quiet(200));
  s.t_ms = 300;
  s.clock_event_reasons = kClockEventSwPowerCap;
  window.add(s);
  EXPECT_TRUE(window.is_quiet(300));
}

}  // namespace
}  // namespace qgate::cotenant
