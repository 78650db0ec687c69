// E-divisive means with a permutation test (Matteson & James 2014), hierarchical bisection with the end
// of each segment fixed (as Apache Otava and MongoDB's signal processing use it), a last pass placing
// each change again between its final neighbours, and Welch's interval on the step either side of it.
#include "qgate/stats/change_points.h"

#include "qgate/stats/unpaired.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

namespace qgate::stats {

namespace {

struct Segment {
  size_t begin = 0;
  size_t end = 0;  // one past the last point
};

struct Split {
  bool found = false;
  size_t tau = 0;  // offset inside the segment of the first point of the right side
  double statistic = 0;
};

// The best split of x[0, n) into [0, tau) and [tau, n), both at least `min_segment` long, by the scaled
// energy distance Q = (m k / (m + k)) * (2 B / (m k) - W_left / C(m, 2) - W_right / C(k, 2)), where B sums
// the distances between the sides and W the distances within one. The sums are updated as tau moves, so
// a segment of n points costs O(n^2).
Split best_split(const double* x, size_t n, size_t min_segment, double exponent, std::vector<double>& distance) {
  Split best;
  if (n < 2 * min_segment) return best;
  distance.assign(n * n, 0.0);
  double total = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      const double d = exponent == 1.0 ? std::fabs(x[i] - x[j]) : std::pow(std::fabs(x[i] - x[j]), exponent);
      distance[i * n + j] = distance[j * n + i] = d;
      total += d;
    }
  double within_left = 0, within_right = total, between = 0;
  for (size_t tau = 1; tau + min_segment <= n; ++tau) {
    // Move point tau - 1 from the right side to the left.
    const size_t moved = tau - 1;
    double to_left = 0, to_right = 0;
    for (size_t i = 0; i < moved; ++i) to_left += distance[moved * n + i];
    for (size_t j = moved + 1; j < n; ++j) to_right += distance[moved * n + j];
    within_left += to_left;
    within_right -= to_right;
    between += to_right - to_left;
    if (tau < min_segment) continue;
    const double m = static_cast<double>(tau), k = static_cast<double>(n - tau);
    const double energy = 2.0 * between / (m * k) - within_left / (m * (m - 1) / 2) - within_right / (k * (k - 1) / 2);
    const double statistic = m * k / (m + k) * energy;
    if (!best.found || statistic > best.statistic) best = {true, tau, statistic};
  }
  return best;
}

// A uniform index in [0, bound) from the 64-bit engine, written out so that one seed gives one answer
// with every standard library (std::shuffle and the distributions are implementation-defined).
size_t uniform_index(std::mt19937_64& rng, size_t bound) {
  return static_cast<size_t>(static_cast<double>(rng() >> 11) * 0x1.0p-53 * static_cast<double>(bound));
}

void shuffle(std::vector<double>& values, size_t begin, size_t end, std::mt19937_64& rng) {
  for (size_t i = end - begin; i > 1; --i) std::swap(values[begin + i - 1], values[begin + uniform_index(rng, i)]);
}

void check(const std::vector<double>& series, const ChangePointOptions& options) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("change points: " + what); };
  if (options.min_segment < 2) fail("min_segment must be at least 2");
  if (!(options.alpha > 0 && options.alpha < 1)) fail("alpha must be in (0, 1)");
  if (options.permutations == 0) fail("permutations must be at least 1");
  if (!(options.exponent > 0 && options.exponent < 2)) fail("exponent must be in (0, 2)");
  if (!(options.confidence > 0 && options.confidence < 1)) fail("confidence must be in (0, 1)");
  for (size_t i = 0; i < series.size(); ++i)
    if (!std::isfinite(series[i])) fail("value " + std::to_string(i) + " is not finite");
}

}  // namespace

std::vector<ChangePoint> detect_change_points(std::span<const double> log_values, const ChangePointOptions& options) {
  const std::vector<double> series(log_values.begin(), log_values.end());
  check(series, options);

  std::vector<Segment> segments{{0, series.size()}};
  std::vector<ChangePoint> changes;
  std::vector<double> distance, permuted;
  std::mt19937_64 rng(options.seed);

  while (changes.size() < options.max_changes) {
    // The strongest split over all current segments.
    size_t chosen = segments.size();
    Split split;
    for (size_t s = 0; s < segments.size(); ++s) {
      const Split candidate = best_split(series.data() + segments[s].begin, segments[s].end - segments[s].begin,
                                         options.min_segment, options.exponent, distance);
      if (candidate.found && (chosen == segments.size() || candidate.statistic > split.statistic)) {
        chosen = s;
        split = candidate;
      }
    }
    if (chosen == segments.size()) break;

    // Its significance: shuffle within every segment (no change inside any of them under the null) and
    // take the strongest split again; the observed one is extreme when few shuffles reach it.
    const double tolerance = 1e-12 * std::max(1.0, std::fabs(split.statistic));
    size_t as_extreme = 0;
    for (size_t r = 0; r < options.permutations; ++r) {
      permuted = series;
      double strongest = -INFINITY;
      for (const Segment& segment : segments) {
        shuffle(permuted, segment.begin, segment.end, rng);
        const Split candidate = best_split(permuted.data() + segment.begin, segment.end - segment.begin,
                                           options.min_segment, options.exponent, distance);
        if (candidate.found) strongest = std::max(strongest, candidate.statistic);
      }
      if (strongest >= split.statistic - tolerance) ++as_extreme;
    }
    const double p = static_cast<double>(as_extreme + 1) / static_cast<double>(options.permutations + 1);
    if (p >= options.alpha) break;

    const Segment old = segments[chosen];
    const size_t index = old.begin + split.tau;
    segments[chosen] = {old.begin, index};
    segments.insert(segments.begin() + static_cast<std::ptrdiff_t>(chosen) + 1, Segment{index, old.end});
    ChangePoint change;
    change.index = index;
    change.p = p;
    change.statistic = split.statistic;
    changes.push_back(change);
  }

  std::sort(changes.begin(), changes.end(), [](const ChangePoint& a, const ChangePoint& b) { return a.index < b.index; });

  // Each change was placed while the segment around it still held other changes, which pulls the split
  // off by a point or two. Place each again between its final neighbours, until none moves.
  for (size_t pass = 0; pass < changes.size() + 1; ++pass) {
    bool moved = false;
    for (size_t c = 0; c < changes.size(); ++c) {
      const size_t begin = c == 0 ? 0 : changes[c - 1].index;
      const size_t end = c + 1 == changes.size() ? series.size() : changes[c + 1].index;
      const Split again = best_split(series.data() + begin, end - begin, options.min_segment, options.exponent, distance);
      if (again.found && begin + again.tau != changes[c].index) {
        changes[c].index = begin + again.tau;
        changes[c].statistic = again.statistic;
        moved = true;
      }
    }
    if (!moved) break;
  }

  // The step at each change, between its neighbouring segments in the final partition.
  for (size_t c = 0; c < changes.size(); ++c) {
    const size_t begin = c == 0 ? 0 : changes[c - 1].index;
    const size_t end = c + 1 == changes.size() ? series.size() : changes[c + 1].index;
    const std::span<const double> before(series.data() + begin, changes[c].index - begin);
    const std::span<const double> after(series.data() + changes[c].index, end - changes[c].index);
    const WelchInterval step = welch_interval(after, before, options.confidence);
    changes[c].n_before = before.size();
    changes[c].n_after = after.size();
    changes[c].ratio = std::exp(step.difference);
    changes[c].lower = std::exp(step.lower);
    changes[c].upper = std::exp(step.upper);
  }
  return changes;
}

}  // namespace qgate::stats
