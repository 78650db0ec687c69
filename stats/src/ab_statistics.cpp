// Paired A/B statistics: geometric-mean ratio, seeded bootstrap interval, Wilcoxon signed-rank
// p-value, the SAME / DIFFERENT / UNKNOWN comparison of a fixed set of pairs, and the verdict names.
#include "qgate/stats/ab_statistics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>
#include <stdexcept>

namespace qgate::stats {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A fixed, portable generator: std::uniform_int_distribution differs between standard libraries,
// and the interval must be identical for a recorded seed wherever it is recomputed.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Index in [0, n) by multiply-shift; the bias (n / 2^64) is far below anything measurable here.
  size_t below(size_t n) {
    return static_cast<size_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

 private:
  uint64_t state_;
};

void check_pairs(std::span<const AbPair> pairs) {
  if (pairs.empty()) throw std::invalid_argument("A/B statistics need at least one pair, got none");
  for (size_t i = 0; i < pairs.size(); ++i) {
    const AbPair& p = pairs[i];
    if (!std::isfinite(p.a) || !std::isfinite(p.b) || p.a <= 0 || p.b <= 0) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "pair %zu has a=%g, b=%g; both figures must be finite and positive",
                    i, p.a, p.b);
      throw std::invalid_argument(buf);
    }
  }
}

std::vector<double> log_ratios(std::span<const AbPair> pairs) {
  std::vector<double> d;
  d.reserve(pairs.size());
  for (const AbPair& p : pairs) d.push_back(std::log(p.a) - std::log(p.b));
  return d;
}

double mean_of(std::span<const double> x) {
  double s = 0;
  for (double v : x) s += v;
  return s / static_cast<double>(x.size());
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::numbers::sqrt2); }

// P(|T| < t) for Student's t with integer df, by the finite series of Abramowitz & Stegun 26.7.3-4;
// exact for integer df, which is all the bootstrap needs (df = pairs - 1).
double student_t_two_sided_mass(double t, int df) {
  const double theta = std::atan(t / std::sqrt(static_cast<double>(df)));
  const double c2 = std::cos(theta) * std::cos(theta);
  const double s = std::sin(theta);
  if (df % 2 == 1) {
    double sum = 0, term = 1;
    for (int k = 0; k <= (df - 3) / 2; ++k) {
      if (k > 0) term *= c2 * (2.0 * k) / (2.0 * k + 1);
      sum += term;
    }
    const double series = df >= 3 ? s * std::cos(theta) * sum : 0.0;
    return 2.0 / std::numbers::pi * (theta + series);
  }
  double sum = 0, term = 1;
  for (int k = 0; k <= (df - 2) / 2; ++k) {
    if (k > 0) term *= c2 * (2.0 * k - 1) / (2.0 * k);
    sum += term;
  }
  return s * sum;
}

// Two-sided quantile: the t with P(|T| < t) = mass. Bisection is slow but exact to double precision
// and runs once per estimate.
double student_t_quantile_two_sided(double mass, int df) {
  double lo = 0, hi = 1;
  while (student_t_two_sided_mass(hi, df) < mass && hi < 1e12) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (student_t_two_sided_mass(mid, df) < mass ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// Linear interpolation between order statistics of a sorted sample.
double sorted_quantile(const std::vector<double>& sorted, double p) {
  const double pos = std::clamp(p, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  const size_t i = static_cast<size_t>(std::floor(pos));
  if (i + 1 >= sorted.size()) return sorted.back();
  const double f = pos - static_cast<double>(i);
  return sorted[i] + f * (sorted[i + 1] - sorted[i]);
}

// The exact two-sided p of the signed-rank statistic: every one of the 2^n sign patterns of the
// (average) ranks is equally likely under "no difference", so count them by dynamic programming on
// doubled ranks (integers even with ties). Small samples are where the normal approximation lies
// most: with 4 pairs it reads p = 0.10 for four same-signed pairs, while the truth is 2/16 = 0.125.
double exact_wilcoxon_p(const std::vector<double>& d, const std::vector<size_t>& order_by_magnitude) {
  const size_t n = d.size();
  std::vector<int> doubled_rank(n);
  int observed = 0, total = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && std::fabs(d[order_by_magnitude[j]]) == std::fabs(d[order_by_magnitude[i]])) ++j;
    const int r2 = static_cast<int>(i + 1 + j);  // twice the average of ranks i+1 .. j
    for (size_t k = i; k < j; ++k) {
      doubled_rank[k] = r2;
      total += r2;
      if (d[order_by_magnitude[k]] > 0) observed += r2;
    }
    i = j;
  }
  // ways[s] = number of sign patterns whose positive doubled ranks sum to s (doubles: up to 2^60).
  std::vector<double> ways(static_cast<size_t>(total) + 1, 0.0);
  ways[0] = 1;
  int reach = 0;
  for (int r : doubled_rank) {
    for (int s = reach; s >= 0; --s) {
      if (ways[static_cast<size_t>(s)] != 0) ways[static_cast<size_t>(s + r)] += ways[static_cast<size_t>(s)];
    }
    reach += r;
  }
  double at_or_below = 0, at_or_above = 0, all = 0;
  for (int s = 0; s <= total; ++s) {
    const double w = ways[static_cast<size_t>(s)];
    all += w;
    if (s <= observed) at_or_below += w;
    if (s >= observed) at_or_above += w;
  }
  return std::min(1.0, 2.0 * std::min(at_or_below, at_or_above) / all);
}

}  // namespace

double RatioEstimate::halfwidth() const {
  if (!std::isfinite(upper)) return kInf;
  return 0.5 * (upper - lower);
}

double geometric_mean_ratio(std::span<const AbPair> pairs) {
  check_pairs(pairs);
  const std::vector<double> d = log_ratios(pairs);
  return std::exp(mean_of(d));
}

double wilcoxon_signed_rank_p(std::span<const double> differences) {
  std::vector<double> d;
  for (double v : differences) {
    if (!std::isfinite(v)) throw std::invalid_argument("Wilcoxon signed-rank: non-finite difference");
    if (v != 0) d.push_back(v);
  }
  const size_t n = d.size();
  if (n == 0) return 1.0;

  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return std::fabs(d[x]) < std::fabs(d[y]); });

  // Average ranks over runs of equal |d|; each run of t ties lowers the variance by (t^3 - t) / 48.
  double w_plus = 0, tie_term = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && std::fabs(d[order[j]]) == std::fabs(d[order[i]])) ++j;
    const double avg_rank = 0.5 * static_cast<double>(i + 1 + j);  // ranks i+1 .. j
    for (size_t k = i; k < j; ++k) {
      if (d[order[k]] > 0) w_plus += avg_rank;
    }
    const double t = static_cast<double>(j - i);
    tie_term += (t * t * t - t) / 48.0;
    i = j;
  }
  if (n <= kExactWilcoxonMaxPairs) return exact_wilcoxon_p(d, order);
  const double nd = static_cast<double>(n);
  const double mean = nd * (nd + 1) / 4.0;
  const double var = nd * (nd + 1) * (2 * nd + 1) / 24.0 - tie_term;
  if (var <= 0) return 1.0;
  const double dev = std::max(0.0, std::fabs(w_plus - mean) - 0.5);  // continuity correction
  const double z = dev / std::sqrt(var);
  return std::min(1.0, std::erfc(z / std::numbers::sqrt2));
}

RatioEstimate estimate_ratio(std::span<const AbPair> pairs, const BootstrapOptions& options) {
  check_pairs(pairs);
  if (options.resamples < 1 || options.resamples > 10'000'000)
    throw std::invalid_argument("bootstrap: resamples must be in [1, 10000000]");
  if (!(options.confidence > 0 && options.confidence < 1))
    throw std::invalid_argument("bootstrap: confidence must be in (0, 1)");

  const std::vector<double> d = log_ratios(pairs);
  const size_t n = d.size();

  RatioEstimate e;
  e.pairs = n;
  e.confidence = options.confidence;
  e.seed = options.seed;
  e.resamples = options.resamples;
  for (const AbPair& p : pairs) e.contention_mismatches += p.contention_mismatch ? 1 : 0;
  e.mean_log_ratio = mean_of(d);
  e.ratio = std::exp(e.mean_log_ratio);
  e.wilcoxon_p = wilcoxon_signed_rank_p(d);

  if (n == 1) {
    // One pair says nothing about its own spread; an unbounded interval keeps every rule honest.
    e.lower = 0;
    e.upper = kInf;
    return e;
  }
  double ss = 0;
  for (double v : d) ss += (v - e.mean_log_ratio) * (v - e.mean_log_ratio);
  e.sd_log_ratio = std::sqrt(ss / static_cast<double>(n - 1));

  SplitMix64 rng(options.seed);
  std::vector<double> means(static_cast<size_t>(options.resamples));
  for (double& m : means) {
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += d[rng.below(n)];
    m = s / static_cast<double>(n);
  }
  std::sort(means.begin(), means.end());

  const double alpha = 1 - options.confidence;
  const int df = static_cast<int>(std::min<size_t>(n - 1, 1'000'000));
  const double t = student_t_quantile_two_sided(options.confidence, df);
  const double nn = static_cast<double>(n);
  const double tail = std::min(alpha / 2, normal_cdf(-std::sqrt(nn / (nn - 1)) * t));
  e.lower = std::exp(sorted_quantile(means, tail));
  e.upper = std::exp(sorted_quantile(means, 1 - tail));
  // A bootstrap mean can never leave the range of the data, so with 4-6 pairs whose spread happens to
  // be small the interval would claim more than the pairs know. Never report less than the Student-t
  // interval of the mean log-ratio; for larger samples the two agree and this changes nothing.
  const double se = e.sd_log_ratio / std::sqrt(nn);
  e.lower = std::min(e.lower, std::exp(e.mean_log_ratio - t * se));
  e.upper = std::max(e.upper, std::exp(e.mean_log_ratio + t * se));
  return e;
}

double ComparisonBands::same_band(size_t pairs) const {
  if (pairs == 0) return noise_band;
  return std::max(noise_band, same_scale / std::sqrt(static_cast<double>(pairs)));
}

Comparison compare(const RatioEstimate& e, const ComparisonBands& bands) {
  const bool clear_of_noise = e.upper < 1 - bands.noise_band || e.lower > 1 + bands.noise_band;
  // Two independent readings must agree before a difference is claimed: the interval, and the
  // signed-rank test at the same level. A handful of pairs that happen to agree can make a t
  // interval look decisive; the exact rank test cannot reach p < 0.05 with fewer than 6 pairs.
  if (clear_of_noise && e.wilcoxon_p < 1 - e.confidence) return Comparison::Different;
  const double band = bands.same_band(e.pairs);
  if (e.lower >= 1 - band && e.upper <= 1 + band) return Comparison::Same;
  return Comparison::Unknown;
}

int exit_code(Verdict v) {
  switch (v) {
    case Verdict::Pass: return 0;
    case Verdict::Fail: return 1;
    case Verdict::Inconclusive: return 2;
  }
  return 2;
}

double geometric_mean(std::span<const double> values) {
  if (values.empty()) return 0.0;
  double sum = 0;
  for (double v : values) {
    if (!std::isfinite(v) || v <= 0) throw std::invalid_argument("geometric_mean: values must be finite and positive");
    sum += std::log(v);
  }
  return std::exp(sum / double(values.size()));
}

}  // namespace qgate::stats
