// The group-sequential A/B gate: pairs are judged only at planned looks (pair counts), each look's
// interval is a repeated confidence interval whose width comes from a Lan-DeMets spending function of
// the O'Brien-Fleming type, and the verdict (PASS / FAIL / INCONCLUSIVE), the comparison (SAME /
// DIFFERENT / UNKNOWN) and the decision to stop are all read from that one interval. Because repeated
// confidence intervals cover the true ratio at every look at once, a claim read at whichever look
// the procedure stops at keeps its error rate, whatever made it stop. docs/ab-statistics.md has the
// design and its references; stats/tests/sequential_simulation_test.cpp checks the rates.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "qgate/stats/ab_statistics.h"

namespace qgate::stats {

/// Fraction of the pair log-ratios trimmed from each end before the mean (Yuen's trimmed mean). A
/// co-tenant that halves one run in ten moves about one pair in five by log 2; trimming a fifth of each
/// end keeps those pairs from swamping both the estimate and its standard error.
inline constexpr double kDefaultTrim = 0.2;

/// Autocovariance lags in the standard error (Newey-West, Bartlett weights 1 - k / (lags + 1)). In
/// ABBA order pair i's second run sits next to pair i + 1's first, so noise that persists from one run
/// to the next (clocks, temperature, a co-tenant's phase) correlates consecutive log-ratios; an SE
/// that assumed independent pairs would be too small. 0 is Yuen's SE for independent pairs.
inline constexpr int kAutocovarianceLags = 1;

/// Each look's boundary is read from t on df_scale * (h - 1) degrees of freedom (h kept pairs), not
/// h - 1: the trimmed mean over its autocorrelation-robust SE has heavier tails than t on h - 1, and
/// this constant, fitted by simulation, holds the rates at the nominal level under white, heavy-tailed,
/// serially correlated, outlying, bursty and drifting run noise (docs/ab-statistics.md).
inline constexpr double kEffectiveDfScale = 0.45;

/// The one-sided error rate per side: false PASS at a true ratio of exactly 1 - threshold, and
/// false FAIL there, are each at most this. The interval is the two-sided 1 - 2 * alpha one.
inline constexpr double kDefaultSideAlpha = 0.025;

/// Lan-DeMets O'Brien-Fleming-type spending of a one-sided level `alpha` at information fraction t
/// in (0, 1]: 2 - 2 Phi(z_{1 - alpha / 2} / sqrt(t)). Increasing, and equal to alpha at t = 1.
double obf_spending(double t, double alpha);

/// The planned looks and their boundaries, computed once from the policy.
struct SequentialDesign {
  std::vector<int> looks;            // pair counts at which the pairs are judged; the last is the budget
  std::vector<double> spent;         // cumulative one-sided alpha spent up to each look
  std::vector<double> z_bound;       // boundary on the standard normal scale (+inf: cannot stop there)
  std::vector<double> nominal_p;     // one-sided nominal level of each look, 1 - Phi(z_bound)
  std::vector<int> trimmed;          // pairs trimmed from each end at each look
  std::vector<double> df;            // effective degrees of freedom of the trimmed t at each look
  std::vector<double> t_bound;       // the boundary mapped to that t distribution (same nominal level)
  double alpha = kDefaultSideAlpha;  // per side
  double trim = kDefaultTrim;
  int autocovariance_lags = kAutocovarianceLags;  // lags in the SE (0: independent pairs)
  double df_scale = kEffectiveDfScale;            // df = df_scale * (kept pairs - 1)
  double slowdown_threshold = 0.02;  // FAIL below 1 - threshold, PASS shown above it
  double equivalence_band = 0.01;    // SAME inside (1 - band, 1 + band); min(noise band, threshold)
  double target_halfwidth = 0.01;    // stop once the interval is this precise

  /// Looks at max_pairs, max_pairs / 2, max_pairs / 4, ... (rounded up) down to the smallest that is
  /// still at least min_pairs: 4, 8, 16, 32, 64 for 4..64; 5, 10, 20, 40 for the default 4..40.
  /// Throws std::invalid_argument on a policy that makes no sense.
  static SequentialDesign from_policy(const GatePolicy& policy, double alpha = kDefaultSideAlpha,
                                      double trim = kDefaultTrim);
  /// Recompute df and t_bound for another standard error: `lags` autocovariance lags and effective df
  /// df_scale * (h - 1). from_policy uses the defaults; other settings are for comparing statistics.
  /// Throws std::invalid_argument on lags < 0 or df_scale <= 0.
  void set_statistic(int lags, double df_scale);
  /// The planned looks for a budget, as above.
  static std::vector<int> plan_looks(int min_pairs, int max_pairs);
  size_t last_look() const { return looks.size() - 1; }
};

/// The trimmed mean of log-ratios with its repeated confidence interval at one look (log scale).
struct LookInterval {
  size_t pairs = 0;
  int trimmed = 0;            // pairs dropped from each end
  double estimate = 0;        // trimmed mean of log(a / b)
  double standard_error = 0;  // Yuen's winsorised variance with the lag autocovariances, over the kept pairs
  double df = 0;
  double t_bound = 0;         // the look's boundary on the t scale
  double lower = 0;           // log scale; -inf / +inf when the look cannot decide
  double upper = 0;
};

/// The interval for pairs at look `look_index`. `pairs` must hold exactly design.looks[look_index]
/// pairs. Throws std::invalid_argument otherwise or on a non-finite or non-positive figure.
LookInterval look_interval(std::span<const AbPair> pairs, const SequentialDesign& design, size_t look_index);

enum class LookDecision { continue_adding, stop };
std::string_view to_string(LookDecision d);  // "continue", "stop"

/// Everything a look says. The verdict and the comparison are both read from [lower, upper]:
///  - FAIL when upper < 1 - threshold; PASS when lower > 1 - threshold; INCONCLUSIVE otherwise.
///  - SAME (two one-sided tests, each at alpha) when the interval lies inside
///    (1 - band, 1 + band); DIFFERENT when it lies wholly outside [1 - band, 1 + band];
///    UNKNOWN otherwise.
/// With band <= threshold, FAIL implies DIFFERENT and SAME implies PASS, so the two never disagree.
/// Stop at the last look; or when the verdict is PASS or FAIL and the comparison is SAME or
/// DIFFERENT; or when the interval's half-width is at most target_halfwidth (more pairs would not
/// change the answer much); else continue to the next look.
struct LookResult {
  LookDecision decision = LookDecision::continue_adding;
  Verdict verdict = Verdict::Inconclusive;
  Comparison comparison = Comparison::Unknown;
  std::vector<std::string> reasons;  // the first says why the verdict is what it is, the second the comparison
  size_t look_index = 0;
  size_t pairs = 0;
  size_t contention_mismatches = 0;
  double ratio = 1;  // exp(trimmed mean log-ratio); > 1 means A is faster
  double lower = 0;  // interval ends on the ratio scale (0 and +inf when the look cannot decide)
  double upper = 0;
  LookInterval interval;

  double halfwidth() const;  // half the interval's width on the ratio scale (+inf when unbounded)
};

/// Judge the pairs at look `look_index` and explain it (see LookResult): judge_look, then
/// explain_look. `pairs` must hold exactly design.looks[look_index] pairs.
LookResult evaluate_look(std::span<const AbPair> pairs, const SequentialDesign& design, size_t look_index);
/// The numbers, verdict, comparison and decision of a look, without the sentences.
LookResult judge_look(std::span<const AbPair> pairs, const SequentialDesign& design, size_t look_index);
/// Fills r.reasons from what judge_look decided.
void explain_look(LookResult& r, const SequentialDesign& design);

/// One-sided boundaries on the standard normal scale for looks at information fractions
/// `fractions` (increasing, the last 1) under Lan-DeMets O'Brien-Fleming-type spending of `alpha`:
/// the k-th is crossed first at look k with probability spent_k - spent_{k-1} when there is no
/// effect. +inf where a look spends too little to stop at.
std::vector<double> obf_boundaries(std::span<const double> fractions, double alpha);

/// The comparison alone, from an interval on the ratio scale and the band (the rule above).
Comparison equivalence_comparison(double lower, double upper, double band);

}  // namespace qgate::stats
