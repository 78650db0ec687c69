// Paired A/B statistics for interleaved ABBA runs: the per-pair ratio estimate with its bootstrap
// interval and Wilcoxon p-value, the three-valued comparison (Chromium Pinpoint's SAME / DIFFERENT /
// UNKNOWN) of a fixed set of pairs, and the gate's verdict values and policy. The gate itself, which
// adds pairs and judges them at planned looks, is in sequential.h.
//
// The figure is higher-is-better (tok/s). Each pair holds one run of arm A and the adjacent run of
// arm B, so drift and co-tenant phases hit both alike; the statistic is therefore computed per pair
// (a/b) and never as a ratio of averages, which would let one slow phase dominate both arms unequally.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qgate/common/verdicts.h"

namespace qgate::stats {

/// One adjacent pair of runs. `a` and `b` must be finite and positive.
struct AbPair {
  double a = 0;  // arm A's figure (the candidate in a gate)
  double b = 0;  // arm B's figure (the baseline in a gate)
  /// Set when the sampler saw different co-tenant load on the two runs of the pair; such pairs are
  /// kept (ABBA already spreads load over both arms) but counted so the report can say so.
  bool contention_mismatch = false;
};

struct BootstrapOptions {
  uint64_t seed = 0x9e3779b97f4a7c15ull;  // recorded with the result; same seed, same interval
  int resamples = 2000;
  double confidence = 0.95;
};

/// The estimate of A/B from a set of pairs. Ratios > 1 mean A is faster.
struct RatioEstimate {
  size_t pairs = 0;
  size_t contention_mismatches = 0;  // pairs flagged `contention_mismatch`
  double ratio = 1;                  // geometric mean of the per-pair ratios a/b
  double lower = 0;                  // interval ends on the ratio scale
  double upper = 0;
  double confidence = 0.95;
  double mean_log_ratio = 0;  // log(ratio)
  double sd_log_ratio = 0;    // sample standard deviation of the per-pair log-ratios (0 for one pair)
  double wilcoxon_p = 1;      // two-sided, on the per-pair log-ratios
  uint64_t seed = 0;
  int resamples = 0;

  /// Half the interval's width on the ratio scale; since the ratio is near 1 it reads as a relative
  /// precision (0.01 = +-1%). Infinite when the interval is unbounded (a single pair).
  double halfwidth() const;
};

/// Geometric mean of positive figures (an arm's tok/s over its runs); 0 for an empty list.
/// Throws std::invalid_argument on a non-finite or non-positive value.
double geometric_mean(std::span<const double> values);
/// Geometric mean of a/b over the pairs. Throws std::invalid_argument on empty or bad input.
double geometric_mean_ratio(std::span<const AbPair> pairs);

/// Two-sided Wilcoxon signed-rank p-value of the hypothesis "median difference is 0". Exact (the
/// permutation distribution of the average ranks, ties included) up to kExactWilcoxonMaxPairs
/// non-zero differences; beyond, the normal approximation with tie and continuity corrections.
/// Exact zeros are dropped (Wilcoxon's method); with nothing left the p-value is 1.
inline constexpr size_t kExactWilcoxonMaxPairs = 60;
double wilcoxon_signed_rank_p(std::span<const double> differences);

/// Estimate with a seeded percentile bootstrap of the mean log-ratio. The percentile levels are
/// widened for small samples (Hesterberg's expanded percentile: alpha' / 2 =
/// Phi(-sqrt(n / (n - 1)) * t_{1 - alpha / 2, n - 1})) because the plain percentile interval
/// under-covers at the 4-10 pairs a gate usually stops at; and the interval is never narrower than the
/// Student-t interval of the mean log-ratio (a bootstrap mean cannot leave the data's range, which
/// matters at 4 pairs and not at 20). One pair gives the unbounded interval
/// (0, inf). Throws std::invalid_argument on empty input, a non-finite or non-positive figure, or bad
/// options.
RatioEstimate estimate_ratio(std::span<const AbPair> pairs, const BootstrapOptions& options = {});


/// Bands of the comparison (Pinpoint's three answers to "did A and B perform differently?", the
/// Comparison of qgate/common/verdicts.h), on the ratio scale.
///  - DIFFERENT: the interval lies wholly outside [1 - noise_band, 1 + noise_band] (it excludes 1
///    by more than the run-to-run noise floor) and the signed-rank p is below 1 - confidence.
///  - SAME: not DIFFERENT, and the interval lies wholly inside [1 - b(n), 1 + b(n)] with
///    b(n) = max(noise_band, same_scale / sqrt(n)). The band tightens as pairs grow, so with many
///    pairs SAME means "equal within the noise floor" while a few pairs can still settle an A/A run.
///  - UNKNOWN otherwise: more pairs are needed.
struct ComparisonBands {
  double noise_band = 0.01;
  double same_scale = 0.10;
  double same_band(size_t pairs) const;
};

Comparison compare(const RatioEstimate& estimate, const ComparisonBands& bands = {});

/// The gate verdict's exit code, as docs/measurement.md says.
int exit_code(Verdict v);  // 0 PASS, 1 FAIL, 2 INCONCLUSIVE

/// The gate's policy; SequentialDesign::from_policy (sequential.h) turns it into planned looks.
struct GatePolicy {
  double slowdown_threshold = 0.02;  // a slowdown beyond 2% fails the gate
  int min_pairs = 4;                 // the first look is at no fewer pairs
  int max_pairs = 40;                // the budget, and the last look
  double target_halfwidth = 0.01;    // stop at a look once the interval is this precise (+-1%)
  ComparisonBands bands{};           // the gate's SAME is equivalence within noise_band (same_scale unused)
};

}  // namespace qgate::stats
