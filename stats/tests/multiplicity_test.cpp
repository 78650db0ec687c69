// Holm's step-down procedure: a worked example, its edge cases, and a seeded simulation of 20 series
// compared at once, where Holm holds the chance of any false DIFFERENT at alpha and unadjusted tests do
// not; Benjamini-Hochberg's step-up procedure and its adjusted p-values, worked and simulated; and the job as the unit of `qgate compare` under job-to-job noise, simulated end to end through
// the unpaired statistics.
#include "qgate/stats/multiplicity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "qgate/stats/unpaired.h"

using namespace qgate::stats;

namespace {

TEST(Holm, StepsDownUntilTheFirstPValueAboveItsBound) {
  // Sorted: 0.005 <= 0.05/4, 0.01 <= 0.05/3, 0.03 > 0.05/2: the last two stay, 0.04 with it.
  EXPECT_EQ(holm_rejections(std::vector<double>{0.01, 0.04, 0.03, 0.005}, 0.05),
            (std::vector<bool>{true, false, false, true}));
  // Every p under its bound: all rejected, and one p alone is compared with alpha itself.
  EXPECT_EQ(holm_rejections(std::vector<double>{0.001, 0.02}, 0.05), (std::vector<bool>{true, true}));
  EXPECT_EQ(holm_rejections(std::vector<double>{0.049}, 0.05), (std::vector<bool>{true}));
  EXPECT_EQ(holm_rejections(std::vector<double>{0.051}, 0.05), (std::vector<bool>{false}));
  EXPECT_TRUE(holm_rejections(std::vector<double>{}, 0.05).empty());
  EXPECT_THROW(holm_rejections(std::vector<double>{0.5}, 0.0), std::invalid_argument);
  EXPECT_THROW(holm_rejections(std::vector<double>{1.5}, 0.05), std::invalid_argument);
  EXPECT_THROW(holm_rejections(std::vector<double>{std::nan("")}, 0.05), std::invalid_argument);
}

TEST(Holm, TwentySeriesAtOnceKeepTheFamilyWiseRateAtAlpha) {
  // 20 series with no true difference: p-values uniform. Unadjusted, some series reads DIFFERENT in
  // 1 - 0.95^20 = 64% of families; Holm keeps it at or under 5%.
  std::mt19937_64 rng(20261205);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const int families = 20000;
  int any_holm = 0, any_unadjusted = 0;
  for (int f = 0; f < families; ++f) {
    std::vector<double> p(20);
    for (double& x : p) x = uniform(rng);
    bool holm = false, unadjusted = false;
    for (bool r : holm_rejections(p, 0.05)) holm = holm || r;
    for (double x : p) unadjusted = unadjusted || x <= 0.05;
    any_holm += holm;
    any_unadjusted += unadjusted;
  }
  const double rate = double(any_holm) / families;
  const double monte_carlo = 3 * std::sqrt(0.05 * 0.95 / families);
  EXPECT_LE(rate, 0.05 + monte_carlo) << rate;
  EXPECT_GT(rate, 0.05 - 2 * monte_carlo) << "Holm is not far more conservative than Bonferroni here: " << rate;
  EXPECT_NEAR(double(any_unadjusted) / families, 1 - std::pow(0.95, 20), 0.02);
}

TEST(BenjaminiHochberg, StepsUpFromTheLargestPValueUnderItsBound) {
  // m = 5, q = 0.05: bounds 0.01, 0.02, 0.03, 0.04, 0.05 for the sorted 0.001, 0.025, 0.028, 0.2, 0.5.
  // 0.025 > 0.02 but 0.028 <= 0.03, so the step-up rejects the first three (Holm would stop at 0.025).
  const std::vector<double> p{0.2, 0.028, 0.001, 0.5, 0.025};
  EXPECT_EQ(benjamini_hochberg_rejections(p, 0.05), (std::vector<bool>{false, true, true, false, true}));
  EXPECT_EQ(holm_rejections(p, 0.05), (std::vector<bool>{false, false, true, false, false}));
  // Adjusted: m p_(k) / k, then the running minimum from the top: 0.005, 0.04667, 0.04667, 0.25, 0.5.
  const std::vector<double> adjusted = benjamini_hochberg_adjusted(p);
  ASSERT_EQ(adjusted.size(), p.size());
  EXPECT_NEAR(adjusted[0], 0.25, 1e-12);
  EXPECT_NEAR(adjusted[1], 5 * 0.028 / 3, 1e-12);
  EXPECT_NEAR(adjusted[2], 0.005, 1e-12);
  EXPECT_NEAR(adjusted[3], 0.5, 1e-12);
  EXPECT_NEAR(adjusted[4], 5 * 0.028 / 3, 1e-12);  // the minimum over j >= k reaches down to it
  // Rejected at q exactly when the adjusted p-value is at most q.
  for (double q : {0.001, 0.005, 0.03, 0.047, 0.3, 0.6}) {
    const std::vector<bool> rejected = benjamini_hochberg_rejections(p, q);
    for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(rejected[i], adjusted[i] <= q) << "q " << q << ", p " << p[i];
  }
  // Capped at 1, empty input, one p alone compared with q, and refusals.
  EXPECT_EQ(benjamini_hochberg_adjusted(std::vector<double>{0.9, 0.95})[0], 0.95);
  EXPECT_TRUE(benjamini_hochberg_adjusted(std::vector<double>{}).empty());
  EXPECT_EQ(benjamini_hochberg_rejections(std::vector<double>{0.05}, 0.05), (std::vector<bool>{true}));
  EXPECT_EQ(benjamini_hochberg_rejections(std::vector<double>{0.051}, 0.05), (std::vector<bool>{false}));
  EXPECT_THROW(benjamini_hochberg_rejections(std::vector<double>{0.5}, 1.0), std::invalid_argument);
  EXPECT_THROW(benjamini_hochberg_adjusted(std::vector<double>{-0.1}), std::invalid_argument);
}

TEST(BenjaminiHochberg, HoldsTheFalseDiscoveryRateAndTheFamilyWiseRateWhenNothingIsReal) {
  // 20 tests. With none real, any rejection is false: BH's family-wise rate is q (0.05) itself. With 5
  // real ones (p from a strong signal), the share of false rejections among the rejections averages at
  // most q m0 / m = 0.0375, while BH rejects more of the real ones than Holm.
  std::mt19937_64 rng(20261206);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const int families = 20000;
  int any_null_family = 0;
  double false_share_sum = 0;
  long real_bh = 0, real_holm = 0;
  for (int f = 0; f < families; ++f) {
    std::vector<double> p(20);
    for (double& x : p) x = uniform(rng);
    for (bool r : benjamini_hochberg_rejections(p, 0.05))
      if (r) {
        ++any_null_family;
        break;
      }
    for (int i = 0; i < 5; ++i) p[i] = std::pow(uniform(rng), 8.0) * 0.05;  // real: small p-values
    const std::vector<bool> bh = benjamini_hochberg_rejections(p, 0.05), holm = holm_rejections(p, 0.05);
    int rejected = 0, false_rejected = 0;
    for (int i = 0; i < 20; ++i) {
      rejected += bh[i];
      false_rejected += bh[i] && i >= 5;
      if (i < 5) {
        real_bh += bh[i];
        real_holm += holm[i];
      }
    }
    if (rejected > 0) false_share_sum += double(false_rejected) / rejected;
  }
  const double null_rate = double(any_null_family) / families, fdr = false_share_sum / families;
  EXPECT_LE(null_rate, 0.05 + 3 * std::sqrt(0.05 * 0.95 / families)) << null_rate;
  EXPECT_GT(null_rate, 0.04) << "BH is exact at q when nothing is real: " << null_rate;
  EXPECT_LE(fdr, 0.0375 + 0.003) << fdr;
  EXPECT_GT(real_bh, real_holm);
}

// One side of an A/A compare: `jobs` jobs of `runs` runs, each job off by its own factor (job-to-job
// noise, CV `job_cv`) and each run by run noise (CV `run_cv`). Returns the runs and the jobs' geometric means.
struct Side {
  std::vector<double> runs, units;
};
Side simulate_side(int jobs, int runs, double job_cv, double run_cv, std::mt19937_64& rng) {
  std::normal_distribution<double> job_noise(0.0, job_cv), run_noise(0.0, run_cv);
  Side side;
  for (int j = 0; j < jobs; ++j) {
    const double job_effect = job_noise(rng);
    double log_sum = 0;
    for (int r = 0; r < runs; ++r) {
      const double x = 400.0 * std::exp(job_effect + run_noise(rng));
      side.runs.push_back(x);
      log_sum += std::log(x);
    }
    side.units.push_back(std::exp(log_sum / runs));
  }
  return side;
}

bool reads_different(const UnpairedRatio& r) { return (r.lower > 1 || r.upper < 1) && r.welch_p < 0.05; }

// The same reading on Welch's interval of the logs alone (what reads_different comes to), without the
// rank test that estimate_unpaired_ratio also runs: cheap enough for thousands of 40-run samples.
bool runs_read_different(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> la, lb;
  for (double x : a) la.push_back(std::log(x));
  for (double x : b) lb.push_back(std::log(x));
  const WelchInterval w = welch_interval(la, lb);
  return w.lower > 0 || w.upper < 0;
}

TEST(JobsAsUnits, AnAaCompareHoldsItsFalseDifferentRateUnderJobToJobNoise) {
  // A 1% job effect on top of 1% run noise, 8 runs a job. Judged on runs, the same build reads
  // DIFFERENT far more often than 5%: the runs of a job are not independent. Judged on job means, at
  // 3 and at 5 jobs a side, the rate is within Monte Carlo error of 5%.
  std::mt19937_64 rng(42);
  const int trials = 4000;
  const double monte_carlo = 3 * std::sqrt(0.05 * 0.95 / trials);
  for (int jobs : {3, 5}) {
    int on_runs = 0, on_units = 0;
    for (int t = 0; t < trials; ++t) {
      const Side a = simulate_side(jobs, 8, 0.01, 0.01, rng), b = simulate_side(jobs, 8, 0.01, 0.01, rng);
      on_runs += runs_read_different(a.runs, b.runs);
      on_units += reads_different(estimate_unpaired_ratio(a.units, b.units));
    }
    const double run_rate = double(on_runs) / trials, unit_rate = double(on_units) / trials;
    EXPECT_GT(run_rate, 0.15) << jobs << " jobs: runs treated as independent";
    EXPECT_LE(unit_rate, 0.05 + monte_carlo) << jobs << " jobs a side";
    std::printf("A/A, %d jobs a side, 1%% job + 1%% run noise: false DIFFERENT on runs %.1f%%, on jobs %.1f%%\n", jobs,
                100 * run_rate, 100 * unit_rate);
  }
}

TEST(JobsAsUnits, ATrueThreePercentDifferenceIsFoundAtFiveJobsASide) {
  std::mt19937_64 rng(7);
  const int trials = 2000;
  int found = 0;
  for (int t = 0; t < trials; ++t) {
    Side a = simulate_side(5, 8, 0.01, 0.01, rng);
    const Side b = simulate_side(5, 8, 0.01, 0.01, rng);
    for (double& u : a.units) u *= 1.03;
    found += reads_different(estimate_unpaired_ratio(a.units, b.units));
  }
  const double power = double(found) / trials;
  std::printf("A 3%% difference, 5 jobs a side: read DIFFERENT in %.1f%%\n", 100 * power);
  EXPECT_GT(power, 0.8);
}

}  // namespace
