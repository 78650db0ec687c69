// The group-sequential A/B gate: planned looks, O'Brien-Fleming-type alpha spending (boundaries by
// recursive numerical integration), the trimmed-t repeated confidence interval at each look (its SE
// robust to serial correlation, its df calibrated by simulation), and the verdict, comparison and
// stopping decision read from it.
#include "qgate/stats/sequential.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>
#include <stdexcept>

namespace qgate::stats {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double upper_normal_tail(double x) { return 0.5 * std::erfc(x / std::numbers::sqrt2); }
double normal_density(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi); }

// x with upper_normal_tail(x) = p, by bisection: erfc keeps its relative precision far into the tail,
// which matters because the first looks spend 1e-10 and less.
double upper_normal_quantile(double p) {
  if (!(p > 0)) return kInf;
  if (p >= 1) return -kInf;
  double lo = -40, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (upper_normal_tail(mid) > p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// Regularised incomplete beta I_x(a, b) by its continued fraction, evaluated with the modified
// Lentz method; the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) keeps x on the side where it converges.
double incomplete_beta(double x, double a, double b) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  if (x > (a + 1) / (a + b + 2)) return 1 - incomplete_beta(1 - x, b, a);
  const double log_front = a * std::log(x) + b * std::log1p(-x) - std::log(a) -
                           (std::lgamma(a) + std::lgamma(b) - std::lgamma(a + b));
  constexpr double kTiny = 1e-300;
  // F = 1 + d1 / (1 + d2 / (1 + ...)), and I_x(a, b) = front / F.
  double c = 1, d = 0, f = 1;
  for (int j = 1; j <= 400; ++j) {
    double coef;
    if (j % 2 == 0) {
      const int m = j / 2;
      coef = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
    } else {
      const int m = (j - 1) / 2;
      coef = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1));
    }
    d = 1 + coef * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    d = 1 / d;
    c = 1 + coef / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    const double step = c * d;
    f *= step;
    if (std::fabs(step - 1) < 1e-15) break;
  }
  return std::exp(log_front) / f;
}

// P(T > t) for Student's t with df degrees of freedom (t >= 0).
double upper_t_tail(double t, double df) {
  if (t <= 0) return 0.5;
  return 0.5 * incomplete_beta(df / (df + t * t), df / 2, 0.5);
}

// t with P(T > t) = p; bisection on a log scale so that 1e-19 tails resolve as well as 0.025.
double upper_t_quantile(double p, double df) {
  if (!(p > 0)) return kInf;
  if (p >= 0.5) return 0;
  double lo = 0, hi = 1;
  while (upper_t_tail(hi, df) > p) {
    lo = hi;
    hi *= 2;
    if (hi > 1e300) return kInf;
  }
  for (int i = 0; i < 200; ++i) {
    const double mid = lo > 0 ? std::sqrt(lo * hi) : 0.5 * hi;
    (upper_t_tail(mid, df) > p ? lo : hi) = mid;
    if (hi - lo <= 1e-13 * hi) break;
  }
  return 0.5 * (lo + hi);
}

// Simpson weights for n (odd) equally spaced points with spacing h.
std::vector<double> simpson_weights(size_t n, double h) {
  std::vector<double> w(n, 2 * h / 3);
  for (size_t i = 1; i < n; i += 2) w[i] = 4 * h / 3;
  w.front() = w.back() = h / 3;
  return w;
}

// One-sided boundaries z_k for a standard Brownian motion observed at information fractions t_k,
// such that P(Z_1 < z_1, ..., Z_{k-1} < z_{k-1}, Z_k >= z_k) = spent_k - spent_{k-1}. The sub-density
// of the score S_k = Z_k sqrt(t_k) on the continuation region is carried from look to look on a grid
// (Armitage, McPherson and Rowe's recursion; Jennison & Turnbull, chapter 19).
std::vector<double> spending_boundaries(const std::vector<double>& t, const std::vector<double>& spent) {
  constexpr size_t kGrid = 801;  // odd, for Simpson's rule
  constexpr double kReach = 12;  // standard deviations of the score kept on the grid
  std::vector<double> z(t.size(), kInf);
  std::vector<double> s, f;      // grid and sub-density of the score after the previous look
  for (size_t k = 0; k < t.size(); ++k) {
    const double increment = spent[k] - (k == 0 ? 0.0 : spent[k - 1]);
    const double reach = kReach * std::sqrt(t[k]);
    double b = kInf;  // boundary on the score scale
    if (k == 0) {
      z[0] = upper_normal_quantile(increment);
      b = z[0] * std::sqrt(t[0]);
    } else {
      const double sd = std::sqrt(t[k] - t[k - 1]);
      const std::vector<double> w = simpson_weights(s.size(), s[1] - s[0]);
      auto crossing = [&](double bound) {
        double p = 0;
        for (size_t i = 0; i < s.size(); ++i) p += w[i] * f[i] * upper_normal_tail((bound - s[i]) / sd);
        return p;
      };
      if (increment > 0 && crossing(reach) < increment) {
        double lo = -reach, hi = reach;
        for (int it = 0; it < 100; ++it) {
          const double mid = 0.5 * (lo + hi);
          (crossing(mid) > increment ? lo : hi) = mid;
        }
        b = 0.5 * (lo + hi);
        z[k] = b / std::sqrt(t[k]);
      }
    }
    // The sub-density on (-reach, min(b, reach)) for the next look.
    const double hi = std::min(b, reach), lo = -reach;
    std::vector<double> s_next(kGrid), f_next(kGrid);
    for (size_t i = 0; i < kGrid; ++i) s_next[i] = lo + (hi - lo) * static_cast<double>(i) / (kGrid - 1);
    if (k == 0) {
      const double sd = std::sqrt(t[0]);
      for (size_t i = 0; i < kGrid; ++i) f_next[i] = normal_density(s_next[i] / sd) / sd;
    } else {
      const double sd = std::sqrt(t[k] - t[k - 1]);
      const std::vector<double> w = simpson_weights(s.size(), s[1] - s[0]);
      for (size_t i = 0; i < kGrid; ++i) {
        double g = 0;
        for (size_t j = 0; j < s.size(); ++j) g += w[j] * f[j] * normal_density((s_next[i] - s[j]) / sd);
        f_next[i] = g / sd;
      }
    }
    s = std::move(s_next);
    f = std::move(f_next);
  }
  return z;
}

std::string printf_string(const char* fmt, auto... args) {
  char buf[320];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

void check_design_policy(const GatePolicy& p) {
  if (!(p.slowdown_threshold > 0 && p.slowdown_threshold < 1))
    throw std::invalid_argument("gate policy: slowdown_threshold must be in (0, 1)");
  if (p.min_pairs < 2 || p.max_pairs < p.min_pairs)
    throw std::invalid_argument("gate policy: need 2 <= min_pairs <= max_pairs");
  if (p.max_pairs > 100000) throw std::invalid_argument("gate policy: max_pairs must be at most 100000");
  if (!(p.target_halfwidth > 0)) throw std::invalid_argument("gate policy: target_halfwidth must be positive");
  if (!(p.bands.noise_band >= 0 && p.bands.noise_band < 1))
    throw std::invalid_argument("gate policy: the noise band must be in [0, 1)");
}

std::string describe(const LookResult& r) {
  if (!std::isfinite(r.upper) || r.lower <= 0)
    return printf_string("ratio %.3f [unbounded at %zu pairs]", r.ratio, r.pairs);
  return printf_string("ratio %.3f [%.3f, %.3f]", r.ratio, r.lower, r.upper);
}

}  // namespace

double obf_spending(double t, double alpha) {
  if (!(t > 0)) return 0;
  t = std::min(t, 1.0);
  const double z = upper_normal_quantile(alpha / 2);
  return 2 * upper_normal_tail(z / std::sqrt(t));
}

std::vector<int> SequentialDesign::plan_looks(int min_pairs, int max_pairs) {
  std::vector<int> looks;
  for (int n = max_pairs; n >= min_pairs; n = (n + 1) / 2) {
    looks.push_back(n);
    if (n == 1) break;
  }
  if (looks.empty()) looks.push_back(max_pairs);
  std::reverse(looks.begin(), looks.end());
  looks.erase(std::unique(looks.begin(), looks.end()), looks.end());
  return looks;
}

SequentialDesign SequentialDesign::from_policy(const GatePolicy& policy, double alpha, double trim) {
  check_design_policy(policy);
  if (!(alpha > 0 && alpha < 0.5)) throw std::invalid_argument("sequential design: alpha must be in (0, 0.5)");
  if (!(trim >= 0 && trim < 0.5)) throw std::invalid_argument("sequential design: trim must be in [0, 0.5)");
  SequentialDesign d;
  d.alpha = alpha;
  d.trim = trim;
  d.slowdown_threshold = policy.slowdown_threshold;
  d.equivalence_band = std::min(policy.bands.noise_band, policy.slowdown_threshold);
  d.target_halfwidth = policy.target_halfwidth;
  d.looks = plan_looks(policy.min_pairs, policy.max_pairs);
  std::vector<double> t;
  for (int n : d.looks) {
    t.push_back(static_cast<double>(n) / d.looks.back());
    d.spent.push_back(obf_spending(t.back(), alpha));
  }
  d.z_bound = spending_boundaries(t, d.spent);
  for (size_t k = 0; k < d.looks.size(); ++k) {
    d.trimmed.push_back(static_cast<int>(std::floor(trim * d.looks[k])));
    d.nominal_p.push_back(upper_normal_tail(d.z_bound[k]));
  }
  d.set_statistic(kAutocovarianceLags, kEffectiveDfScale);
  return d;
}

void SequentialDesign::set_statistic(int lags, double scale) {
  if (lags < 0) throw std::invalid_argument("sequential design: autocovariance lags must be >= 0");
  if (!(scale > 0)) throw std::invalid_argument("sequential design: the df scale must be positive");
  autocovariance_lags = lags;
  df_scale = scale;
  df.clear();
  t_bound.clear();
  for (size_t k = 0; k < looks.size(); ++k) {
    const int kept = looks[k] - 2 * trimmed[k];
    // With fewer than two kept pairs there is no spread to read, and the look cannot decide.
    df.push_back(kept >= 2 ? scale * (kept - 1) : 0.0);
    t_bound.push_back(kept >= 2 ? upper_t_quantile(nominal_p[k], df.back()) : kInf);
  }
}

std::vector<double> obf_boundaries(std::span<const double> fractions, double alpha) {
  std::vector<double> t(fractions.begin(), fractions.end()), spent;
  for (size_t k = 0; k < t.size(); ++k) {
    if (!(t[k] > 0 && t[k] <= 1) || (k > 0 && !(t[k] > t[k - 1])))
      throw std::invalid_argument("sequential design: information fractions must increase within (0, 1]");
    spent.push_back(obf_spending(t[k], alpha));
  }
  return spending_boundaries(t, spent);
}

std::string_view to_string(LookDecision d) { return d == LookDecision::stop ? "stop" : "continue"; }

LookInterval look_interval(std::span<const AbPair> pairs, const SequentialDesign& design, size_t look_index) {
  if (look_index >= design.looks.size()) throw std::invalid_argument("sequential design: no such look");
  const size_t n = pairs.size();
  if (n != static_cast<size_t>(design.looks[look_index])) {
    throw std::invalid_argument(printf_string("look %zu is planned at %d pairs, got %zu", look_index + 1,
                                              design.looks[look_index], n));
  }
  std::vector<double> d;
  d.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const AbPair& p = pairs[i];
    if (!std::isfinite(p.a) || !std::isfinite(p.b) || p.a <= 0 || p.b <= 0) {
      throw std::invalid_argument(
          printf_string("pair %zu has a=%g, b=%g; both figures must be finite and positive", i, p.a, p.b));
    }
    d.push_back(std::log(p.a) - std::log(p.b));
  }
  const std::vector<double> in_run_order = d;
  std::sort(d.begin(), d.end());
  LookInterval r;
  r.pairs = n;
  r.trimmed = design.trimmed[look_index];
  r.df = design.df[look_index];
  r.t_bound = design.t_bound[look_index];
  const size_t g = static_cast<size_t>(r.trimmed);
  const size_t h = n - 2 * g;
  double sum = 0;
  for (size_t i = g; i < n - g; ++i) sum += d[i];
  r.estimate = sum / static_cast<double>(h);
  if (h < 2 || !std::isfinite(r.t_bound)) {
    r.lower = -kInf;
    r.upper = kInf;
    return r;
  }
  // Winsorised values, kept in run order: each log-ratio clamped to the lowest and highest kept one.
  const double low = d[g], high = d[n - g - 1];
  std::vector<double> w(n);
  double wmean = 0;
  for (size_t i = 0; i < n; ++i) {
    w[i] = std::clamp(in_run_order[i], low, high);
    wmean += w[i] / static_cast<double>(n);
  }
  for (double& v : w) v -= wmean;
  // n times the long-run variance of the winsorised values: the lag-0 sum of squares plus the
  // Bartlett-weighted lag sums (Newey-West). Bartlett weights keep it non-negative.
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += w[i] * w[i];
  const size_t lags = std::min(static_cast<size_t>(design.autocovariance_lags), n - 1);
  for (size_t k = 1; k <= lags; ++k) {
    double lag_sum = 0;
    for (size_t i = 0; i + k < n; ++i) lag_sum += w[i] * w[i + k];
    ss += 2 * (1 - static_cast<double>(k) / static_cast<double>(lags + 1)) * lag_sum;
  }
  ss = std::max(ss, 0.0);
  // Yuen: se^2 = (n - 1) s_w^2 / (h (h - 1)) with s_w^2 = ss / (n - 1); with lags, ss carries the
  // autocovariances of the winsorised values, which is what the trimmed mean's variance follows.
  r.standard_error = std::sqrt(ss / (static_cast<double>(h) * static_cast<double>(h - 1)));
  if (r.standard_error == 0) {
    // The kept pairs agree exactly (timer resolution can do that): fall back on the spread of all of
    // them, so that three equal middle values of five never make a zero-width interval. Only when
    // every pair agrees is the interval a point.
    double all = 0, mean = 0;
    for (double v : d) mean += v / static_cast<double>(n);
    for (double v : d) all += (v - mean) * (v - mean);
    r.standard_error = std::sqrt(all / (static_cast<double>(n) * static_cast<double>(n - 1)));
  }
  r.lower = r.estimate - r.t_bound * r.standard_error;
  r.upper = r.estimate + r.t_bound * r.standard_error;
  return r;
}

double LookResult::halfwidth() const {
  if (!std::isfinite(upper)) return kInf;
  return 0.5 * (upper - lower);
}

Comparison equivalence_comparison(double lower, double upper, double band) {
  if (upper < 1 - band || lower > 1 + band) return Comparison::Different;
  if (lower > 1 - band && upper < 1 + band) return Comparison::Same;
  return Comparison::Unknown;
}

LookResult judge_look(std::span<const AbPair> pairs, const SequentialDesign& design, size_t look_index) {
  LookResult r;
  r.interval = look_interval(pairs, design, look_index);
  r.look_index = look_index;
  r.pairs = pairs.size();
  for (const AbPair& p : pairs) r.contention_mismatches += p.contention_mismatch ? 1 : 0;
  r.ratio = std::exp(r.interval.estimate);
  r.lower = std::exp(r.interval.lower);
  r.upper = std::exp(r.interval.upper);

  const double floor = 1 - design.slowdown_threshold;
  r.verdict = r.upper < floor ? Verdict::Fail : r.lower > floor ? Verdict::Pass : Verdict::Inconclusive;
  r.comparison = equivalence_comparison(r.lower, r.upper, design.equivalence_band);
  const bool decided = r.verdict != Verdict::Inconclusive && r.comparison != Comparison::Unknown;
  const bool precise = r.halfwidth() <= design.target_halfwidth;
  r.decision = look_index == design.last_look() || decided || precise ? LookDecision::stop
                                                                      : LookDecision::continue_adding;
  return r;
}

void explain_look(LookResult& r, const SequentialDesign& design) {
  r.reasons.clear();
  const double floor = 1 - design.slowdown_threshold;
  const double pct = 100 * design.slowdown_threshold;
  const double band = design.equivalence_band;
  const bool bounded = std::isfinite(r.upper) && r.lower > 0;
  const std::string interval = describe(r);
  switch (r.verdict) {
    case Verdict::Fail:
      r.reasons.push_back(printf_string("%s is a slowdown beyond %.1f%%", interval.c_str(), pct));
      break;
    case Verdict::Pass:
      r.reasons.push_back(printf_string("%s rules out a slowdown beyond %.1f%%", interval.c_str(), pct));
      break;
    case Verdict::Inconclusive:
      if (!bounded) {
        r.reasons.push_back(printf_string("%s: %zu pairs are too few to decide at this look", interval.c_str(),
                                          r.pairs));
      } else {
        r.reasons.push_back(printf_string("%s cannot tell whether the slowdown is beyond %.1f%% (the interval "
                                          "straddles %.3f)",
                                          interval.c_str(), pct, floor));
      }
      break;
  }
  switch (r.comparison) {
    case Comparison::Same:
      r.reasons.push_back(printf_string("SAME: the interval lies within +-%.1f%%, the equivalence band (two "
                                        "one-sided tests at %.1f%% each)",
                                        100 * band, 100 * design.alpha));
      break;
    case Comparison::Different:
      r.reasons.push_back(printf_string("DIFFERENT: A is %s than B by more than the %.1f%% band",
                                        r.upper < 1 ? "slower" : "faster", 100 * band));
      break;
    case Comparison::Unknown:
      r.reasons.push_back(printf_string("UNKNOWN: the interval is neither within +-%.1f%% nor wholly outside it",
                                        100 * band));
      break;
  }
  r.reasons.push_back(printf_string(
      "look %zu of %zu at %zu pairs: %.0f%% repeated confidence interval of the %.0f%%-trimmed mean log-ratio "
      "(%d %s trimmed from each end), |t| >= %.3g on %.1f effective df, O'Brien-Fleming-type spending",
      r.look_index + 1, design.looks.size(), r.pairs, 100 * (1 - 2 * design.alpha), 100 * design.trim,
      r.interval.trimmed, r.interval.trimmed == 1 ? "pair" : "pairs", r.interval.t_bound, r.interval.df));
  if (r.decision == LookDecision::continue_adding) {
    r.reasons.push_back(printf_string("continuing to look %zu at %d pairs", r.look_index + 2,
                                      design.looks[r.look_index + 1]));
  } else if (r.verdict != Verdict::Inconclusive && r.comparison != Comparison::Unknown) {
    r.reasons.push_back("stopped: the verdict and the comparison are both decided");
  } else if (r.look_index == design.last_look()) {
    r.reasons.push_back(printf_string("stopped: the budget of %d pairs is spent", design.looks.back()));
  } else {
    r.reasons.push_back(printf_string("stopped: the interval is within +-%.1f%%, the precision target",
                                      100 * design.target_halfwidth));
  }
  if (r.contention_mismatches > 0) {
    r.reasons.push_back(printf_string("%zu of %zu pairs had different co-tenant load on the two arms",
                                      r.contention_mismatches, r.pairs));
  }
}

LookResult evaluate_look(std::span<const AbPair> pairs, const SequentialDesign& design, size_t look_index) {
  LookResult r = judge_look(pairs, design, look_index);
  explain_look(r, design);
  return r;
}

}  // namespace qgate::stats
