// Unpaired statistics against published values (Student t tables, R's t.test and wilcox.test on the
// `sleep` data), exact small cases of the Mann-Whitney distribution, and seeded simulations of the
// interval's coverage and the rank test's false-positive rate.
#include "qgate/stats/unpaired.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

using namespace qgate::stats;

namespace {

// R's `sleep` data set: extra hours of sleep under two drugs.
const std::vector<double> kSleep1 = {0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0};
const std::vector<double> kSleep2 = {1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4};

std::vector<double> lognormal(size_t n, double median, double sigma, std::mt19937_64& rng) {
  std::normal_distribution<double> noise(0.0, sigma);
  std::vector<double> out;
  for (size_t i = 0; i < n; ++i) out.push_back(median * std::exp(noise(rng)));
  return out;
}

}  // namespace

TEST(StudentT, QuantilesMatchTables) {
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.706204736, 1e-6);
  EXPECT_NEAR(student_t_quantile(0.975, 2), 4.302652730, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.975, 10), 2.228138852, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.975, 30), 2.042272456, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.95, 5), 2.015048373, 1e-7);
  EXPECT_NEAR(student_t_quantile(0.975, 1e7), 1.959964, 1e-5);
  EXPECT_NEAR(student_t_quantile(0.025, 10), -2.228138852, 1e-7);
  EXPECT_EQ(student_t_quantile(0.5, 3.3), 0.0);
}

TEST(StudentT, CdfInvertsTheQuantileAtFractionalDegreesOfFreedom) {
  for (double df : {1.3, 2.7, 4.5, 17.776, 120.25})
    for (double p : {0.6, 0.9, 0.975, 0.999}) EXPECT_NEAR(student_t_cdf(student_t_quantile(p, df), df), p, 1e-10);
  EXPECT_DOUBLE_EQ(student_t_cdf(0, 7), 0.5);
  // df = 1 is the Cauchy distribution: CDF(t) = 1/2 + atan(t) / pi.
  EXPECT_NEAR(student_t_cdf(3.0, 1), 0.5 + std::atan(3.0) / M_PI, 1e-12);
}

TEST(StudentT, RefusesBadArguments) {
  EXPECT_THROW(student_t_quantile(0, 5), std::invalid_argument);
  EXPECT_THROW(student_t_quantile(1, 5), std::invalid_argument);
  EXPECT_THROW(student_t_quantile(0.9, 0), std::invalid_argument);
  EXPECT_THROW(student_t_cdf(1, -1), std::invalid_argument);
}

TEST(Welch, MatchesRsTTestOnTheSleepData) {
  // R: t.test(extra ~ group, data = sleep) -> t = -1.8608, df = 17.776,
  //    95 percent confidence interval: -3.3654832  0.2054832
  const WelchInterval w = welch_interval(kSleep1, kSleep2);
  EXPECT_NEAR(w.difference, -1.58, 1e-12);
  EXPECT_NEAR(w.df, 17.776, 5e-4);
  EXPECT_NEAR(w.difference / w.standard_error, -1.8608, 5e-5);
  EXPECT_NEAR(w.lower, -3.3654832, 1e-6);
  EXPECT_NEAR(w.upper, 0.2054832, 1e-6);
  EXPECT_EQ(w.n_a, 10u);
  EXPECT_EQ(w.n_b, 10u);
}

TEST(Welch, NoSpreadGivesAPointAndTooFewValuesAreRefused) {
  const std::vector<double> a = {2, 2, 2}, b = {1, 1};
  const WelchInterval w = welch_interval(a, b);
  EXPECT_EQ(w.lower, 1.0);
  EXPECT_EQ(w.upper, 1.0);
  const std::vector<double> one = {1};
  EXPECT_THROW(welch_interval(one, b), std::invalid_argument);
  const std::vector<double> bad = {1, NAN};
  EXPECT_THROW(welch_interval(a, bad), std::invalid_argument);
}

TEST(MannWhitney, MatchesRsWilcoxTestWithTies) {
  // R: wilcox.test(extra ~ group, data = sleep) -> W = 25.5, p-value = 0.06933 (normal, with ties)
  const MannWhitney m = mann_whitney(kSleep1, kSleep2);
  EXPECT_DOUBLE_EQ(m.u_a, 25.5);
  EXPECT_FALSE(m.exact);
  EXPECT_NEAR(m.p, 0.06933, 5e-6);
}

TEST(MannWhitney, ExactOnSmallSamplesWithoutTies) {
  // Complete separation: one arrangement of C(6,3) = 20 (resp. C(8,4) = 70) on each side.
  const std::vector<double> a3 = {1, 2, 3}, b3 = {4, 5, 6};
  MannWhitney m = mann_whitney(a3, b3);
  EXPECT_TRUE(m.exact);
  EXPECT_EQ(m.u_a, 0);
  EXPECT_NEAR(m.p, 2.0 / 20, 1e-15);
  const std::vector<double> a4 = {5, 6, 7, 8}, b4 = {1, 2, 3, 4};
  m = mann_whitney(a4, b4);
  EXPECT_EQ(m.u_a, 16);
  EXPECT_NEAR(m.p, 2.0 / 70, 1e-15);
  // Interleaved: U = n_a n_b / 2 is the centre, p = 1.
  const std::vector<double> x = {1, 4, 5, 8}, y = {2, 3, 6, 7};
  EXPECT_NEAR(mann_whitney(x, y).p, 1.0, 1e-15);
  // n = 5 and 4, U = 4: the arrangements with U <= 4 are the partitions of 0..4 into at most 5 parts of at
  // most 4, 1 + 1 + 2 + 3 + 5 = 12 of C(9, 4) = 126; two-sided p = 24/126.
  const std::vector<double> r5 = {1.1, 2.2, 3.3, 4.4, 9.9}, r4 = {5.5, 6.6, 7.7, 8.8};
  m = mann_whitney(r5, r4);
  EXPECT_EQ(m.u_a, 4);
  EXPECT_NEAR(m.p, 24.0 / 126, 1e-12);
}

TEST(MannWhitney, ExactAndNormalAgreeOnModerateSamples) {
  std::mt19937_64 rng(7);
  const auto a = lognormal(30, 100, 0.05, rng), b = lognormal(30, 97, 0.05, rng);
  const MannWhitney exact = mann_whitney(a, b);
  ASSERT_TRUE(exact.exact);
  std::vector<double> a_tied = a;
  a_tied.push_back(b.front());  // one tie forces the normal approximation
  const MannWhitney normal = mann_whitney(a_tied, b);
  EXPECT_FALSE(normal.exact);
  EXPECT_NEAR(exact.p, normal.p, 0.02);
}

TEST(UnpairedRatio, EstimatesAKnownFivePercentDifference) {
  std::mt19937_64 rng(42);
  const auto a = lognormal(20, 420.0, 0.02, rng), b = lognormal(20, 400.0, 0.02, rng);
  const UnpairedRatio r = estimate_unpaired_ratio(a, b);
  EXPECT_NEAR(r.ratio, 1.05, 0.015);
  EXPECT_LT(r.lower, 1.05);
  EXPECT_GT(r.upper, 1.05);
  EXPECT_GT(r.lower, 1.0);
  EXPECT_LT(r.mann_whitney_p, 0.001);
  EXPECT_NEAR(r.geomean_a / r.geomean_b, r.ratio, 1e-12);
  EXPECT_THROW(estimate_unpaired_ratio(std::vector<double>{1, 0}, b), std::invalid_argument);
}

TEST(UnpairedRatio, IntervalCoversAtNominalAndTheRankTestHoldsItsLevel) {
  // 4,000 seeded A/A-like trials with unequal spreads and sizes: the 95% Welch interval covers the true
  // ratio ~95% of the time, and the rank test rejects at most ~5%.
  std::mt19937_64 rng(2026);
  int covered = 0, rejected = 0;
  constexpr int kTrials = 4000;
  for (int i = 0; i < kTrials; ++i) {
    const auto a = lognormal(8, 103.0, 0.03, rng), b = lognormal(12, 100.0, 0.01, rng);
    const UnpairedRatio r = estimate_unpaired_ratio(a, b);
    covered += (r.lower <= 1.03 && 1.03 <= r.upper) ? 1 : 0;
    const auto c = lognormal(8, 100.0, 0.03, rng), d = lognormal(12, 100.0, 0.03, rng);
    rejected += estimate_unpaired_ratio(c, d).mann_whitney_p < 0.05 ? 1 : 0;
  }
  const double coverage = double(covered) / kTrials, false_positive = double(rejected) / kTrials;
  EXPECT_GT(coverage, 0.935);
  EXPECT_LT(coverage, 0.965);
  EXPECT_LT(false_positive, 0.06);
  EXPECT_GT(false_positive, 0.03);
}
