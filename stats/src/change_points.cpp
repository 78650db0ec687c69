// E-divisive means with a permutation test (Matteson & James 2014), hierarchical bisection that searches
// both ends of each split (so a dip that recovers is found, not only a step), a last pass placing each
// change again between its final neighbours, and Welch's interval on the step either side of it. Given
// a serial correlation, the permutation test's reference series follow it (an AR(1) sieve), so serially
// correlated builds do not pass for changes.
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
  size_t tau = 0;    // offset inside the segment of the first point of the right side
  size_t kappa = 0;  // offset one past the right side's last point
  double statistic = 0;
};

// Sums of the pairwise distances |x_i - x_j|^exponent over blocks of a segment, in O(1) each after an
// O(n^2) set-up: block(a, b, c, d) sums i in [a, b), j in [c, d).
class DistanceSums {
 public:
  void reset(const double* x, size_t n, double exponent) {
    n_ = n;
    prefix_.assign((n + 1) * (n + 1), 0.0);
    for (size_t i = 0; i < n; ++i)
      for (size_t j = 0; j < n; ++j) {
        const double gap = std::fabs(x[i] - x[j]);
        const double d = exponent == 1.0 ? gap : std::pow(gap, exponent);
        at(i + 1, j + 1) = d + at(i, j + 1) + at(i + 1, j) - at(i, j);
      }
  }
  double block(size_t a, size_t b, size_t c, size_t d) const { return at(b, d) - at(a, d) - at(b, c) + at(a, c); }
  /// The sum over unordered pairs within [a, b).
  double within(size_t a, size_t b) const { return block(a, b, a, b) / 2; }

 private:
  double& at(size_t i, size_t j) { return prefix_[i * (n_ + 1) + j]; }
  double at(size_t i, size_t j) const { return prefix_[i * (n_ + 1) + j]; }
  size_t n_ = 0;
  std::vector<double> prefix_;
};

// The best split of x[0, n) at tau by the scaled energy distance between X = [0, tau) and Y = [tau, kappa)
// (Matteson & James 2014): Q = (m k / (m + k)) * (2 B / (m k) - W_X / C(m, 2) - W_Y / C(k, 2)), B summing
// the distances between X and Y and W those within one, both at least `min_segment` long. With
// `vary_end` the search takes the best kappa as well (the full E-divisive), so a short excursion inside
// a long segment (a dip that recovers) is as visible as a step; without it kappa = n. O(n^2) a segment.
Split best_split(const double* x, size_t n, size_t min_segment, double exponent, bool vary_end, DistanceSums& sums) {
  Split best;
  if (n < 2 * min_segment) return best;
  sums.reset(x, n, exponent);
  for (size_t tau = min_segment; tau + min_segment <= n; ++tau) {
    const double m = static_cast<double>(tau);
    const double within_x = sums.within(0, tau) / (m * (m - 1) / 2);
    for (size_t kappa = vary_end ? tau + min_segment : n; kappa <= n; ++kappa) {
      const double k = static_cast<double>(kappa - tau);
      const double energy =
          2.0 * sums.block(0, tau, tau, kappa) / (m * k) - within_x - sums.within(tau, kappa) / (k * (k - 1) / 2);
      const double statistic = m * k / (m + k) * energy;
      if (!best.found || statistic > best.statistic) best = {true, tau, kappa, statistic};
    }
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

// values[begin, end) replaced by a lag-1 autoregression with coefficient `rho` driven by a permutation of
// the segment's own innovations (its residuals about its mean, each less rho times the one before).
void ar1_sieve(std::vector<double>& values, size_t begin, size_t end, double rho, std::vector<double>& innovations,
               std::mt19937_64& rng) {
  const size_t n = end - begin;
  double mean = 0;
  for (size_t i = begin; i < end; ++i) mean += values[i];
  mean /= static_cast<double>(n);
  innovations.resize(n);
  for (size_t i = 0; i < n; ++i)
    innovations[i] = (values[begin + i] - mean) - (i > 0 ? rho * (values[begin + i - 1] - mean) : 0.0);
  shuffle(innovations, 0, n, rng);
  double previous = 0;
  for (size_t i = 0; i < n; ++i) {
    previous = rho * previous + innovations[i];
    values[begin + i] = previous;
  }
}

void check(const std::vector<double>& series, const ChangePointOptions& options) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("change points: " + what); };
  if (options.min_segment < 2) fail("min_segment must be at least 2");
  if (!(options.alpha > 0 && options.alpha < 1)) fail("alpha must be in (0, 1)");
  if (options.permutations == 0) fail("permutations must be at least 1");
  if (!(options.exponent > 0 && options.exponent < 2)) fail("exponent must be in (0, 2)");
  if (!(options.confidence > 0 && options.confidence < 1)) fail("confidence must be in (0, 1)");
  if (!(options.serial_correlation >= 0 && options.serial_correlation < 1))
    fail("serial_correlation must be in [0, 1)");
  for (size_t i = 0; i < series.size(); ++i)
    if (!std::isfinite(series[i])) fail("value " + std::to_string(i) + " is not finite");
}

}  // namespace

std::vector<ChangePoint> detect_change_points(std::span<const double> log_values, const ChangePointOptions& options) {
  const std::vector<double> series(log_values.begin(), log_values.end());
  check(series, options);

  std::vector<Segment> segments{{0, series.size()}};
  std::vector<ChangePoint> changes;
  DistanceSums sums;
  std::vector<double> permuted, innovations;
  std::mt19937_64 rng(options.seed);

  while (changes.size() < options.max_changes) {
    // The strongest split over all current segments.
    size_t chosen = segments.size();
    Split split;
    for (size_t s = 0; s < segments.size(); ++s) {
      const Split candidate = best_split(series.data() + segments[s].begin, segments[s].end - segments[s].begin,
                                         options.min_segment, options.exponent, true, sums);
      if (candidate.found && (chosen == segments.size() || candidate.statistic > split.statistic)) {
        chosen = s;
        split = candidate;
      }
    }
    if (chosen == segments.size()) break;

    // Its significance: shuffle within every segment (no change inside any of them under the null) and
    // take the strongest split again; the observed one is extreme when few shuffles reach it.
    const double tolerance = 1e-12 * std::max(1.0, std::fabs(split.statistic));
    size_t as_extreme = 0, drawn = 0;
    bool stopped = false;
    for (size_t r = 0; r < options.permutations && !stopped; ++r) {
      permuted = series;
      double strongest = -INFINITY;
      for (const Segment& segment : segments) {
        if (options.serial_correlation > 0)
          ar1_sieve(permuted, segment.begin, segment.end, options.serial_correlation, innovations, rng);
        else
          shuffle(permuted, segment.begin, segment.end, rng);
        const Split candidate = best_split(permuted.data() + segment.begin, segment.end - segment.begin,
                                           options.min_segment, options.exponent, true, sums);
        if (candidate.found) strongest = std::max(strongest, candidate.statistic);
      }
      ++drawn;
      if (strongest >= split.statistic - tolerance) ++as_extreme;
      stopped = options.stop_after_exceedances != 0 && as_extreme >= options.stop_after_exceedances;
    }
    // Stopped early: h exceedances in L shuffles give p = h / L (Besag & Clifford); otherwise the usual
    // (1 + as extreme) / (R + 1).
    const double p = stopped ? static_cast<double>(as_extreme) / static_cast<double>(drawn)
                             : static_cast<double>(as_extreme + 1) / static_cast<double>(options.permutations + 1);
    if (p >= options.alpha) break;

    const Segment old = segments[chosen];
    const size_t index = old.begin + split.tau;
    segments[chosen] = {old.begin, index};
    segments.insert(segments.begin() + static_cast<std::ptrdiff_t>(chosen) + 1, Segment{index, old.end});
    ChangePoint change;
    change.index = index;
    change.p = p;
    change.statistic = split.statistic;
    change.order = changes.size();
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
      // Between its final neighbours a change is the only one: the end stays fixed.
      const Split again =
          best_split(series.data() + begin, end - begin, options.min_segment, options.exponent, false, sums);
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

double lag1_serial_correlation(std::span<const double> log_values, size_t min_segment) {
  const std::vector<double> series(log_values.begin(), log_values.end());
  const size_t n = series.size();
  if (n < 3) return 0;
  std::vector<size_t> bounds{0};
  DistanceSums sums;
  const Split split = best_split(series.data(), n, std::max<size_t>(min_segment, 2), 1.0, true, sums);
  if (split.found) {
    bounds.push_back(split.tau);
    if (split.kappa < n) bounds.push_back(split.kappa);
  }
  bounds.push_back(n);
  double lagged = 0, squares = 0;
  for (size_t piece = 0; piece + 1 < bounds.size(); ++piece) {
    const size_t begin = bounds[piece], end = bounds[piece + 1];
    double mean = 0;
    for (size_t i = begin; i < end; ++i) mean += series[i];
    mean /= static_cast<double>(end - begin);
    for (size_t i = begin; i < end; ++i) {
      squares += (series[i] - mean) * (series[i] - mean);
      if (i > begin) lagged += (series[i] - mean) * (series[i - 1] - mean);
    }
  }
  if (!(squares > 0)) return 0;
  const double r = lagged / squares;
  const double pieces = static_cast<double>(bounds.size() - 1);
  return r + (1 + 3 * std::max(r, 0.0)) * pieces / static_cast<double>(n);
}

}  // namespace qgate::stats
