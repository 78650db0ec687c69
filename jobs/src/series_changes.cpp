// SeriesChanges: files quiet runs by series and build, takes each build's median log tok/s, and runs the
// change-point detector over each series' builds in time order; for `qgate regressions`, as one scan
// corrected across the series (Benjamini-Hochberg), each slowdown followed by the change that fixed it and
// labelled transient when only one or two of its builds are slow.
#include "qgate/jobs/series_changes.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <unordered_set>
#include <vector>

#include "qgate/jobs/compare_builds.h"
#include "qgate/jobs/series_fields_message.h"
#include "qgate/stats/change_points.h"
#include "qgate/stats/regression_scan.h"

namespace qgate::jobs {
namespace {

struct BuildPoint {
  db::RowId build_id = 0;
  std::string name;
  std::int64_t first_ms = 0;  // its first quiet run on the series
  std::vector<double> log_tokens_per_s;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// One series: its builds in time order and each build's median log tok/s.
struct SeriesPoints {
  SeriesKey key;
  std::vector<BuildPoint> points;
  std::vector<double> values;
  int runs = 0;
};

v1::SeriesChange& add_change(const stats::ChangePoint& c, const std::vector<BuildPoint>& points, v1::ChangeSeries& out) {
  v1::SeriesChange* change = out.add_changes();
  const BuildPoint& first = points[c.index];
  change->set_index(static_cast<int>(c.index));
  change->set_build_id(first.build_id);
  change->set_build_name(first.name);
  change->set_previous_build_name(points[c.index - 1].name);
  change->set_started_unix_ms(first.first_ms);
  change->set_ratio(c.ratio);
  change->set_ci_low(c.lower);
  change->set_ci_high(c.upper);
  change->set_p_value(c.p);
  change->set_builds_before(static_cast<int>(c.n_before));
  change->set_builds_after(static_cast<int>(c.n_after));
  return *change;
}

v1::ChangeSeries series_message(const SeriesPoints& series) {
  v1::ChangeSeries out;
  out.set_series(series.key.describe());
  write_series_fields(series.key, out);
  out.set_builds(static_cast<int>(series.points.size()));
  out.set_runs(series.runs);
  return out;
}

}  // namespace

v1::QueryChangesResponse SeriesChanges::find(const ChangesQuery& query) const {
  stats::ChangePointOptions options;
  if (!(query.alpha > 0 && query.alpha < 1)) throw std::invalid_argument("alpha must be in (0, 1)");
  if (query.min_segment < 2) throw std::invalid_argument("the minimum segment must be at least 2 builds");
  options.alpha = query.alpha;
  options.min_segment = static_cast<size_t>(query.min_segment);

  // The quiet runs in range (known quiet, or load unknown where no sampler ran, as `qgate trend`).
  db::TrendQuery trend;
  trend.profile = query.profile;
  trend.weight_type = query.weight_type;
  trend.path = query.path;
  trend.build_name_glob = query.build_glob;
  trend.host = query.host;
  trend.since_ms = query.since_ms;
  trend.include_contended = false;
  trend.include_unknown = true;
  std::unordered_set<db::RowId> in_range;
  std::map<db::RowId, std::string> builds;
  for (const db::TrendRow& row : store_.query_trend(trend)) {
    in_range.insert(row.run_id);
    builds.emplace(row.build_id, row.build_name);
  }

  // The same runs with their series fields, filed by series and build.
  std::map<SeriesKey, std::map<db::RowId, BuildPoint>> series;
  for (const auto& [build_id, name] : builds) {
    db::CompareRunsQuery runs;
    runs.build_id = build_id;
    runs.profile = query.profile;
    runs.weight_type = query.weight_type;
    for (const db::CompareRun& run : store_.compare_runs(runs)) {
      if (!in_range.count(run.run_id) || !(run.tokens_per_s > 0) || !std::isfinite(run.tokens_per_s)) continue;
      BuildPoint& point = series[SeriesKey::of(run)][build_id];
      if (point.log_tokens_per_s.empty() || run.started_ms < point.first_ms) point.first_ms = run.started_ms;
      point.build_id = build_id;
      point.name = name;
      point.log_tokens_per_s.push_back(std::log(run.tokens_per_s));
    }
  }

  std::vector<SeriesPoints> all;
  for (const auto& [key, by_build] : series) {
    SeriesPoints one{key, {}, {}, 0};
    for (const auto& [id, point] : by_build) one.points.push_back(point);
    std::sort(one.points.begin(), one.points.end(), [](const BuildPoint& a, const BuildPoint& b) {
      return a.first_ms != b.first_ms ? a.first_ms < b.first_ms : a.build_id < b.build_id;
    });
    for (const BuildPoint& p : one.points) {
      one.values.push_back(median(p.log_tokens_per_s));
      one.runs += static_cast<int>(p.log_tokens_per_s.size());
    }
    all.push_back(std::move(one));
  }

  v1::QueryChangesResponse response;
  response.set_alpha(options.alpha);
  response.set_min_segment(static_cast<int>(options.min_segment));
  if (!query.slowdowns_only) {
    // The trend page: every series on its own at alpha, every change.
    response.set_permutations(static_cast<int>(options.permutations));
    for (const SeriesPoints& one : all) {
      v1::ChangeSeries out = series_message(one);
      for (const stats::ChangePoint& c : stats::detect_change_points(one.values, options)) add_change(c, one.points, out);
      *response.add_series() = std::move(out);
    }
    return response;
  }

  // `qgate regressions`: one scan over the series, alpha as the false discovery rate across them
  // (docs/change-points.md, "Many series at once"). Each slowdown is listed with, right after it, the
  // change that fixed it when the level came back: the only changes with ratio >= 1 it lists.
  std::vector<std::vector<double>> values;
  for (const SeriesPoints& one : all) values.push_back(one.values);
  stats::RegressionScanOptions scan_options;
  scan_options.detector = options;
  const stats::RegressionScan scan = stats::scan_for_regressions(values, scan_options);
  response.set_permutations(static_cast<int>(scan.permutations));
  response.set_correction("benjamini-hochberg");
  response.set_series_tested(static_cast<int>(scan.tested));
  for (size_t s = 0; s < all.size(); ++s) {
    const stats::SeriesRegressions& found = scan.series[s];
    if (found.slowdowns.empty()) continue;
    v1::ChangeSeries out = series_message(all[s]);
    out.set_q_value(found.q_value);
    for (const stats::SlowdownEvent& event : found.slowdowns) {
      v1::SeriesChange& drop = add_change(found.changes[event.drop], all[s].points, out);
      drop.set_slow_builds(static_cast<int>(event.slow_builds));
      drop.set_transient(event.transient);
      if (event.recovery) add_change(found.changes[*event.recovery], all[s].points, out).set_fixes_previous(true);
    }
    *response.add_series() = std::move(out);
  }
  return response;
}

}  // namespace qgate::jobs
