// Many series scanned as one query: a first pass finds each series' first split and its p-value, the
// Benjamini-Hochberg step-up across the tested series selects series, and the selected ones are
// detected again at the within-series level selected q / m (regression_scan.h). The permutation tests
// allow for serial correlation at least as strong as the series' median estimate, and slowdowns carried
// by too few builds are labelled transient.
#include "qgate/stats/regression_scan.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "qgate/stats/multiplicity.h"

namespace qgate::stats {

namespace {

// The median of the tested series' lag-1 estimates (lag1_serial_correlation), clamped to [0, 0.9]; 0 with
// fewer than min_series_for_pooled_correlation tested series.
double median_serial_correlation(std::span<const std::vector<double>> series, const RegressionScan& scan,
                                 const RegressionScanOptions& options) {
  std::vector<double> estimates;
  for (size_t s = 0; s < series.size(); ++s)
    if (scan.series[s].tested) estimates.push_back(lag1_serial_correlation(series[s], options.detector.min_segment));
  if (estimates.empty() || estimates.size() < options.min_series_for_pooled_correlation) return 0;
  std::sort(estimates.begin(), estimates.end());
  const size_t k = estimates.size();
  const double median = k % 2 ? estimates[k / 2] : (estimates[k / 2 - 1] + estimates[k / 2]) / 2;
  return std::clamp(median, 0.0, 0.9);
}

}  // namespace

size_t permutations_for_series(size_t tested, double q, size_t floor, size_t cap) {
  if (!(q > 0 && q < 1)) throw std::invalid_argument("the false discovery rate must be in (0, 1)");
  const double needed = std::ceil(2.0 * static_cast<double>(std::max<size_t>(tested, 1)) / q) - 1;
  if (needed >= static_cast<double>(cap)) return std::max(floor, cap);
  return std::max(floor, static_cast<size_t>(needed));
}

RegressionScan scan_for_regressions(std::span<const std::vector<double>> series, const RegressionScanOptions& options) {
  const double q = options.detector.alpha;
  RegressionScan scan;
  scan.series.resize(series.size());
  for (size_t s = 0; s < series.size(); ++s) {
    scan.series[s].tested = series[s].size() >= 2 * options.detector.min_segment;
    if (scan.series[s].tested) ++scan.tested;
  }
  scan.permutations =
      permutations_for_series(scan.tested, q, options.detector.permutations, options.max_permutations);

  // Serial correlation: the permutation tests' reference series follow the median of the tested series'
  // lag-1 estimates about their best split (docs/change-points.md, "Serially correlated runs"). Not each
  // series' own: 40 builds estimate it with a standard error near 0.15, and a short deep dip (a burst the
  // sampler missed, a regression fixed two builds later) raises a series' own estimate until the dip no
  // longer passes. About the best split, so that a change common to the series does not raise the median.
  ChangePointOptions detector = options.detector;
  detector.serial_correlation =
      std::max(options.detector.serial_correlation, median_serial_correlation(series, scan, options));
  scan.serial_correlation = detector.serial_correlation;
  ChangePointOptions first_pass = detector;
  first_pass.permutations = scan.permutations;
  first_pass.stop_after_exceedances = options.stop_after_exceedances;
  first_pass.max_changes = 1;  // only the first split's p-value enters the correction

  // The first split of every tested series at level q: a series whose first split does not come under
  // q can never pass the correction (k q / m <= q), so its p-value counts as 1.
  std::vector<double> p_values;
  std::vector<size_t> tested_index;
  for (size_t s = 0; s < series.size(); ++s) {
    if (!scan.series[s].tested) {
      detect_change_points(series[s], first_pass);  // validates the values all the same
      continue;
    }
    const std::vector<ChangePoint> first = detect_change_points(series[s], first_pass);
    scan.series[s].p = first.empty() ? 1.0 : first.front().p;
    p_values.push_back(scan.series[s].p);
    tested_index.push_back(s);
  }
  const std::vector<double> adjusted = benjamini_hochberg_adjusted(p_values);
  const std::vector<bool> selected = benjamini_hochberg_rejections(p_values, q);
  for (size_t t = 0; t < tested_index.size(); ++t) {
    scan.series[tested_index[t]].q_value = adjusted[t];
    scan.series[tested_index[t]].selected = selected[t];
    scan.selected += selected[t] ? 1 : 0;
  }
  if (scan.selected == 0) return scan;

  // Inside a selected series, each further split is tested at selected q / m (docs/change-points.md).
  // With the same seed and permutations the first split and its p-value come out as in the first pass,
  // and that p-value is at most selected q / m, so it passes (the detector keeps p < alpha).
  scan.within_series_alpha = static_cast<double>(scan.selected) * q / static_cast<double>(scan.tested);
  ChangePointOptions within = detector;
  within.permutations = scan.permutations;
  within.stop_after_exceedances = options.stop_after_exceedances;
  within.alpha = std::nextafter(scan.within_series_alpha, 1.0);
  for (size_t s = 0; s < series.size(); ++s) {
    SeriesRegressions& one = scan.series[s];
    if (!one.selected) continue;
    one.changes = detect_change_points(series[s], within);
    one.slowdowns = slowdown_events(one.changes, options.recovery);
    label_transient_slowdowns(series[s], one.changes, one.slowdowns, options.min_slow_builds);
  }
  return scan;
}

}  // namespace qgate::stats
