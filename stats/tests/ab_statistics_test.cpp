// Paired A/B statistics: the estimate is a geometric mean of per-pair ratios, its interval covers the
// truth, and the fixed-sample comparison gives the expected answers on A/A runs, clear slowdowns and
// speed-ups, and noisy short runs. The gate's verdict and stopping are tested in sequential_test.cpp.
#include "qgate/stats/ab_statistics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

using namespace qgate::stats;
using qgate::Comparison;
using qgate::Verdict;

namespace {

// Simulated ABBA pairs: a drifting machine speed shared by both runs of a pair (what pairing
// cancels), independent log-normal run noise of `sigma`, and arm A at `true_ratio` times arm B.
std::vector<AbPair> simulate(size_t n, double true_ratio, double sigma, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, sigma);
  std::vector<AbPair> pairs;
  for (size_t i = 0; i < n; ++i) {
    const double machine = 400.0 * (1.0 + 0.3 * std::sin(0.7 * static_cast<double>(i)));
    pairs.push_back({machine * true_ratio * std::exp(noise(rng)), machine * std::exp(noise(rng)), false});
  }
  return pairs;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace

TEST(AbStatistics, GeometricMeanIsExactOnConstructedRatios) {
  const std::vector<AbPair> reciprocal = {{2, 1}, {1, 2}};
  EXPECT_EQ(geometric_mean_ratio(reciprocal), 1.0);
  const std::vector<AbPair> four_and_one = {{4, 1}, {3, 3}};
  EXPECT_NEAR(geometric_mean_ratio(four_and_one), 2.0, 1e-15);
  EXPECT_NEAR(estimate_ratio(four_and_one).ratio, 2.0, 1e-15);
}

TEST(AbStatistics, IsNeverARatioOfAverages) {
  // A fast phase (100 vs 10) and a slow one (1 vs 10): averages say 5.05, the pairs say 1.
  const std::vector<AbPair> pairs = {{100, 10}, {1, 10}};
  EXPECT_NEAR(geometric_mean_ratio(pairs), 1.0, 1e-12);
}

TEST(AbStatistics, AaRunIsSame) {
  // A build against itself, 16 pairs with 1% run noise, on 20 machines' worth of seeds: every one
  // comes out SAME under the fixed-sample comparison.
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const RatioEstimate e = estimate_ratio(simulate(16, 1.0, 0.01, 100 + seed));
    EXPECT_NEAR(e.ratio, 1.0, 0.01) << seed;
    EXPECT_EQ(compare(e), Comparison::Same) << seed << ": [" << e.lower << ", " << e.upper << "]";
  }
}

TEST(AbStatistics, IdenticalFiguresAreSame) {
  const std::vector<AbPair> pairs(6, AbPair{250, 250});
  const RatioEstimate e = estimate_ratio(pairs);
  EXPECT_EQ(e.ratio, 1.0);
  EXPECT_EQ(e.lower, 1.0);
  EXPECT_EQ(e.upper, 1.0);
  EXPECT_EQ(e.wilcoxon_p, 1.0);
  EXPECT_EQ(compare(e), Comparison::Same);
}

TEST(AbStatistics, FivePercentSlowdownIsDifferent) {
  const auto pairs = simulate(12, 0.95, 0.003, 21);
  const RatioEstimate e = estimate_ratio(pairs);
  EXPECT_NEAR(e.ratio, 0.95, 0.005);
  EXPECT_LT(e.upper, 0.98);
  EXPECT_LT(e.wilcoxon_p, 0.01);
  EXPECT_EQ(compare(e), Comparison::Different);
}

TEST(AbStatistics, FivePercentSpeedupIsDifferent) {
  const auto pairs = simulate(12, 1.05, 0.003, 31);
  const RatioEstimate e = estimate_ratio(pairs);
  EXPECT_NEAR(e.ratio, 1.05, 0.005);
  EXPECT_GT(e.lower, 1.02);
  EXPECT_EQ(compare(e), Comparison::Different);
}

TEST(AbStatistics, LargeNoiseWithFewPairsIsUnknown) {
  // Four pairs whose ratios swing +-10%: nothing can be said yet.
  const std::vector<AbPair> pairs = {{110, 100}, {85, 100}, {102, 100}, {95, 100}};
  const RatioEstimate e = estimate_ratio(pairs);
  EXPECT_GT(e.halfwidth(), 0.05);
  EXPECT_EQ(compare(e), Comparison::Unknown);
}

TEST(AbStatistics, SmallSamplesAreNoNarrowerThanTheStudentTInterval) {
  // Four pairs within 0.4% of each other around a 1.2% speed-up: the range of the data alone would
  // give [1.010, 1.014]; the t interval (t = 3.18 at 3 degrees of freedom) is wider.
  const std::vector<AbPair> pairs = {{1010, 1000}, {1014, 1000}, {1011, 1000}, {1013, 1000}};
  const RatioEstimate e = estimate_ratio(pairs);
  const double se = e.sd_log_ratio / 2.0;
  EXPECT_LE(e.lower, std::exp(e.mean_log_ratio - 3.18 * se) + 1e-9);
  EXPECT_GE(e.upper, std::exp(e.mean_log_ratio + 3.18 * se) - 1e-9);
  EXPECT_LT(e.lower, 1.0101);
  EXPECT_GT(e.upper, 1.0139);
}

TEST(AbStatistics, BootstrapIsDeterministicForASeed) {
  const auto pairs = simulate(10, 1.0, 0.02, 71);
  BootstrapOptions o;
  o.seed = 1234;
  const RatioEstimate x = estimate_ratio(pairs, o);
  const RatioEstimate y = estimate_ratio(pairs, o);
  EXPECT_EQ(x.lower, y.lower);
  EXPECT_EQ(x.upper, y.upper);
  EXPECT_EQ(x.seed, 1234u);
  EXPECT_EQ(x.resamples, 2000);
  o.seed = 5678;
  const RatioEstimate z = estimate_ratio(pairs, o);
  EXPECT_EQ(z.ratio, x.ratio);  // the point estimate does not depend on the seed
  EXPECT_TRUE(z.lower != x.lower || z.upper != x.upper);
}

TEST(AbStatistics, IntervalCoversTheTrueRatioInSimulation) {
  constexpr int kExperiments = 200;
  constexpr double kTrue = 0.97;
  int covered = 0;
  for (int i = 0; i < kExperiments; ++i) {
    BootstrapOptions o;
    o.seed = 1000 + static_cast<uint64_t>(i);
    const RatioEstimate e = estimate_ratio(simulate(8, kTrue, 0.03, 9000 + static_cast<uint64_t>(i)), o);
    if (e.lower <= kTrue && kTrue <= e.upper) ++covered;
  }
  EXPECT_GE(covered, 180) << covered << " of " << kExperiments;
}

TEST(AbStatistics, WilcoxonIsExactForSmallSamplesAndHandlesTiesAndZeros) {
  // n same-signed distinct differences: only 2 of the 2^n sign patterns are as extreme.
  auto same_signed = [](int n) {
    std::vector<double> d;
    for (int i = 1; i <= n; ++i) d.push_back(0.01 * i);
    return d;
  };
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p(same_signed(4)), 2.0 / 16);  // never significant at 5%
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p(same_signed(6)), 2.0 / 64);
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p(same_signed(10)), 2.0 / 1024);

  // n = 5, one negative difference of rank 1: W+ = 14 of 15; patterns with W+ >= 14 are 2 of 32.
  EXPECT_DOUBLE_EQ(wilcoxon_signed_rank_p(std::vector<double>{-0.01, 0.02, 0.03, 0.04, 0.05}), 2.0 * 2 / 32);

  // Beyond the exact range, the normal approximation: W+ = n(n+1)/2 with continuity correction.
  const std::vector<double> many = same_signed(70);
  const double mean = 70.0 * 71 / 4, var = 70.0 * 71 * 141 / 24;
  const double z = (70.0 * 71 / 2 - mean - 0.5) / std::sqrt(var);
  EXPECT_NEAR(wilcoxon_signed_rank_p(many), std::erfc(z / std::sqrt(2.0)), 1e-15);

  // Symmetric with ties and zeros: no evidence either way.
  const std::vector<double> symmetric = {0.0, 0.0, 0.02, -0.02, 0.05, -0.05};
  EXPECT_EQ(wilcoxon_signed_rank_p(symmetric), 1.0);
  const std::vector<double> zeros = {0.0, 0.0, 0.0};
  EXPECT_EQ(wilcoxon_signed_rank_p(zeros), 1.0);
  EXPECT_EQ(wilcoxon_signed_rank_p({}), 1.0);

  // Ties: {+a, +a, -b} with b > a has average ranks 1.5, 1.5, 3; W+ = 3 (doubled: 6 of 12). Doubled
  // sums over the 8 patterns: 0, 3, 3, 6, 6, 9, 9, 12, so P(W+ <= 3) = 4/8 and p = 1.
  EXPECT_EQ(wilcoxon_signed_rank_p(std::vector<double>{0.01, 0.01, -0.02}), 1.0);
}

TEST(AbStatistics, AFewAgreeingPairsAreNotEnoughToCallADifference) {
  // Four pairs, each 10% apart with little spread: the t interval alone would exclude 1, but the
  // exact rank test's smallest p with 4 pairs is 0.125, so the comparison stays UNKNOWN.
  std::vector<AbPair> four = {{1.10, 1.0}, {1.12, 1.0}, {1.09, 1.0}, {1.11, 1.0}};
  const RatioEstimate e4 = estimate_ratio(four);
  EXPECT_GT(e4.lower, 1.01);
  EXPECT_EQ(compare(e4), Comparison::Unknown);
  // Six such pairs agree with the interval (p = 1/32): now it is a difference.
  four.push_back({1.10, 1.0});
  four.push_back({1.13, 1.0});
  const RatioEstimate e6 = estimate_ratio(four);
  EXPECT_LT(e6.wilcoxon_p, 0.05);
  EXPECT_EQ(compare(e6), Comparison::Different);
}

TEST(AbStatistics, CountsContentionMismatches) {
  auto pairs = simulate(8, 1.0, 0.01, 81);
  pairs[2].contention_mismatch = true;
  pairs[5].contention_mismatch = true;
  const RatioEstimate e = estimate_ratio(pairs);
  EXPECT_EQ(e.contention_mismatches, 2u);
}

TEST(AbStatistics, OnePairGivesAnUnboundedInterval) {
  const std::vector<AbPair> one = {{100, 50}};
  const RatioEstimate e = estimate_ratio(one);
  EXPECT_NEAR(e.ratio, 2.0, 1e-12);
  EXPECT_EQ(e.lower, 0.0);
  EXPECT_TRUE(std::isinf(e.upper));
  EXPECT_EQ(compare(e), Comparison::Unknown);
}

TEST(AbStatistics, RefusesBadInputWithAReason) {
  EXPECT_THROW(estimate_ratio({}), std::invalid_argument);
  EXPECT_THROW(geometric_mean_ratio({}), std::invalid_argument);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (const AbPair& bad : {AbPair{0, 1}, AbPair{1, 0}, AbPair{-5, 1}, AbPair{1, -5}, AbPair{nan, 1},
                            AbPair{1, inf}}) {
    const std::vector<AbPair> pairs = {{1, 1}, bad};
    try {
      estimate_ratio(pairs);
      ADD_FAILURE() << "accepted a=" << bad.a << " b=" << bad.b;
    } catch (const std::invalid_argument& e) {
      EXPECT_TRUE(contains(e.what(), "pair 1")) << e.what();
      EXPECT_TRUE(contains(e.what(), "finite and positive")) << e.what();
    }
  }
  const std::vector<AbPair> ok = {{1, 1}, {2, 2}};
  BootstrapOptions o;
  o.resamples = 0;
  EXPECT_THROW(estimate_ratio(ok, o), std::invalid_argument);
  o = {};
  o.confidence = 1.0;
  EXPECT_THROW(estimate_ratio(ok, o), std::invalid_argument);
}

TEST(AbStatistics, SameBandTightensWithPairs) {
  const ComparisonBands b;
  EXPECT_DOUBLE_EQ(b.same_band(4), 0.05);
  EXPECT_DOUBLE_EQ(b.same_band(25), 0.02);
  EXPECT_DOUBLE_EQ(b.same_band(400), 0.01);  // never below the noise band

  RatioEstimate e;
  e.ratio = 1.0;
  e.lower = 0.97;
  e.upper = 1.03;
  e.pairs = 4;
  EXPECT_EQ(compare(e), Comparison::Same);  // within +-5% at 4 pairs
  e.pairs = 25;
  EXPECT_EQ(compare(e), Comparison::Unknown);  // not within +-2% at 25 pairs
  e.lower = 1.015;
  e.upper = 1.03;
  e.wilcoxon_p = 0.2;
  EXPECT_EQ(compare(e), Comparison::Unknown);  // clear of the 1% noise band, but the rank test disagrees
  e.wilcoxon_p = 0.001;
  EXPECT_EQ(compare(e), Comparison::Different);  // clear of the band, and the rank test agrees
}

TEST(GeometricMean, OfArmFigures) {
  const std::vector<double> v = {2.0, 8.0};
  EXPECT_DOUBLE_EQ(qgate::stats::geometric_mean(v), 4.0);
  EXPECT_EQ(qgate::stats::geometric_mean(std::vector<double>{}), 0.0);
  EXPECT_THROW(qgate::stats::geometric_mean(std::vector<double>{1.0, -1.0}), std::invalid_argument);
}
