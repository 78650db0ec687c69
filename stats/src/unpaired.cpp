// Unpaired statistics: the Student t distribution (through the regularized incomplete beta function),
// Welch's interval, the Mann-Whitney test (exact or normal) and the ratio of geometric means built on them.
#include "qgate/stats/unpaired.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace qgate::stats {

namespace {

// Continued fraction of the incomplete beta function (modified Lentz), as in Numerical Recipes' betacf.
double beta_continued_fraction(double a, double b, double x) {
  constexpr int kMaxIterations = 500;
  constexpr double kEpsilon = 1e-16;
  constexpr double kTiny = 1e-300;
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1, d = 1 - qab * x / qap;
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= kMaxIterations; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 + aa * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1 + aa / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < kEpsilon) break;
  }
  return h;
}

// The regularized incomplete beta function I_x(a, b) for x in [0, 1].
double regularized_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front = std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) +
                                b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * beta_continued_fraction(a, b, x) / a;
  return 1 - front * beta_continued_fraction(b, a, 1 - x) / b;
}

void check_finite(std::span<const double> values, const char* side) {
  for (double v : values)
    if (!std::isfinite(v)) throw std::invalid_argument(std::string("a non-finite value in ") + side);
}

double mean(std::span<const double> v) { return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()); }

double sample_variance(std::span<const double> v, double m) {
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / double(v.size() - 1);
}

double normal_upper_tail(double z) { return 0.5 * std::erfc(z / std::sqrt(2.0)); }

}  // namespace

double student_t_cdf(double t, double df) {
  if (!(df > 0)) throw std::invalid_argument("the t distribution needs df > 0");
  if (std::isnan(t)) throw std::invalid_argument("t is NaN");
  if (std::isinf(t)) return t > 0 ? 1 : 0;
  const double tail = 0.5 * regularized_beta(df / 2, 0.5, df / (df + t * t));
  return t > 0 ? 1 - tail : tail;
}

double student_t_quantile(double p, double df) {
  if (!(p > 0 && p < 1)) throw std::invalid_argument("a t quantile needs p in (0, 1)");
  if (!(df > 0)) throw std::invalid_argument("the t distribution needs df > 0");
  if (p == 0.5) return 0;
  if (p < 0.5) return -student_t_quantile(1 - p, df);
  double lo = 0, hi = 1;
  while (student_t_cdf(hi, df) < p) {
    lo = hi;
    hi *= 2;
    if (hi > 1e300) return std::numeric_limits<double>::infinity();
  }
  for (int i = 0; i < 300 && hi - lo > 1e-15 * hi; ++i) {
    const double mid = 0.5 * (lo + hi);
    (student_t_cdf(mid, df) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

WelchInterval welch_interval(std::span<const double> a, std::span<const double> b, double confidence) {
  if (a.size() < 2 || b.size() < 2)
    throw std::invalid_argument("Welch's interval needs at least 2 values per side, got " + std::to_string(a.size()) +
                                " and " + std::to_string(b.size()));
  if (!(confidence > 0 && confidence < 1)) throw std::invalid_argument("confidence must be in (0, 1)");
  check_finite(a, "side A");
  check_finite(b, "side B");
  WelchInterval w;
  w.n_a = a.size();
  w.n_b = b.size();
  w.confidence = confidence;
  w.mean_a = mean(a);
  w.mean_b = mean(b);
  const double var_a = sample_variance(a, w.mean_a), var_b = sample_variance(b, w.mean_b);
  w.sd_a = std::sqrt(var_a);
  w.sd_b = std::sqrt(var_b);
  w.difference = w.mean_a - w.mean_b;
  const double sa = var_a / double(w.n_a), sb = var_b / double(w.n_b);
  w.standard_error = std::sqrt(sa + sb);
  if (w.standard_error == 0) {
    // No spread on either side: nothing to widen the interval by.
    w.df = double(w.n_a + w.n_b - 2);
    w.lower = w.upper = w.difference;
    return w;
  }
  w.df = (sa + sb) * (sa + sb) / (sa * sa / double(w.n_a - 1) + sb * sb / double(w.n_b - 1));
  const double t = student_t_quantile(0.5 + confidence / 2, w.df);
  w.lower = w.difference - t * w.standard_error;
  w.upper = w.difference + t * w.standard_error;
  return w;
}

MannWhitney mann_whitney(std::span<const double> a, std::span<const double> b) {
  if (a.empty() || b.empty()) throw std::invalid_argument("the Mann-Whitney test needs values on both sides");
  check_finite(a, "side A");
  check_finite(b, "side B");
  MannWhitney r;
  r.n_a = a.size();
  r.n_b = b.size();
  const size_t n = r.n_a + r.n_b;

  // Mid-ranks of the pooled values; tie groups are kept for the variance correction.
  std::vector<std::pair<double, bool>> pooled;  // (value, from a)
  pooled.reserve(n);
  for (double x : a) pooled.emplace_back(x, true);
  for (double y : b) pooled.emplace_back(y, false);
  std::sort(pooled.begin(), pooled.end(), [](const auto& l, const auto& r) { return l.first < r.first; });
  double rank_sum_a = 0, tie_term = 0;
  bool ties = false;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && pooled[j].first == pooled[i].first) ++j;
    const double mid_rank = 0.5 * double(i + 1 + j);  // ranks i+1 .. j
    for (size_t k = i; k < j; ++k)
      if (pooled[k].second) rank_sum_a += mid_rank;
    const double t = double(j - i);
    if (j - i > 1) {
      ties = true;
      tie_term += t * t * t - t;
    }
    i = j;
  }
  const double na = double(r.n_a), nb = double(r.n_b);
  r.u_a = rank_sum_a - na * (na + 1) / 2;

  if (!ties && r.n_a <= kExactMannWhitneyMaxN && r.n_b <= kExactMannWhitneyMaxN) {
    // counts[k][s]: subsets of k of the ranks seen so far with rank sum s, over ranks 1..n.
    const size_t k_max = r.n_a;
    const size_t s_max = k_max * n;
    std::vector<std::vector<double>> counts(k_max + 1, std::vector<double>(s_max + 1, 0.0));
    counts[0][0] = 1;
    for (size_t rank = 1; rank <= n; ++rank)
      for (size_t k = std::min(rank, k_max); k >= 1; --k)
        for (size_t s = s_max; s >= rank; --s) counts[k][s] += counts[k - 1][s - rank];
    const auto& dist = counts[k_max];
    const double total = std::accumulate(dist.begin(), dist.end(), 0.0);
    const size_t observed = size_t(std::llround(rank_sum_a));
    double at_or_below = 0, at_or_above = 0;
    for (size_t s = 0; s <= s_max; ++s) {
      if (s <= observed) at_or_below += dist[s];
      if (s >= observed) at_or_above += dist[s];
    }
    r.p = std::min(1.0, 2 * std::min(at_or_below, at_or_above) / total);
    r.exact = true;
    return r;
  }

  const double nn = double(n);
  const double variance = na * nb / 12 * ((nn + 1) - tie_term / (nn * (nn - 1)));
  if (variance <= 0) {
    r.p = 1;  // every value tied: no evidence either way
    return r;
  }
  const double z = std::max(0.0, std::fabs(r.u_a - na * nb / 2) - 0.5) / std::sqrt(variance);
  r.p = std::min(1.0, 2 * normal_upper_tail(z));
  return r;
}

UnpairedRatio estimate_unpaired_ratio(std::span<const double> a, std::span<const double> b, double confidence) {
  auto logs = [](std::span<const double> v, const char* side) {
    std::vector<double> out;
    out.reserve(v.size());
    for (double x : v) {
      if (!std::isfinite(x) || x <= 0)
        throw std::invalid_argument(std::string("a ratio needs finite positive figures; ") + side + " has " +
                                    std::to_string(x));
      out.push_back(std::log(x));
    }
    return out;
  };
  const std::vector<double> la = logs(a, "side A"), lb = logs(b, "side B");
  const WelchInterval w = welch_interval(la, lb, confidence);
  const MannWhitney m = mann_whitney(la, lb);
  UnpairedRatio r;
  r.n_a = w.n_a;
  r.n_b = w.n_b;
  r.geomean_a = std::exp(w.mean_a);
  r.geomean_b = std::exp(w.mean_b);
  r.ratio = std::exp(w.difference);
  r.lower = std::exp(w.lower);
  r.upper = std::exp(w.upper);
  r.confidence = confidence;
  r.df = w.df;
  r.sd_log_a = w.sd_a;
  r.sd_log_b = w.sd_b;
  r.mann_whitney_p = m.p;
  r.mann_whitney_exact = m.exact;
  if (w.standard_error > 0) r.welch_p = 2 * (1 - student_t_cdf(std::fabs(w.difference) / w.standard_error, w.df));
  else r.welch_p = w.difference == 0 ? 1 : 0;
  return r;
}

}  // namespace qgate::stats
