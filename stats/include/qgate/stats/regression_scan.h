// `qgate regressions` over many series at once: the change-point detector on every series, corrected for
// the number of series scanned by Benjamini-Hochberg over the series' first-split p-values, with enough
// permutations that the smallest reachable p-value can pass the correction, serially correlated builds
// allowed for, and each slowdown paired with the change that fixed it and labelled transient when only one
// or two builds carry it. docs/change-points.md ("Many series at once") says what it guarantees.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "qgate/stats/change_points.h"
#include "qgate/stats/slowdown_events.h"

namespace qgate::stats {

struct RegressionScanOptions {
  /// The detector's settings; its alpha is the false discovery rate q across series, its permutations
  /// the fewest a test draws (the scan raises them with the number of series, up to max_permutations).
  ChangePointOptions detector;
  size_t max_permutations = 19'999;
  /// Every test stops once this many shuffles are as strong as the observed split (sequential p-values),
  /// so the many permutations are spent only on splits that could pass.
  size_t stop_after_exceedances = 10;
  RecoveryOptions recovery;
  /// With at least this many tested series, the median of their lag-1 serial correlation estimates
  /// (lag1_serial_correlation, clamped to [0, 0.9]) is the serial correlation every permutation test of
  /// the scan allows for (ChangePointOptions::serial_correlation, when that is not larger). With fewer,
  /// the detector's own setting stands.
  size_t min_series_for_pooled_correlation = 5;
  /// A slowdown with fewer slow builds than this is labelled transient (SlowdownEvent::transient): it is
  /// listed, but a short real regression and a burst of contention the sampler missed look alike there.
  size_t min_slow_builds = 3;
};

/// One series' answer, in the order the series were given.
struct SeriesRegressions {
  /// Whether the series was tested: it has at least two minimum segments of builds.
  bool tested = false;
  /// The permutation p-value of the series' first split, which tests "no change at all"; 1 when no split
  /// came below q (or the series was not tested).
  double p = 1;
  /// Its Benjamini-Hochberg adjusted p-value across the tested series (q-value).
  double q_value = 1;
  /// Whether the correction kept the series (q_value <= q).
  bool selected = false;
  /// The series' changes when selected (further splits tested at the level the correction leaves each
  /// selected series), else none.
  std::vector<ChangePoint> changes;
  /// The slowdowns among `changes`, each with its recovery when the level came back.
  std::vector<SlowdownEvent> slowdowns;
};

struct RegressionScan {
  std::vector<SeriesRegressions> series;
  size_t tested = 0;              // m, the series the correction counts
  size_t selected = 0;            // series kept by the correction
  size_t permutations = 0;        // drawn at most per test
  double within_series_alpha = 0;  // the level of each further split in a selected series: selected q / m
  double serial_correlation = 0;   // the lag-1 coefficient the permutation tests allowed for
};

/// The permutations a scan of `tested` series at false discovery rate `q` draws at most: the smallest
/// p-value reachable, 1 / (R + 1), is half of q / m, so one shuffle as strong as the observed split still
/// lets the strongest series pass; never fewer than `floor`, never more than `cap`.
size_t permutations_for_series(size_t tested, double q, size_t floor, size_t cap);

/// Scans `series` (each log tok/s per build, oldest first) as one query. Throws std::invalid_argument on
/// invalid detector options (as detect_change_points) or a non-finite value.
RegressionScan scan_for_regressions(std::span<const std::vector<double>> series, const RegressionScanOptions& options);

}  // namespace qgate::stats
