// PeriodicSampling: synchronous reads on a ManualClock, and the thread with a fast period.
#include "qgate/cotenant/periodic_sampling.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "qgate/cotenant/replay.h"

namespace qgate::cotenant {
namespace {

std::vector<Sample> trace_with_cotenant_from(std::int64_t from_ms, std::int64_t length_ms) {
  std::vector<Sample> trace;
  for (std::int64_t t = 0; t <= length_ms; t += 10) {
    Sample s;
    s.t_ms = t;
    s.clock_event_reasons = 0;
    s.foreign.push_back({777, "qgate-worker", std::nullopt, 95.0});
    if (t >= from_ms) s.foreign.push_back({4242, "sglang", std::nullopt, 96.0});
    trace.push_back(s);
  }
  return trace;
}

TEST(PeriodicSamplingTest, SampleOnceIsDeterministicWithAnInjectedClock) {
  ManualClock clock(0);
  ReplaySampler sampler(trace_with_cotenant_from(500, 1000), clock);
  PeriodicSampling sampling(sampler);
  EXPECT_EQ(sampling.period_ms(), 100);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(sampling.sample_once({777}).has_value());
    clock.advance_ms(100);
  }
  const auto samples = sampling.take();
  ASSERT_EQ(samples.size(), 10u);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(samples[i].t_ms, i * 100);
    EXPECT_EQ(samples[i].foreign.size(), i >= 5 ? 1u : 0u) << i;
  }
  EXPECT_TRUE(sampling.take().empty());
}

TEST(PeriodicSamplingTest, ThreadReturnsTheReadingsOfItsIntervalInOrder) {
  ReplaySampler sampler(trace_with_cotenant_from(0, 60'000), system_clock());
  PeriodicSampling sampling(sampler, PeriodicSamplingOptions{.period_ms = 5});
  for (int round = 0; round < 2; ++round) {
    const std::int64_t begin = system_clock().now_ms();
    sampling.start({777});
    EXPECT_TRUE(sampling.running());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto samples = sampling.stop();
    const std::int64_t end = system_clock().now_ms();
    EXPECT_FALSE(sampling.running());
    // ~20 reads at 5 ms plus the final one; generous bounds for a loaded 2-core CI machine.
    EXPECT_GE(samples.size(), 5u);
    EXPECT_LE(samples.size(), 25u);
    for (std::size_t i = 0; i < samples.size(); ++i) {
      EXPECT_GE(samples[i].t_ms, begin);
      EXPECT_LE(samples[i].t_ms, end);
      if (i > 0) {
        EXPECT_GE(samples[i].t_ms, samples[i - 1].t_ms);
      }
      ASSERT_EQ(samples[i].foreign.size(), 1u);
      EXPECT_EQ(samples[i].foreign[0].pid, 4242);
    }
  }
}

TEST(PeriodicSamplingTest, StopIsPromptWhateverThePeriod) {
  ReplaySampler sampler(trace_with_cotenant_from(0, 100), system_clock());
  PeriodicSampling sampling(sampler, PeriodicSamplingOptions{.period_ms = 60'000});
  sampling.start({});
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto before = std::chrono::steady_clock::now();
  const auto samples = sampling.stop();
  const auto took = std::chrono::steady_clock::now() - before;
  EXPECT_LT(took, std::chrono::milliseconds(500));
  EXPECT_EQ(samples.size(), 2u);  // the first reading and the final one
  EXPECT_THROW(PeriodicSampling(sampler, PeriodicSamplingOptions{.period_ms = 0}), std::invalid_argument);
}

TEST(PeriodicSamplingTest, StartTwiceIsAnError) {
  ReplaySampler sampler(trace_with_cotenant_from(0, 100), system_clock());
  PeriodicSampling sampling(sampler, PeriodicSamplingOptions{.period_ms = 50});
  sampling.start({});
  EXPECT_THROW(sampling.start({}), std::logic_error);
  (void)sampling.stop();
  // Destroying a running sampling joins its thread.
  PeriodicSampling other(sampler, PeriodicSamplingOptions{.period_ms = 50});
  other.start({});
}

TEST(PeriodicSamplingTest, UnavailableSamplerGivesNoReadingsAndNoThread) {
  ManualClock clock;
  ReplaySampler empty({}, clock);
  PeriodicSampling sampling(empty, PeriodicSamplingOptions{.period_ms = 1});
  sampling.start({});
  EXPECT_FALSE(sampling.running());
  EXPECT_TRUE(sampling.stop().empty());
  EXPECT_FALSE(sampling.sample_once({}).has_value());
}

}  // namespace
}  // namespace qgate::cotenant
