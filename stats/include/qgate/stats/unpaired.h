// Unpaired statistics for comparing two sets of runs that were not measured side by side (runs of two
// builds from different jobs): Welch's t interval on the difference of means, the Mann-Whitney rank-sum
// test, and both applied to log tok/s to give a ratio of geometric means with its interval.
//
// Pairs exist only inside one job (docs/measurement.md, "A/B"); across jobs nothing pairs run i of one build
// with run i of another, so these tests treat each side as an independent sample.
#pragma once

#include <cstddef>
#include <span>

namespace qgate::stats {

/// The Student t distribution's CDF at `t` with `df` (> 0, may be fractional) degrees of freedom.
double student_t_cdf(double t, double df);
/// Its quantile: the t with student_t_cdf(t, df) == p, for p in (0, 1). Throws std::invalid_argument
/// on p outside (0, 1) or df <= 0.
double student_t_quantile(double p, double df);

/// Welch's interval for mean(a) - mean(b) without assuming equal variances; the degrees of freedom are
/// Welch-Satterthwaite's.
struct WelchInterval {
  size_t n_a = 0;
  size_t n_b = 0;
  double mean_a = 0;
  double mean_b = 0;
  double sd_a = 0;  // sample standard deviations (n - 1)
  double sd_b = 0;
  double difference = 0;  // mean_a - mean_b
  double standard_error = 0;
  double df = 0;
  double lower = 0;
  double upper = 0;
  double confidence = 0.95;
};

/// Throws std::invalid_argument with fewer than 2 values on a side, a non-finite value, or confidence
/// outside (0, 1). Both sides without spread give the point interval [difference, difference].
WelchInterval welch_interval(std::span<const double> a, std::span<const double> b, double confidence = 0.95);

/// The Mann-Whitney (Wilcoxon rank-sum) test of "a and b come from one distribution", two-sided.
struct MannWhitney {
  size_t n_a = 0;
  size_t n_b = 0;
  double u_a = 0;  // pairs (x in a, y in b) with x > y, ties counted one half
  double p = 1;    // two-sided
  bool exact = false;
};

/// Exact (the permutation distribution of the rank sum) when there are no ties and each side has at
/// most kExactMannWhitneyMaxN values; otherwise the normal approximation with the tie and continuity
/// corrections. Throws std::invalid_argument on an empty side or a non-finite value.
inline constexpr size_t kExactMannWhitneyMaxN = 50;
MannWhitney mann_whitney(std::span<const double> a, std::span<const double> b);

/// A/B of two independent samples of a higher-is-better positive figure (tok/s), on the log scale:
/// the ratio of geometric means exp(mean log a - mean log b) with Welch's interval carried back to the
/// ratio scale, and the Mann-Whitney p-value of the logs (the same as of the figures: ranks do not
/// change under log).
struct UnpairedRatio {
  size_t n_a = 0;
  size_t n_b = 0;
  double geomean_a = 0;
  double geomean_b = 0;
  double ratio = 1;  // geomean_a / geomean_b; > 1 means A is faster
  double lower = 0;  // Welch interval on the ratio scale
  double upper = 0;
  double confidence = 0.95;
  double df = 0;  // Welch-Satterthwaite degrees of freedom
  double sd_log_a = 0;
  double sd_log_b = 0;
  double mann_whitney_p = 1;
  bool mann_whitney_exact = false;
  double welch_p = 1;  // two-sided p of Welch's t for "the ratio is 1" (0 when neither side has spread)
};

/// Throws std::invalid_argument with fewer than 2 figures on a side or a non-finite or non-positive one.
UnpairedRatio estimate_unpaired_ratio(std::span<const double> a, std::span<const double> b, double confidence = 0.95);

}  // namespace qgate::stats
