// The group-sequential gate: planned looks, Lan-DeMets O'Brien-Fleming-type boundaries against
// published values, the trimmed-t interval, and the verdict, comparison and stopping decision that a
// look reads from that one interval (they never disagree).
#include "qgate/stats/sequential.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

using namespace qgate::stats;
using qgate::Comparison;
using qgate::Verdict;

namespace {

// Pairs whose log-ratios are exactly log(ratio) + the given offsets.
std::vector<AbPair> pairs_with(double ratio, const std::vector<double>& offsets) {
  std::vector<AbPair> p;
  for (double o : offsets) p.push_back({400 * ratio * std::exp(o), 400, false});
  return p;
}

std::vector<AbPair> noisy(size_t n, double ratio, double sigma, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> z(0, sigma);
  std::vector<AbPair> p;
  for (size_t i = 0; i < n; ++i) p.push_back({400 * ratio * std::exp(z(rng)), 400 * std::exp(z(rng)), false});
  return p;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

GatePolicy policy_with(int min_pairs, int max_pairs) {
  GatePolicy p;
  p.min_pairs = min_pairs;
  p.max_pairs = max_pairs;
  return p;
}

}  // namespace

TEST(SequentialDesign, BoundariesMatchPublishedValues) {
  // Lan-DeMets O'Brien-Fleming-type spending, one-sided 0.025, five equally spaced looks: the
  // boundaries tabulated for this design are 4.877, 3.357, 2.680, 2.290, 2.031.
  const std::vector<double> t = {0.2, 0.4, 0.6, 0.8, 1.0};
  const std::vector<double> z = obf_boundaries(t, 0.025);
  const std::vector<double> expected = {4.877, 3.357, 2.680, 2.290, 2.031};
  ASSERT_EQ(z.size(), expected.size());
  for (size_t k = 0; k < z.size(); ++k) EXPECT_NEAR(z[k], expected[k], 0.003) << "look " << k + 1;
  // One look spends everything: the fixed-sample 1.96.
  EXPECT_NEAR(obf_boundaries(std::vector<double>{1.0}, 0.025)[0], 1.95996, 1e-4);
  EXPECT_NEAR(obf_spending(1.0, 0.025), 0.025, 1e-12);
  EXPECT_LT(obf_spending(0.25, 0.025), 1e-4);
  EXPECT_THROW(obf_boundaries(std::vector<double>{0.5, 0.4}, 0.025), std::invalid_argument);
}

TEST(SequentialDesign, LooksHalveTheBudgetDownToTheMinimum) {
  EXPECT_EQ(SequentialDesign::plan_looks(4, 64), (std::vector<int>{4, 8, 16, 32, 64}));
  EXPECT_EQ(SequentialDesign::plan_looks(4, 40), (std::vector<int>{5, 10, 20, 40}));
  EXPECT_EQ(SequentialDesign::plan_looks(4, 24), (std::vector<int>{6, 12, 24}));
  EXPECT_EQ(SequentialDesign::plan_looks(4, 8), (std::vector<int>{4, 8}));
  EXPECT_EQ(SequentialDesign::plan_looks(4, 4), (std::vector<int>{4}));
  EXPECT_EQ(SequentialDesign::plan_looks(2, 2), (std::vector<int>{2}));

  const SequentialDesign d = SequentialDesign::from_policy(GatePolicy{});
  ASSERT_EQ(d.looks, (std::vector<int>{5, 10, 20, 40}));
  EXPECT_NEAR(d.spent.back(), 0.025, 1e-12);
  for (size_t k = 1; k < d.looks.size(); ++k) {
    EXPECT_LT(d.z_bound[k], d.z_bound[k - 1]);
    EXPECT_LT(d.t_bound[k], d.t_bound[k - 1]);
    EXPECT_GT(d.t_bound[k], d.z_bound[k]);  // the t boundary carries the unknown variance
  }
  EXPECT_EQ(d.trimmed.back(), 8);  // 20% of 40 from each end
  EXPECT_DOUBLE_EQ(d.df.back(), kEffectiveDfScale * 23);  // 40 - 16 kept, less one, calibrated
  EXPECT_EQ(d.autocovariance_lags, kAutocovarianceLags);
  EXPECT_EQ(d.equivalence_band, 0.01);
}

TEST(SequentialDesign, RefusesPoliciesThatMakeNoSense) {
  EXPECT_THROW(SequentialDesign::from_policy(policy_with(10, 5)), std::invalid_argument);
  EXPECT_THROW(SequentialDesign::from_policy(policy_with(1, 5)), std::invalid_argument);
  GatePolicy p;
  p.slowdown_threshold = 0;
  EXPECT_THROW(SequentialDesign::from_policy(p), std::invalid_argument);
  p = {};
  p.target_halfwidth = 0;
  EXPECT_THROW(SequentialDesign::from_policy(p), std::invalid_argument);
}

TEST(SequentialDesign, EquivalenceBandNeverExceedsTheThreshold) {
  // Otherwise SAME (within +-1%) could sit beside FAIL (beyond a 0.5% threshold).
  GatePolicy p;
  p.slowdown_threshold = 0.005;
  EXPECT_EQ(SequentialDesign::from_policy(p).equivalence_band, 0.005);
}

TEST(SequentialLook, TheIntervalIsTheTrimmedMeanAndIgnoresAFewWildPairs) {
  const SequentialDesign d = SequentialDesign::from_policy(policy_with(10, 10));
  ASSERT_EQ(d.looks, std::vector<int>{10});
  std::vector<double> offsets = {-0.004, -0.003, -0.002, -0.001, 0.0, 0.0, 0.001, 0.002, 0.003, 0.004};
  const LookInterval calm = look_interval(pairs_with(0.97, offsets), d, 0);
  EXPECT_EQ(calm.trimmed, 2);
  EXPECT_NEAR(calm.estimate, std::log(0.97), 1e-12);
  // A co-tenant halves one run of each arm: the two wild pairs are trimmed away.
  offsets.front() = -std::log(2.0);
  offsets.back() = std::log(2.0);
  const LookInterval wild = look_interval(pairs_with(0.97, offsets), d, 0);
  EXPECT_NEAR(wild.estimate, calm.estimate, 1e-12);
  EXPECT_NEAR(wild.standard_error, calm.standard_error, 1e-12);
  EXPECT_NEAR(wild.upper - wild.estimate, wild.t_bound * wild.standard_error, 1e-12);
  EXPECT_LT(wild.upper, std::log(0.98));
}

TEST(SequentialLook, EqualMiddlePairsDoNotMakeAZeroWidthInterval) {
  const SequentialDesign d = SequentialDesign::from_policy(policy_with(5, 5));
  const LookInterval three_equal = look_interval(pairs_with(0.9, {-0.3, 0.0, 0.0, 0.0, 0.5}), d, 0);
  EXPECT_GT(three_equal.standard_error, 0.05);
  EXPECT_GT(three_equal.upper, std::log(0.98));
  const LookInterval all_equal = look_interval(pairs_with(0.9, {0.0, 0.0, 0.0, 0.0, 0.0}), d, 0);
  EXPECT_EQ(all_equal.standard_error, 0.0);
  EXPECT_EQ(all_equal.lower, all_equal.upper);
}

TEST(SequentialLook, AClearSlowdownFailsAsDifferentAndStops) {
  const SequentialDesign d = SequentialDesign::from_policy(GatePolicy{});
  const auto pairs = noisy(20, 0.95, 0.003, 21);
  const LookResult r = evaluate_look(pairs, d, 2);
  EXPECT_EQ(r.verdict, Verdict::Fail);
  EXPECT_EQ(r.comparison, Comparison::Different);
  EXPECT_EQ(r.decision, LookDecision::stop);
  EXPECT_EQ(exit_code(r.verdict), 1);
  EXPECT_NEAR(r.ratio, 0.95, 0.005);
  ASSERT_GE(r.reasons.size(), 4u);
  EXPECT_TRUE(contains(r.reasons[0], "is a slowdown beyond 2.0%")) << r.reasons[0];
  EXPECT_TRUE(contains(r.reasons[0], "ratio 0.95")) << r.reasons[0];
  EXPECT_TRUE(contains(r.reasons[1], "DIFFERENT: A is slower")) << r.reasons[1];
  EXPECT_TRUE(contains(r.reasons[2], "look 3 of 4 at 20 pairs")) << r.reasons[2];
  EXPECT_TRUE(contains(r.reasons[3], "both decided")) << r.reasons[3];
}

TEST(SequentialLook, ASpeedupPassesAsDifferentAndAnAaRunAsSame) {
  const SequentialDesign d = SequentialDesign::from_policy(GatePolicy{});
  const LookResult up = evaluate_look(noisy(20, 1.05, 0.003, 31), d, 2);
  EXPECT_EQ(up.verdict, Verdict::Pass);
  EXPECT_EQ(up.comparison, Comparison::Different);
  EXPECT_EQ(exit_code(up.verdict), 0);
  EXPECT_TRUE(contains(up.reasons[1], "DIFFERENT: A is faster")) << up.reasons[1];
  const LookResult aa = evaluate_look(noisy(20, 1.0, 0.003, 41), d, 2);
  EXPECT_EQ(aa.verdict, Verdict::Pass);
  EXPECT_EQ(aa.comparison, Comparison::Same);
  EXPECT_EQ(aa.decision, LookDecision::stop);
  EXPECT_TRUE(contains(aa.reasons[0], "rules out a slowdown beyond 2.0%")) << aa.reasons[0];
  EXPECT_TRUE(contains(aa.reasons[1], "SAME: the interval lies within +-1.0%")) << aa.reasons[1];
}

TEST(SequentialLook, TheFirstLookOnlyStopsForTheExtraordinary) {
  // O'Brien-Fleming spends almost nothing early: a 5% slowdown at 1% noise does not stop at 5 pairs.
  const SequentialDesign d = SequentialDesign::from_policy(GatePolicy{});
  const LookResult r = evaluate_look(noisy(5, 0.95, 0.01, 51), d, 0);
  EXPECT_EQ(r.verdict, Verdict::Inconclusive);
  EXPECT_EQ(r.decision, LookDecision::continue_adding);
  EXPECT_EQ(exit_code(r.verdict), 2);
  EXPECT_TRUE(contains(r.reasons.back(), "continuing to look 2 at 10 pairs")) << r.reasons.back();
}

TEST(SequentialLook, StopsAtTheBudgetAndAtThePrecisionTarget) {
  const SequentialDesign d = SequentialDesign::from_policy(GatePolicy{});
  const LookResult noisy_end = evaluate_look(noisy(40, 0.98, 0.3, 52), d, 3);
  EXPECT_EQ(noisy_end.verdict, Verdict::Inconclusive);
  EXPECT_EQ(noisy_end.decision, LookDecision::stop);
  EXPECT_TRUE(contains(noisy_end.reasons[0], "straddles 0.980")) << noisy_end.reasons[0];
  EXPECT_TRUE(contains(noisy_end.reasons[3], "budget of 40 pairs")) << noisy_end.reasons[3];

  // On the threshold, within +-0.1%: more pairs would not move the answer; stop at look 3.
  std::vector<double> offsets;
  for (int i = 0; i < 20; ++i) offsets.push_back(i % 3 ? 0.0005 : -0.0005);
  const LookResult on_threshold = evaluate_look(pairs_with(0.98, offsets), d, 2);
  EXPECT_EQ(on_threshold.verdict, Verdict::Inconclusive);
  EXPECT_LT(on_threshold.halfwidth(), 0.01);
  EXPECT_EQ(on_threshold.decision, LookDecision::stop);
  EXPECT_TRUE(contains(on_threshold.reasons[3], "precision target")) << on_threshold.reasons[3];
}

TEST(SequentialLook, FourTightPairsOfAHalfSpeedKernelFailAsDifferent) {
  // The H200's MMQ/f16 A/B with a budget of 4 pairs once read "FAIL (UNKNOWN)": the interval was
  // decisive and the rank test could not be. Now both come from the one interval.
  const SequentialDesign d = SequentialDesign::from_policy(policy_with(4, 4));
  const LookResult r = evaluate_look(pairs_with(0.52, {-0.01, 0.004, 0.012, -0.006}), d, 0);
  EXPECT_EQ(r.verdict, Verdict::Fail);
  EXPECT_EQ(r.comparison, Comparison::Different);
  EXPECT_EQ(r.decision, LookDecision::stop);
}

TEST(SequentialLook, VerdictAndComparisonNeverDisagree) {
  const SequentialDesign d = SequentialDesign::from_policy(policy_with(4, 64));
  int seen_pass_same = 0, seen_fail = 0;
  uint64_t seed = 1;
  for (double ratio : {0.9, 0.97, 0.98, 0.985, 0.99, 1.0, 1.01, 1.05}) {
    for (double sigma : {0.001, 0.005, 0.02, 0.2}) {
      const auto all = noisy(64, ratio, sigma, ++seed);
      for (size_t k = 0; k < d.looks.size(); ++k) {
        const std::span<const AbPair> pairs(all.data(), static_cast<size_t>(d.looks[k]));
        const LookResult r = evaluate_look(pairs, d, k);
        if (r.verdict == Verdict::Fail) {
          ++seen_fail;
          EXPECT_EQ(r.comparison, Comparison::Different) << ratio << " " << sigma << " look " << k;
        }
        if (r.comparison == Comparison::Same) {
          ++seen_pass_same;
          EXPECT_EQ(r.verdict, Verdict::Pass) << ratio << " " << sigma << " look " << k;
        }
        EXPECT_EQ(r.reasons[1].rfind(std::string(to_string(r.comparison)), 0), 0u) << r.reasons[1];
      }
    }
  }
  EXPECT_GT(seen_fail, 0);
  EXPECT_GT(seen_pass_same, 0);
}

TEST(SequentialLook, CountsContentionMismatchesAndSaysSo) {
  const SequentialDesign d = SequentialDesign::from_policy(policy_with(8, 8));
  auto pairs = noisy(8, 1.0, 0.01, 81);
  pairs[2].contention_mismatch = true;
  pairs[5].contention_mismatch = true;
  const LookResult r = evaluate_look(pairs, d, 0);
  EXPECT_EQ(r.contention_mismatches, 2u);
  EXPECT_TRUE(contains(r.reasons.back(), "2 of 8 pairs")) << r.reasons.back();
}

TEST(SequentialLook, RefusesTheWrongNumberOfPairsAndBadFigures) {
  const SequentialDesign d = SequentialDesign::from_policy(GatePolicy{});
  EXPECT_THROW(evaluate_look(noisy(6, 1.0, 0.01, 1), d, 0), std::invalid_argument);
  EXPECT_THROW(evaluate_look(noisy(5, 1.0, 0.01, 1), d, 7), std::invalid_argument);
  auto bad = noisy(5, 1.0, 0.01, 1);
  bad[3].b = 0;
  try {
    evaluate_look(bad, d, 0);
    ADD_FAILURE() << "accepted b = 0";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "pair 3")) << e.what();
  }
}
