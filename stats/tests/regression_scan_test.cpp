// `qgate regressions` across series: a slowdown paired with the change that fixed it, a slowdown of too
// few slow builds labelled transient, the permutations a scan draws for its number of series, the
// sequential permutation p-value, and a scan over clean series where only the series with a dip is kept,
// as one event with both ends.
#include "qgate/stats/regression_scan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "monte_carlo.h"
#include "qgate/stats/slowdown_events.h"

using namespace qgate::stats;

namespace {

ChangePoint change_at(size_t index, double ratio) {
  ChangePoint c;
  c.index = index;
  c.ratio = ratio;
  return c;
}

// 40 builds of log level 0 with `cv` noise on each build's value and a dip of `depth` on [start, start + length).
std::vector<double> series_with_dip(size_t start, size_t length, double depth, double cv, uint64_t seed) {
  monte_carlo::Rng rng(seed);
  std::vector<double> series;
  for (size_t b = 0; b < 40; ++b)
    series.push_back((b >= start && b < start + length ? std::log(1 - depth) : 0.0) + cv * rng.normal());
  return series;
}

}  // namespace

TEST(SlowdownEvents, ADropUndoneSoonIsOneEventWithItsRecovery) {
  // Down 3% at 20, back up at 25: one event. Then down at 30 with no change after it: a slowdown alone.
  const std::vector<ChangePoint> changes{change_at(20, 0.97), change_at(25, 1 / 0.97), change_at(30, 0.95)};
  const auto events = slowdown_events(changes);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].drop, 0u);
  ASSERT_TRUE(events[0].recovery.has_value());
  EXPECT_EQ(*events[0].recovery, 1u);
  EXPECT_EQ(events[1].drop, 2u);
  EXPECT_FALSE(events[1].recovery.has_value());
}

TEST(SlowdownEvents, ASpeedupTooLateTooSmallOrTooLargeIsNotItsRecovery) {
  // 25 builds later than the drop (more than 20).
  EXPECT_FALSE(slowdown_events(std::vector<ChangePoint>{change_at(5, 0.97), change_at(30, 1 / 0.97)})[0].recovery);
  // Recovers a third of a 6% drop: the series stays 4% slow, the regression is not fixed.
  EXPECT_FALSE(slowdown_events(std::vector<ChangePoint>{change_at(5, 0.94), change_at(12, 1.02)})[0].recovery);
  // Speeds up 10% after a 3% drop: an improvement of its own, not a fix.
  EXPECT_FALSE(slowdown_events(std::vector<ChangePoint>{change_at(5, 0.97), change_at(12, 1.10)})[0].recovery);
  // Half of the drop back is still within the default tolerance; a speedup first is no slowdown.
  EXPECT_TRUE(slowdown_events(std::vector<ChangePoint>{change_at(5, 0.96), change_at(12, 1.021)})[0].recovery);
  EXPECT_TRUE(slowdown_events(std::vector<ChangePoint>{change_at(5, 1.05)}).empty());
  RecoveryOptions strict;
  strict.max_dip_builds = 5;
  EXPECT_FALSE(slowdown_events(std::vector<ChangePoint>{change_at(5, 0.97), change_at(11, 1 / 0.97)}, strict)[0].recovery);
  strict.tolerance = 1;
  EXPECT_THROW(slowdown_events(std::vector<ChangePoint>{}, strict), std::invalid_argument);
}

TEST(SlowdownEvents, ASlowdownCarriedByTooFewBuildsIsTransient) {
  // Level 0 for builds 0-9; builds 10-14 are the slow level, of which only 10 and 11 are slow.
  std::vector<double> values(20, 0.0);
  values[10] = values[11] = -0.2;
  const std::vector<ChangePoint> changes{change_at(10, 0.92), change_at(15, 1 / 0.92)};
  std::vector<SlowdownEvent> events = slowdown_events(changes);
  label_transient_slowdowns(values, changes, events, 3);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].slow_builds, 2u);  // halfway is -0.04: builds 12-14 at 0 are not slow
  EXPECT_TRUE(events[0].transient);
  // Three slow builds of five are a sustained slowdown.
  values[12] = -0.2;
  label_transient_slowdowns(values, changes, events, 3);
  EXPECT_EQ(events[0].slow_builds, 3u);
  EXPECT_FALSE(events[0].transient);
  // A slowdown to the series' end counts up to the end.
  const std::vector<ChangePoint> step{change_at(10, 0.9)};
  std::vector<double> stepped(20, 0.0);
  for (size_t i = 10; i < 20; ++i) stepped[i] = -0.1;
  std::vector<SlowdownEvent> step_events = slowdown_events(step);
  label_transient_slowdowns(stepped, step, step_events, 3);
  EXPECT_EQ(step_events[0].slow_builds, 10u);
  EXPECT_FALSE(step_events[0].transient);
  // A change beyond the series is refused.
  EXPECT_THROW(label_transient_slowdowns(std::vector<double>(8, 0.0), changes, events, 3), std::invalid_argument);
}

TEST(RegressionScan, AllowsForTheMedianSerialCorrelationOfItsSeries) {
  // 20 series whose builds follow a lag-1 autoregression of 0.6, one of them with a 20% dip of 2 builds.
  monte_carlo::Rng rng(12);
  std::vector<std::vector<double>> correlated;
  for (int s = 0; s < 20; ++s) {
    std::vector<double> one{0.01 * rng.normal() / 0.8};
    while (one.size() < 40) one.push_back(0.6 * one.back() + 0.01 * rng.normal());
    correlated.push_back(one);
  }
  correlated[3][20] += std::log(0.8);
  correlated[3][21] += std::log(0.8);
  EXPECT_NEAR(scan_for_regressions(correlated, {}).serial_correlation, 0.6, 0.1);
  // Flat white series: about 0. Fewer than five series: the detector's setting (0) stands.
  std::vector<std::vector<double>> white;
  for (uint64_t s = 0; s < 20; ++s) white.push_back(series_with_dip(0, 0, 0, 0.01, 200 + s));
  EXPECT_LT(scan_for_regressions(white, {}).serial_correlation, 0.1);
  correlated.resize(4);
  EXPECT_EQ(scan_for_regressions(correlated, {}).serial_correlation, 0.0);
  RegressionScanOptions set;
  set.detector.serial_correlation = 0.3;
  EXPECT_EQ(scan_for_regressions(correlated, set).serial_correlation, 0.3);
}

TEST(RegressionScan, PermutationsGrowWithTheSeriesScannedUpToTheCap) {
  // 1 / (R + 1) is half of q / m: 1 series at q 0.01 needs 199 (the default 499 stands), 20 need 3,999.
  EXPECT_EQ(permutations_for_series(1, 0.01, 499, 19'999), 499u);
  EXPECT_EQ(permutations_for_series(20, 0.01, 499, 19'999), 3'999u);
  EXPECT_EQ(permutations_for_series(100, 0.01, 499, 19'999), 19'999u);
  EXPECT_EQ(permutations_for_series(1000, 0.01, 499, 19'999), 19'999u);
  EXPECT_EQ(permutations_for_series(0, 0.01, 499, 19'999), 499u);
  EXPECT_THROW(permutations_for_series(5, 0.0, 499, 19'999), std::invalid_argument);
}

TEST(RegressionScan, SequentialPValueStopsEarlyOnNoiseAndAgreesOnAClearStep) {
  // Noise alone: ten shuffles as strong come quickly, p = 10 / L is far above alpha.
  ChangePointOptions sequential;
  sequential.permutations = 19'999;
  sequential.stop_after_exceedances = 10;
  sequential.alpha = 0.99;
  sequential.max_changes = 1;
  const auto flat = detect_change_points(series_with_dip(0, 0, 0, 0.01, 3), sequential);
  ASSERT_EQ(flat.size(), 1u);
  EXPECT_GT(flat[0].p, 0.02);
  EXPECT_GT(flat[0].p * 10'000, 10.0) << "stopped after ten exceedances, so p = 10 / L with L well under R";
  // A clear 5% dip: no shuffle reaches it, all permutations are drawn and p is the floor 1 / (R + 1).
  const auto dip = detect_change_points(series_with_dip(15, 8, 0.05, 0.005, 4), sequential);
  ASSERT_FALSE(dip.empty());
  EXPECT_DOUBLE_EQ(dip[0].p, 1.0 / 20'000);
}

TEST(RegressionScan, KeepsOnlyTheSeriesWithADipAndReportsItAsOneEvent) {
  std::vector<std::vector<double>> series;
  for (uint64_t s = 0; s < 19; ++s) series.push_back(series_with_dip(0, 0, 0, 0.01, 100 + s));
  series.insert(series.begin() + 7, series_with_dip(20, 6, 0.05, 0.005, 77));
  series.push_back({0.1, 0.2, 0.3});  // too short to test: not counted
  const RegressionScan scan = scan_for_regressions(series, {});
  EXPECT_EQ(scan.tested, 20u);
  EXPECT_EQ(scan.permutations, 3'999u);
  EXPECT_EQ(scan.selected, 1u);
  EXPECT_DOUBLE_EQ(scan.within_series_alpha, 0.01 / 20);
  for (size_t s = 0; s < series.size(); ++s) {
    const SeriesRegressions& one = scan.series[s];
    EXPECT_EQ(one.tested, s != 20) << s;
    EXPECT_EQ(one.selected, s == 7) << s;
    if (s != 7) {
      EXPECT_TRUE(one.changes.empty()) << s;
      continue;
    }
    EXPECT_DOUBLE_EQ(one.p, 1.0 / 4'000);
    EXPECT_DOUBLE_EQ(one.q_value, 20.0 / 4'000);  // m p / 1 for the smallest p
    ASSERT_EQ(one.changes.size(), 2u);
    EXPECT_EQ(one.changes[0].index, 20u);
    EXPECT_EQ(one.changes[1].index, 26u);
    ASSERT_EQ(one.slowdowns.size(), 1u);
    EXPECT_EQ(one.slowdowns[0].drop, 0u);
    ASSERT_TRUE(one.slowdowns[0].recovery.has_value());
    EXPECT_EQ(*one.slowdowns[0].recovery, 1u);
    EXPECT_NEAR(one.changes[0].ratio, 0.95, 0.01);
    EXPECT_EQ(one.slowdowns[0].slow_builds, 6u);
    EXPECT_FALSE(one.slowdowns[0].transient);
  }
  std::vector<std::vector<double>> bad{std::vector<double>(12, 0.0)};
  bad[0][3] = NAN;
  EXPECT_THROW(scan_for_regressions(bad, {}), std::invalid_argument);
}
