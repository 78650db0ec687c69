// Change points in a performance history: E-divisive means (Matteson & James 2014) over a time-ordered
// series of per-build log tok/s, with a seeded permutation test deciding whether each split is real, and
// the step at each change as a ratio of geometric means with Welch's interval. docs/change-points.md
// describes the method and its parameters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace qgate::stats {

struct ChangePointOptions {
  /// Fewest points (builds) on each side of a split; also the shortest segment between two changes.
  size_t min_segment = 5;
  /// A split is kept while its permutation p-value is below alpha. Small, because every series is
  /// scanned again with each new build and many series are scanned (docs/change-points.md).
  double alpha = 0.01;
  /// Permutations per test; the smallest p-value reachable is 1 / (permutations + 1).
  size_t permutations = 499;
  /// When not 0, a test stops as soon as this many shuffles are as strong as the observed split, and
  /// the p-value is that count over the shuffles drawn (Besag & Clifford's sequential permutation
  /// p-value, docs/change-points.md): a split far from significant costs a few dozen shuffles, so
  /// `permutations` can be large. 0: every test draws all `permutations`.
  size_t stop_after_exceedances = 0;
  /// The exponent of the energy distance |x - y|^exponent, in (0, 2).
  double exponent = 1.0;
  /// Confidence of the step's interval.
  double confidence = 0.95;
  /// At most this many changes are reported (the search stops earlier when a split is not significant).
  size_t max_changes = 16;
  /// The lag-1 serial correlation of the builds under "no change", in [0, 1). 0: the builds are
  /// exchangeable and each reference series of the permutation test is a permutation of its segment.
  /// Above 0: each reference series is a lag-1 autoregression with this coefficient driven by a
  /// permutation of the segment's innovations (an AR(1) sieve; with 0 it is the plain permutation). The
  /// observed statistic is that of the values as they are. scan_for_regressions sets it from the series
  /// it scans (docs/change-points.md, "Serially correlated runs").
  double serial_correlation = 0;
  /// Seed of the permutations: one seed and one series give one answer.
  uint64_t seed = 1;
};

/// One change: the level moves at `index` (the first point of the new level).
struct ChangePoint {
  size_t index = 0;
  /// Points in the segments on either side within the final partition ([start, index) and [index, end)).
  size_t n_before = 0;
  size_t n_after = 0;
  /// exp(mean after - mean before) of the log values: > 1 is faster after the change.
  double ratio = 1;
  double lower = 0;  // Welch interval on the ratio scale
  double upper = 0;
  /// Permutation p-value of the split when it was found: (1 + permutations at least as extreme) / (R + 1).
  double p = 1;
  /// The E-divisive statistic of the split between its final neighbours.
  double statistic = 0;
  /// When the bisection found it: 0 for the first split, whose p-value tests "no change at all".
  size_t order = 0;
};

/// Changes in `log_values` (log tok/s, one per build, oldest first), sorted by index. Throws
/// std::invalid_argument on a non-finite value or invalid options (min_segment < 2, alpha outside
/// (0, 1), no permutations, exponent outside (0, 2), confidence outside (0, 1), serial_correlation
/// outside [0, 1)). A series shorter than
/// 2 * min_segment has no changes.
std::vector<ChangePoint> detect_change_points(std::span<const double> log_values,
                                              const ChangePointOptions& options = {});

/// The lag-1 autocorrelation of `log_values` about a level that may change, corrected for its small-sample
/// bias: the residuals are taken about the means of the pieces of the best E-divisive split (before tau,
/// tau to kappa, after kappa; each at least `min_segment` values), so a step or a dip of min_segment builds
/// or more does not pass for correlation, and r + (1 + 3 max(r, 0)) k / n is returned for k pieces of n
/// values (Marriott & Pope 1954). A shorter deep dip still raises it. About the mean when the series is
/// shorter than 2 min_segment; 0 for fewer than 3 values or no spread.
double lag1_serial_correlation(std::span<const double> log_values, size_t min_segment = 5);

}  // namespace qgate::stats
