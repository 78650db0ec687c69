// The parity reference's three expectations (see parity_reference.h). Each profile is written as
// two small pieces: how it quantizes one 32-element activation group, and how it splits one
// weight group into integers and scales. One loop then evaluates any profile in f64.
#include "qgate/reference/parity_reference.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "block_decode.h"

namespace qgate::reference {

using detail::half_value;
using detail::kGroup;
using detail::round_to_half;
using detail::StoredGroup;

namespace {

enum TypeId : int32_t { q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q4_K = 12, q5_K = 13, q6_K = 14 };

constexpr double kUnitRoundoffF32 = 0x1p-24;  // round to nearest
constexpr double kUnitTruncationF32 = 0x1p-23;  // tensor-core accumulation need not round to nearest

// Rows go to threads in chunks; each element is computed in one fixed order, so results do not
// depend on the thread count.
void for_each_row(int64_t rows, int threads, const std::function<void(int64_t)>& body) {
  int n = threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()));
  n = int(std::min<int64_t>(n, std::max<int64_t>(1, rows)));
  std::atomic<int64_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    try {
      for (int64_t r; (r = next.fetch_add(1)) < rows;) body(r);
    } catch (...) {
      std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = rows;
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < n; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

void check_problem(const GemmProblem& p) {
  const detail::FormatFacts f = detail::format_facts(p.type);
  if (p.od < 0 || p.nt < 0 || p.k < 0 || p.k % f.block_elements != 0)
    throw std::invalid_argument("parity reference: k = " + std::to_string(p.k) + " is not a multiple of " +
                                std::to_string(f.block_elements));
  if ((p.od > 0 && p.k > 0 && !p.weights) || (p.nt > 0 && p.k > 0 && !p.x))
    throw std::invalid_argument("parity reference: null weights or activations");
}

size_t row_bytes(const GemmProblem& p) {
  const detail::FormatFacts f = detail::format_facts(p.type);
  return size_t(p.k / f.block_elements) * f.block_bytes;
}

std::vector<StoredGroup> decode(const GemmProblem& p, int64_t row) {
  std::vector<StoredGroup> groups(size_t(p.k / kGroup));
  detail::decode_row(p.type, p.weights + size_t(row) * row_bytes(p), p.k, groups.data());
  return groups;
}

// ---- profiles ----------------------------------------------------------------------------------

// One activation group as a profile quantizes it. A group's contribution to an output is
//   d * (w.scale[0] * dot(q_w, q)[0..16) + w.scale[1] * dot(q_w, q)[16..32)) + w.min * sum.
// The *_ambiguity fields say how far a faithful kernel may legitimately land from these values
// where the profile's arithmetic is not reproducible bit for bit (ggml's fast-math division and
// reciprocal, its order of summing x): 0 where the value is certain.
struct ActivationGroup {
  int16_t q[kGroup];
  uint32_t q_ambiguous = 0;  // bit j: q[j] may be one step either way
  double d = 0;
  double d_ambiguity = 0;    // |other f16 neighbour - d| when d's f16 rounding is in doubt
  double sum = 0;
  double sum_ambiguity = 0;  // the f16 spacing of `sum` when its rounding is in doubt
};

// One weight group as a profile splits it.
struct WeightGroup {
  int16_t q[kGroup];
  double scale[2] = {0, 0};
  double min = 0;
};

float group_amax(const float* x) {
  float amax = 0.0f;
  for (int j = 0; j < kGroup; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}

// qgate: d = amax/127 (f32), 1/d from the unrounded d (f32), q = round-half-even(x * (1/d))
// clamped to [-128, 127]; the stored d is f16(d); the min term uses d * sum(q). Every step is an
// IEEE operation qgate's kernels perform the same way, so nothing is ambiguous.
ActivationGroup quantize_qgate(const float* x) {
  ActivationGroup a;
  const float scale = group_amax(x) / 127.0f;
  const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
  int64_t total = 0;
  for (int j = 0; j < kGroup; ++j) {
    const float product = x[j] * inverse;
    const double q = std::clamp(double(std::nearbyint(product)), -128.0, 127.0);
    a.q[j] = int16_t(q);
    total += a.q[j];
  }
  a.d = round_to_half(scale);
  a.sum = a.d * double(total);
  return a;
}

// How far ggml's CUDA build may be from IEEE: it compiles with fast math, so 127/amax and
// 1/d_inv are approximate (a few ulp); its sum of 32 x adds in a tree, in f32.
constexpr double kGgmlApproximateUlps = 4.0;

// The f16 value nearest to v, and whether v +- the relative error `rel` could round elsewhere.
double half_rounding_ambiguity(double v, double rel) {
  const double low = round_to_half(v - std::fabs(v) * rel), high = round_to_half(v + std::fabs(v) * rel);
  return high - low;
}

// ggml's CUDA MMQ: d_inv = 127/amax (f32), q = roundf(x * d_inv), d = 1/d_inv (f32). A zero group
// gives d_inv = inf, x * d_inv = NaN, which the conversion to int makes 0, and d = 0. Types whose
// activation tile keeps (d, sum) as an f16 pair store f16(d) and f16 of the sum of the f32 x.
ActivationGroup quantize_ggml(const float* x, bool f16_pair) {
  ActivationGroup a;
  const float amax = group_amax(x);
  const float inverse = 127.0f / amax;
  // The approximate division and reciprocal are exact when amax is 2^e or 127 * 2^e (measured on an
  // H200: bit-equal to IEEE there); the ties rows are built that way, so ties are decided exactly.
  int exponent;
  const double significand = std::frexp(double(amax), &exponent);
  const bool exact_division = significand == 0.5 || significand == 127.0 / 128.0;
  const double rel = exact_division ? 0.0 : kGgmlApproximateUlps * 0x1p-23;
  double exact_sum = 0, abs_sum = 0;
  for (int j = 0; j < kGroup; ++j) {
    const float product = x[j] * inverse;
    a.q[j] = std::isnan(product) ? int16_t(0) : int16_t(std::round(product));
    // With an approximate d_inv, a product within a few ulp of n + 1/2 may round either way.
    const double p = std::fabs(double(product)), margin = p * rel;
    if (rel > 0 && std::isfinite(p) && std::round(p - margin) != std::round(p + margin)) a.q_ambiguous |= 1u << j;
    exact_sum += double(x[j]);
    abs_sum += std::fabs(double(x[j]));
  }
  const float d = 1.0f / inverse;
  if (f16_pair) {
    a.d = round_to_half(d);
    a.d_ambiguity = half_rounding_ambiguity(d, rel);
    // A sum of 32 f32 values in any order is within 31 * u * sum|x| of the exact sum.
    a.sum = round_to_half(exact_sum);
    const double sum_error = 31.0 * 0x1p-24 * abs_sum;
    a.sum_ambiguity = round_to_half(exact_sum + sum_error) - round_to_half(exact_sum - sum_error);
  } else {
    a.d = d;
  }
  return a;
}

// Types for which ggml's activation tile holds (d, sum) as an f16 pair.
bool ggml_f16_pair(int32_t type) {
  return type == q4_0 || type == q4_1 || type == q5_1 || type == q4_K || type == q5_K;
}

ActivationGroup quantize_activation(Numerics numerics, int32_t type, const float* x) {
  return numerics == Numerics::ggml ? quantize_ggml(x, ggml_f16_pair(type)) : quantize_qgate(x);
}

// Both profiles take the weight's integers the same way: the legacy offsets (8, 16) and q6_K's
// 32 are folded into signed integers, K-quant nibbles stay unsigned with the min applied to the
// activation sum. They differ in the precision of the K-quant sub-block scales: qgate keeps the
// exact products d*sc and dmin*m; ggml's tile holds them as an f16 pair (d*sc, -dmin*m).
WeightGroup split_weight(Numerics numerics, int32_t type, const StoredGroup& s) {
  WeightGroup w;
  const double d = half_value(s.d), m = half_value(s.m);
  int32_t offset = 0;
  switch (type) {
    case q4_0: offset = 8; break;
    case q5_0: offset = 16; break;
    case q6_K: offset = 32; break;
    default: break;
  }
  for (int j = 0; j < kGroup; ++j) w.q[j] = int16_t(s.stored[j] - offset);
  switch (type) {
    case q4_1:
    case q5_1:
      w.scale[0] = w.scale[1] = d;
      w.min = m;
      break;
    case q4_K:
    case q5_K: {
      const double scale = d * s.scale[0], min = -(m * s.min);
      const bool half_pair = numerics == Numerics::ggml;
      w.scale[0] = w.scale[1] = half_pair ? round_to_half(scale) : scale;
      w.min = half_pair ? round_to_half(min) : min;
      break;
    }
    case q6_K:
      w.scale[0] = d * s.scale[0];
      w.scale[1] = d * s.scale[1];
      break;
    default:
      w.scale[0] = w.scale[1] = d;
      break;
  }
  return w;
}

}  // namespace

std::string_view to_string(Numerics numerics) { return numerics == Numerics::ggml ? "ggml" : "qgate"; }

std::optional<Numerics> parse_numerics(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "qgate") return Numerics::qgate;
  if (lower == "ggml") return Numerics::ggml;
  return std::nullopt;
}

Expectation expect_mmq(Numerics numerics, const GemmProblem& p, int threads) {
  check_problem(p);
  const int64_t groups = p.k / kGroup;
  std::vector<ActivationGroup> act(size_t(p.nt * groups));
  for (int64_t t = 0; t < p.nt; ++t)
    for (int64_t g = 0; g < groups; ++g)
      act[size_t(t * groups + g)] = quantize_activation(numerics, p.type, p.x + t * p.k + g * kGroup);

  // A kernel computes each group's term with a few f32 roundings (scale products, the integer
  // dot times the scale, the min term and their sum) and adds the 2 terms per group into one
  // f32 sum in any order: at most 2*groups + 4 roundings lie on any path from a term to the
  // output, so |y - ref| <= gamma_n * sum|terms|, gamma_n = n*u/(1 - n*u) (Higham, Accuracy and
  // Stability of Numerical Algorithms, 2nd ed., section 3.1).
  // ggml's approximate division and reciprocal add a few ulp to the activation scale.
  const double n = double(2 * groups + (numerics == Numerics::ggml ? 4 + 2 * int(kGgmlApproximateUlps) : 4));
  Expectation e;
  e.rtol = n * kUnitRoundoffF32 / (1.0 - n * kUnitRoundoffF32);
  e.y.assign(size_t(p.nt * p.od), 0.0);
  e.slack.assign(e.y.size(), 0.0);
  for_each_row(p.od, threads, [&](int64_t o) {
    const std::vector<StoredGroup> stored = decode(p, o);
    std::vector<WeightGroup> w(stored.size());
    for (size_t g = 0; g < stored.size(); ++g) w[g] = split_weight(numerics, p.type, stored[g]);
    for (int64_t t = 0; t < p.nt; ++t) {
      double y = 0, magnitude = 0, ambiguity = 0;
      for (int64_t g = 0; g < groups; ++g) {
        const ActivationGroup& a = act[size_t(t * groups + g)];
        const WeightGroup& wg = w[size_t(g)];
        int32_t low = 0, high = 0;
        for (int j = 0; j < kGroup / 2; ++j) low += int32_t(wg.q[j]) * a.q[j];
        for (int j = kGroup / 2; j < kGroup; ++j) high += int32_t(wg.q[j]) * a.q[j];
        const double dot_term = a.d * wg.scale[0] * low + a.d * wg.scale[1] * high;
        const double min_term = wg.min * a.sum;
        y += dot_term + min_term;
        const double scaled_dots = std::fabs(wg.scale[0] * low) + std::fabs(wg.scale[1] * high);
        magnitude += a.d * scaled_dots + std::fabs(min_term);
        // What the profile leaves open: a q one step off, the neighbouring f16 d or sum.
        if (a.q_ambiguous) {
          double steps = 0;
          for (int j = 0; j < kGroup; ++j)
            if (a.q_ambiguous >> j & 1u) steps += std::fabs(wg.q[j] * wg.scale[j / 16]);
          ambiguity += steps * (a.d + a.d_ambiguity);
        }
        ambiguity += a.d_ambiguity * scaled_dots + std::fabs(wg.min) * a.sum_ambiguity;
      }
      const size_t i = size_t(t * p.od + o);
      e.y[i] = y;
      e.slack[i] = e.rtol * magnitude + ambiguity;
    }
  });
  return e;
}

Expectation expect_f16(const GemmProblem& p, int threads) {
  check_problem(p);
  std::vector<double> x16(size_t(p.nt * p.k));
  for (size_t i = 0; i < x16.size(); ++i) x16[i] = round_to_half(double(p.x[i]));
  // f16 x f16 products are exact; the kernel adds k of them in f32, on tensor cores that need not
  // round to nearest. Such errors behave as independent, mean-zero terms far more often than they
  // add up: |y - ref| <= lambda * sqrt(k) * u * sum|products| holds with probability at least
  // 1 - 2 exp(-lambda^2 / 2) per element (Higham and Mary, SIAM J. Sci. Comput. 41(5), 2019).
  // lambda = 6 makes that 3e-8 per element; u = 2^-23 covers truncating accumulation.
  constexpr double kLambda = 6.0;
  Expectation e;
  e.rtol = kLambda * std::sqrt(double(p.k)) * kUnitTruncationF32;
  e.y.assign(size_t(p.nt * p.od), 0.0);
  e.slack.assign(e.y.size(), 0.0);
  for_each_row(p.od, threads, [&](int64_t o) {
    const std::vector<StoredGroup> stored = decode(p, o);
    std::vector<double> w(size_t(p.k));
    detail::dequantize_exact(p.type, stored.data(), p.k, w.data());
    // The f16 path dequantizes in f32 and then rounds to f16.
    for (double& v : w) v = round_to_half(double(float(v)));
    for (int64_t t = 0; t < p.nt; ++t) {
      const double* xt = x16.data() + t * p.k;
      double y = 0, magnitude = 0;
      for (int64_t j = 0; j < p.k; ++j) {
        const double product = w[size_t(j)] * xt[j];
        y += product;
        magnitude += std::fabs(product);
      }
      const size_t i = size_t(t * p.od + o);
      e.y[i] = y;
      e.slack[i] = e.rtol * magnitude;
    }
  });
  return e;
}

std::vector<double> exact_product(const GemmProblem& p, int threads) {
  check_problem(p);
  std::vector<double> y(size_t(p.nt * p.od), 0.0);
  for_each_row(p.od, threads, [&](int64_t o) {
    const std::vector<StoredGroup> stored = decode(p, o);
    std::vector<double> w(size_t(p.k));
    detail::dequantize_exact(p.type, stored.data(), p.k, w.data());
    for (int64_t t = 0; t < p.nt; ++t) {
      const float* xt = p.x + t * p.k;
      double lanes[4] = {0, 0, 0, 0};
      int64_t j = 0;
      for (; j + 4 <= p.k; j += 4)
        for (int l = 0; l < 4; ++l) lanes[l] += w[size_t(j + l)] * double(xt[j + l]);
      for (; j < p.k; ++j) lanes[0] += w[size_t(j)] * double(xt[j]);
      y[size_t(t * p.od + o)] = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    }
  });
  return y;
}

}  // namespace qgate::reference
