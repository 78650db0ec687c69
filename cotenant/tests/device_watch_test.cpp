// DeviceWatch: the state `qgate device` shows and the scheduler waits on, driven by a replayed
// trace on a ManualClock; and own_process_family on a fake /proc.
#include "qgate/cotenant/device_watch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "qgate/cotenant/replay.h"

namespace qgate::cotenant {
namespace {

constexpr std::int64_t kStart = 5'000'000;

// Every 100 ms for `seconds`: sglang at 90% SM while busy(t), and our own worker (pid 777) always.
template <typename Busy>
std::vector<Sample> trace_of(int seconds, Busy busy) {
  std::ostringstream text;
  for (int t = 0; t < seconds * 1000; t += 100) {
    Sample s;
    s.t_ms = t;
    s.sm_clock_mhz = 1815;
    s.max_sm_clock_mhz = 1980;
    s.clock_event_reasons = 0;
    s.foreign.push_back({777, "qgate-worker", std::nullopt, 95.0});
    if (busy(t)) s.foreign.push_back({4242, "sglang", std::nullopt, 90.0});
    text << to_json_line(s) << "\n";
  }
  std::istringstream in(text.str());
  return read_trace(in);
}

DeviceWatchOptions options_with_hold(std::int64_t hold_ms) {
  DeviceWatchOptions o;
  o.window.hold_ms = hold_ms;
  o.own_pids = [] { return std::set<int>{777}; };
  return o;
}

TEST(DeviceWatchTest, ContendedThenSettlingThenQuietThenContendedAgain) {
  ManualClock clock(kStart);
  ReplaySampler sampler(trace_of(20, [](int t) { return t < 3000 || t >= 12000; }), clock);
  DeviceWatch watch(sampler, clock, options_with_hold(5000));

  auto step_to = [&](std::int64_t offset) {
    for (std::int64_t t = clock.now_ms() - kStart; t <= offset; t += 100) {
      clock.set_ms(kStart + t);
      ASSERT_TRUE(watch.sample_once().has_value());
    }
  };
  step_to(1000);
  DeviceNow n = watch.now();
  EXPECT_EQ(n.state, "contended");
  EXPECT_NE(n.reason.find("sglang@90%"), std::string::npos) << n.reason;
  EXPECT_EQ(n.latest->foreign.size(), 1u) << "our own worker is not a co-tenant";
  EXPECT_FALSE(n.ms_since_quiet.has_value()) << "never quiet yet";
  EXPECT_FALSE(watch.quiet_now());

  step_to(5000);  // quiet since 3 s, for 2 of the 5 s hold
  n = watch.now();
  EXPECT_EQ(n.state, "settling");
  EXPECT_EQ(n.quiet_for_ms, 2000);
  EXPECT_FALSE(watch.quiet_now());

  step_to(9000);  // quiet for 6 s
  n = watch.now();
  EXPECT_EQ(n.state, "quiet");
  EXPECT_EQ(n.ms_since_quiet, 0);
  EXPECT_TRUE(watch.quiet_now());

  step_to(14000);  // busy again since 12 s; the quiet window ended at 11.9 s
  n = watch.now();
  EXPECT_EQ(n.state, "contended");
  EXPECT_FALSE(watch.quiet_now());
  EXPECT_EQ(n.ms_since_quiet, 14000 - 11900);
  EXPECT_NE(n.policy.find("held for 5.0 s"), std::string::npos) << n.policy;
}

TEST(DeviceWatchTest, AStaleReadingIsNeverQuiet) {
  ManualClock clock(kStart);
  ReplaySampler sampler(trace_of(20, [](int) { return false; }), clock);
  DeviceWatch watch(sampler, clock, options_with_hold(1000));
  for (int t = 0; t <= 3000; t += 100) {
    clock.set_ms(kStart + t);
    watch.sample_once();
  }
  EXPECT_TRUE(watch.quiet_now());
  clock.advance_ms(5000);  // nobody read the device for 5 s
  EXPECT_FALSE(watch.quiet_now());
  EXPECT_EQ(watch.now().state, "unknown");
}

class NoReadings final : public Sampler {
 public:
  std::optional<Sample> read(const std::set<int>&) override { return std::nullopt; }
  bool available() const override { return false; }
  std::string unavailable_reason() const override { return "no NVML here"; }
};

TEST(DeviceWatchTest, WithoutASamplerTheStateIsUnavailableNotQuiet) {
  NoReadings none;
  DeviceWatch watch(none);
  watch.start();  // starts no thread
  const DeviceNow n = watch.now();
  EXPECT_EQ(n.state, "unavailable");
  EXPECT_EQ(n.reason, "no NVML here");
  EXPECT_FALSE(watch.quiet_now());
  watch.stop();
}

TEST(DeviceWatchTest, TheBackgroundThreadReadsUntilStopped) {
  ReplaySampler sampler(trace_of(5, [](int) { return true; }), system_clock());
  DeviceWatchOptions o = options_with_hold(1000);
  o.period_ms = 10;
  DeviceWatch watch(sampler, system_clock(), o);
  watch.start();
  for (int i = 0; i < 200 && !watch.now().latest; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  watch.stop();
  EXPECT_EQ(watch.now().state, "contended");
}

TEST(DeviceWatchTest, OwnProcessFamilyIsThisProcessAndItsChildren) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("qgate-proc-" + std::to_string(getpid()));
  fs::remove_all(root);
  const int self = static_cast<int>(getpid());
  auto add = [&](int pid, const std::string& comm, int ppid) {
    fs::create_directories(root / std::to_string(pid));
    std::ofstream(root / std::to_string(pid) / "stat") << pid << " (" << comm << ") S " << ppid << " 1 1 0\n";
  };
  add(self, "qgated", 1);
  add(900001, "qgate-worker", self);
  add(900002, "odd) name (x", self);  // comm with parentheses and spaces
  add(900003, "sglang", 1);
  fs::create_directories(root / "self");
  const std::set<int> family = own_process_family(root.string());
  fs::remove_all(root);
  EXPECT_EQ(family, (std::set<int>{self, 900001, 900002}));
}

}  // namespace
}  // namespace qgate::cotenant
