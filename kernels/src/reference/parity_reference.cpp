// The parity reference's expectations (see parity_reference.h and docs/parity.md, "Routes"). A
// quantized route is written as small pieces: how its library quantizes one activation group, how
// it splits one weight group into integers, scales and a min, which scale products it rounds to
// f16, and how it partitions a group's products before they meet f32 arithmetic. One loop then
// evaluates any quantized route in f64 and derives each element's slack from those pieces. The f16
// routes and the `unknown` profile, whose expectation is the exact product, have loops of their own.
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

using detail::half_spacing;
using detail::half_value;
using detail::kGroup;
using detail::round_to_half;
using detail::StoredGroup;

namespace {

enum TypeId : int32_t { q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q4_K = 12, q5_K = 13, q6_K = 14 };

constexpr double kUnitRoundoffF32 = 0x1p-24;    // round to nearest
constexpr double kUnitTruncationF32 = 0x1p-23;  // tensor-core accumulation need not round to nearest
constexpr double kUnitRoundoffF16 = 0x1p-11;
// Probabilistic bounds hold with probability >= 1 - 2 exp(-lambda^2 / 2) per element (3e-8 at 6).
constexpr double kLambda = 6.0;

double gamma(double n, double u) { return n * u / (1.0 - n * u); }

// The largest error of rounding v to the nearest f16: half the spacing at v (2^-25 below the
// normal range). Overflow to infinity is not covered.
double half_rounding_error(double v) { return half_spacing(v) / 2; }

bool is_k_quant(int32_t type) { return type == q4_K || type == q5_K || type == q6_K; }

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

std::vector<double> dequantized_row(const GemmProblem& p, int64_t row) {
  const std::vector<StoredGroup> stored = decode(p, row);
  std::vector<double> w(size_t(p.k));
  detail::dequantize_exact(p.type, stored.data(), p.k, w.data());
  return w;
}

std::string route_label(Route route) {
  std::string label(to_string(route));
  switch (route) {
    case Route::ggml_mmvq:
    case Route::ggml_mmq:
    case Route::ggml_mmvf:
    case Route::ggml_mmf:
    case Route::ggml_cublas_f16: label += " sm" + std::to_string(kGgmlComputeCapability); break;
    default: break;
  }
  return label;
}

// ---- activations -------------------------------------------------------------------------------

// One activation group as a route quantizes it. A group's contribution to an output is
//   d * (w.scale[0] * dot(q_w, q)[0..16) + w.scale[1] * dot(q_w, q)[16..32)) + w.min * sum.
// The *_ambiguity fields say how far a faithful kernel may legitimately land from these values
// where the route's arithmetic is not reproducible bit for bit (fast-math division, the order of
// summing x, an arch-specific rounding rule): 0 where the value is certain.
struct ActivationGroup {
  int16_t q[kGroup] = {};
  uint32_t q_ambiguous = 0;  // bit j: q[j] may be one step either way
  double d = 0;
  double d_ambiguity = 0;    // |other f16 neighbour - d| when d's f16 rounding is in doubt
  double sum = 0;            // what the weight's min (or unfolded offset) multiplies
  double sum_ambiguity = 0;  // how far `sum` may move when its rounding is in doubt
  bool sum_is_d_times_q = false;  // sum = d * sum(q): it moves with d and with each q
};

float group_amax(const float* x) {
  float amax = 0.0f;
  for (int j = 0; j < kGroup; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}

int32_t sum_of(const int16_t* q) {
  int32_t total = 0;
  for (int j = 0; j < kGroup; ++j) total += q[j];
  return total;
}

// Whether a product p, computed with a relative error up to `rel`, may round to either integer.
bool rounding_in_doubt(float p, double rel) {
  const double a = std::fabs(double(p)), margin = a * rel;
  return rel > 0 && std::isfinite(a) && std::round(a - margin) != std::round(a + margin);
}

// The f16 value nearest to v, and whether v +- the relative error `rel` could round elsewhere.
double half_rounding_ambiguity(double v, double rel) {
  const double low = round_to_half(v - std::fabs(v) * rel), high = round_to_half(v + std::fabs(v) * rel);
  return high - low;
}

// A sum of 32 f32 values in any order is within 31 * u * sum|x| of the exact sum; the f16 value
// nearest to the exact sum, and how far its rounding may move.
void half_sum_of_x(const float* x, ActivationGroup* a) {
  double exact = 0, magnitude = 0;
  for (int j = 0; j < kGroup; ++j) {
    exact += double(x[j]);
    magnitude += std::fabs(double(x[j]));
  }
  const double error = 31.0 * kUnitRoundoffF32 * magnitude;
  a->sum = round_to_half(exact);
  a->sum_ambiguity = round_to_half(exact + error) - round_to_half(exact - error);
}

// qgate: d = amax/127 (f32), 1/d from the unrounded d (f32), q = round-half-even(x * (1/d))
// clamped to [-128, 127]; the stored d is f16(d); the min term uses d * sum(q). Every step is an
// IEEE operation qgate's kernels perform the same way, so nothing is ambiguous.
ActivationGroup quantize_qgate(const float* x) {
  ActivationGroup a;
  const float scale = group_amax(x) / 127.0f;
  const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
  for (int j = 0; j < kGroup; ++j)
    a.q[j] = int16_t(std::clamp(double(std::nearbyint(x[j] * inverse)), -128.0, 127.0));
  a.d = round_to_half(scale);
  a.sum = a.d * double(sum_of(a.q));
  a.sum_is_d_times_q = true;
  return a;
}

// How far ggml's CUDA build may be from IEEE: it compiles with -use_fast_math, so its divisions
// and reciprocals are approximate (a few ulp); its sums of 32 x add in a tree, in f32.
constexpr double kGgmlApproximateUlps = 4.0;

// ggml's CUDA MMQ (quantize.cu quantize_mmq_q8_1): d_inv = 127/amax (f32), q = roundf(x * d_inv),
// d = 1/d_inv (f32). A zero group gives d_inv = inf, x * d_inv = NaN, which the conversion to int
// makes 0, and d = 0. Types whose tile keeps (d, sum) as an f16 pair store f16(d) and f16(sum x).
ActivationGroup quantize_ggml_mmq(const float* x, bool f16_pair) {
  ActivationGroup a;
  const float amax = group_amax(x);
  const float inverse = 127.0f / amax;
  // The approximate division and reciprocal are exact when amax is 2^e or 127 * 2^e (measured on an
  // H200: bit-equal to IEEE there); the ties rows are built that way, so ties are decided exactly.
  int exponent;
  const double significand = std::frexp(double(amax), &exponent);
  const bool exact_division = significand == 0.5 || significand == 127.0 / 128.0;
  const double rel = exact_division ? 0.0 : kGgmlApproximateUlps * 0x1p-23;
  for (int j = 0; j < kGroup; ++j) {
    const float product = x[j] * inverse;
    a.q[j] = std::isnan(product) ? int16_t(0) : int16_t(std::round(product));
    if (rounding_in_doubt(product, rel)) a.q_ambiguous |= 1u << j;
  }
  const float d = 1.0f / inverse;
  if (f16_pair) {
    a.d = round_to_half(d);
    a.d_ambiguity = half_rounding_ambiguity(d, rel);
    half_sum_of_x(x, &a);
  } else {
    a.d = d;
  }
  return a;
}

// Types for which ggml's MMQ activation tile holds (d, sum) as an f16 pair (mmq.cuh
// mmq_get_q8_1_ds_layout: DS4); the others keep d in f32 (D4).
bool ggml_mmq_f16_pair(int32_t type) {
  return type == q4_0 || type == q4_1 || type == q5_1 || type == q4_K || type == q5_K;
}

// ggml's CUDA MMVQ (quantize.cu quantize_q8_1, for every type): d = amax/127 (f32), q = roundf(x/d)
// with both divisions approximate, (f16(d), f16(sum of the f32 x)) stored as a pair; q comes from
// the unrounded d, the dots use the f16 d. The legacy types' offsets and mins multiply the f16 sum;
// the K-quants' mins multiply d * sum(q) (vecdotq.cuh vec_dot_q4_K_q8_1_impl_vmmq).
ActivationGroup quantize_ggml_mmvq(const float* x, int32_t type) {
  ActivationGroup a;
  const float amax = group_amax(x);
  const float d = amax / 127.0f;
  // amax = 127 * 2^e makes d = 2^e and x/d a product by a power of two: exact however it is
  // evaluated. Elsewhere x/d carries the errors of two approximate divisions (measured on an H200,
  // nvcc -use_fast_math for sm_90, 4M random groups: amax/127 within 1 ulp of IEEE, x/d within 3
  // ulp, every q that differed within the 8 ulp allowed here; the ties rows bit-equal to IEEE).
  int exponent;
  const bool exact_division = std::frexp(double(amax), &exponent) == 127.0 / 128.0;
  const double rel_q = exact_division ? 0.0 : 2 * kGgmlApproximateUlps * 0x1p-23;
  const double rel_d = exact_division ? 0.0 : kGgmlApproximateUlps * 0x1p-23;
  for (int j = 0; j < kGroup; ++j) {
    if (amax == 0.0f) break;
    const float quotient = x[j] / d;
    a.q[j] = int16_t(std::round(quotient));
    if (rounding_in_doubt(quotient, rel_q)) a.q_ambiguous |= 1u << j;
  }
  a.d = round_to_half(d);
  a.d_ambiguity = half_rounding_ambiguity(d, rel_d);
  if (type == q4_K || type == q5_K) {
    a.sum = a.d * double(sum_of(a.q));
    a.sum_is_d_times_q = true;
  } else {
    half_sum_of_x(x, &a);
  }
  return a;
}

// ggml-cpu's q8_0 and q8_1 (ggml-quants.c quantize_row_q8_0_ref / _q8_1_ref): d = amax/127 (f32),
// q = roundf(x * (1/d)), stored f16(d); q8_1 also stores s = f16(d * sum(q)) with the f32 d. The x86
// AVX2 quantizers multiply by 127/amax and round half to even (arch/x86/quants.c): where the two
// rules give different q, either is faithful.
ActivationGroup quantize_ggml_cpu_q8_0(const float* x, bool keep_sum) {
  ActivationGroup a;
  const float amax = group_amax(x);
  const float d = amax / 127.0f;
  const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
  const float x86_inverse = amax != 0.0f ? 127.0f / amax : 0.0f;
  int32_t ambiguous_steps = 0;
  for (int j = 0; j < kGroup; ++j) {
    a.q[j] = int16_t(std::round(x[j] * inverse));
    if (int16_t(std::nearbyint(x[j] * x86_inverse)) != a.q[j]) {
      a.q_ambiguous |= 1u << j;
      ++ambiguous_steps;
    }
  }
  a.d = round_to_half(d);
  if (keep_sum) {
    const int32_t total = sum_of(a.q);
    auto stored_sum = [d](int32_t s) { return round_to_half(double(float(s) * d)); };
    a.sum = stored_sum(total);
    a.sum_ambiguity = std::max(std::fabs(stored_sum(total + ambiguous_steps) - a.sum),
                               std::fabs(stored_sum(total - ambiguous_steps) - a.sum));
  }
  return a;
}

// ggml-cpu's q8_K (ggml-quants.c quantize_row_q8_K_ref, which x86 uses too): per 256 values, max =
// the x of largest |x| (the first on equal |x|), iscale = -127/max, q = min(127, nearest(iscale*x))
// with ties to even, d = 1/iscale kept in f32; the mins multiply d * sum(q) (its bsums). The
// compiler may fuse iscale*x into the rounding's addition: a product within an ulp of n + 1/2 may
// round either way.
void quantize_ggml_cpu_q8_K(const float* x, ActivationGroup* groups) {
  constexpr int kSuper = 8 * kGroup;
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kSuper; ++j)
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  const float iscale = amax != 0.0f ? -127.0f / max : 0.0f;
  const float d = amax != 0.0f ? 1.0f / iscale : 0.0f;
  for (int g = 0; g < 8; ++g) {
    ActivationGroup& a = groups[g];
    a = ActivationGroup{};
    for (int j = 0; j < kGroup && amax != 0.0f; ++j) {
      const float product = iscale * x[g * kGroup + j];
      a.q[j] = int16_t(std::min(127.0f, std::nearbyint(product)));
      if (rounding_in_doubt(product, 2 * 0x1p-24)) a.q_ambiguous |= 1u << j;
    }
    a.d = d;
    a.sum = a.d * double(sum_of(a.q));
    a.sum_is_d_times_q = true;
  }
}

// Every activation group of the problem, [nt][k/32], as `route` quantizes it.
std::vector<ActivationGroup> quantize_activations(Route route, const GemmProblem& p) {
  const int64_t groups = p.k / kGroup;
  std::vector<ActivationGroup> act(size_t(p.nt * groups));
  for (int64_t t = 0; t < p.nt; ++t) {
    const float* xt = p.x + t * p.k;
    ActivationGroup* at = act.data() + t * groups;
    if (route == Route::ggml_cpu_vec_dot && is_k_quant(p.type)) {
      for (int64_t g = 0; g < groups; g += 8) quantize_ggml_cpu_q8_K(xt + g * kGroup, at + g);
      continue;
    }
    for (int64_t g = 0; g < groups; ++g) {
      const float* x = xt + g * kGroup;
      switch (route) {
        case Route::ggml_mmq: at[g] = quantize_ggml_mmq(x, ggml_mmq_f16_pair(p.type)); break;
        case Route::ggml_mmvq: at[g] = quantize_ggml_mmvq(x, p.type); break;
        case Route::ggml_cpu_vec_dot: at[g] = quantize_ggml_cpu_q8_0(x, p.type == q4_1 || p.type == q5_1); break;
        default: at[g] = quantize_qgate(x); break;
      }
    }
  }
  return act;
}

// ---- weights -----------------------------------------------------------------------------------

// One weight group as a route splits it, with the f16 rounding of scale products the route forms.
struct WeightGroup {
  int16_t q[kGroup];
  double scale[2] = {0, 0};
  double scale_error[2] = {0, 0};  // the largest error of the route's f16 rounding of scale[h]
  double min = 0;
  double min_error = 0;            // likewise for min
};

// Every route folds q6_K's 32 into signed integers and keeps q4_1/q5_1/K-quant values unsigned with
// a min. The legacy offsets (q4_0's 8, q5_0's 16) are folded too, except by ggml's MMVQ, which
// multiplies them into the activations' f16 sum. ggml's MMQ tile holds the q4_K/q5_K sub-block scale
// and min as f16 products (mmq-load-tiles.cuh load_tiles_q4_K): the profile keeps the exact products
// and charges the rounding to the slack, so a kernel that keeps them in f32 is faithful too.
WeightGroup split_weight(Route route, int32_t type, const StoredGroup& s) {
  WeightGroup w;
  const double d = half_value(s.d), m = half_value(s.m);
  const bool fold_offsets = route != Route::ggml_mmvq;
  int32_t offset = 0;
  switch (type) {
    case q4_0: offset = fold_offsets ? 8 : 0; break;
    case q5_0: offset = fold_offsets ? 16 : 0; break;
    case q6_K: offset = 32; break;
    default: break;
  }
  for (int j = 0; j < kGroup; ++j) w.q[j] = int16_t(s.stored[j] - offset);
  switch (type) {
    case q4_0:
    case q5_0:
      w.scale[0] = w.scale[1] = d;
      if (!fold_offsets) w.min = -d * (type == q4_0 ? 8 : 16);
      break;
    case q4_1:
    case q5_1:
      w.scale[0] = w.scale[1] = d;
      w.min = m;
      break;
    case q4_K:
    case q5_K:
      w.scale[0] = w.scale[1] = d * s.scale[0];
      w.min = -(m * s.min);
      if (route == Route::ggml_mmq) {
        w.scale_error[0] = w.scale_error[1] = half_rounding_error(w.scale[0]);
        w.min_error = half_rounding_error(w.min);
      }
      break;
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

// ---- the arithmetic of a quantized route -------------------------------------------------------

// How a route's kernel groups a 32-group's integer products before they meet f32 arithmetic. Each
// part's scaled sum is one term of the f32 sum; the slack charges f32 roundings on |each term|, so a
// partition at least as fine as the kernel's gives a valid bound.
enum class Partition {
  whole,                 // ggml-cpu legacy vec_dot: one int sum per block
  halves,                // qgate, ggml MMQ: elements 0..15 and 16..31
  interleaved_halves,    // ggml MMVQ q4_0..q5_1: a thread takes 8t..8t+7 and 16+8t..16+8t+7
  runs_of_8,             // ggml MMVQ q8_0: 4 threads of 8 consecutive values
  interleaved_quarters,  // ggml MMVQ q4_K/q5_K: 4p..4p+3 and 16+4p..16+4p+3
  runs_of_4,             // ggml MMVQ q6_K: 4 consecutive values per scale and call
  lanes_of_8,            // ggml-cpu K-quants: 8 int32 lanes, element j in lane j % 8
};

int part_of(Partition partition, int j) {
  switch (partition) {
    case Partition::whole: return 0;
    case Partition::halves: return j / 16;
    case Partition::interleaved_halves: return (j % 16) / 8;
    case Partition::runs_of_8: return j / 8;
    case Partition::interleaved_quarters: return (j % 16) / 4;
    case Partition::runs_of_4: return j / 4;
    case Partition::lanes_of_8: return j % 8;
  }
  return 0;
}

struct Arithmetic {
  Partition partition = Partition::halves;
  // The longest chain of f32 roundings any term passes through, per group and in all: the parts of
  // every group can be added in any order (chain_per_group * groups), plus the roundings inside a
  // term (scale products, the integer dot times the scale, the min term).
  double chain_per_group = 2;
  double chain_extra = 4;
  // ggml MMVQ q4_1/q5_1 (vec_dot_q4_1_q8_1_impl): __hmul2 forms f16(d_w * d_a) and f16(m * sum).
  bool half_scale_products = false;
  // The min multiplies d * sum(q) part by part (ggml MMVQ K-quants), not once per group.
  bool min_by_part = false;
};

Arithmetic arithmetic_of(Route route, int32_t type) {
  Arithmetic a;
  switch (route) {
    case Route::ggml_mmq:
      // ggml's approximate division and reciprocal add a few ulp to the activation scale.
      a.chain_extra = 4 + 2 * kGgmlApproximateUlps;
      break;
    case Route::ggml_mmvq:
      a.chain_extra = 8;
      switch (type) {
        case q8_0: a.partition = Partition::runs_of_8; a.chain_per_group = 4; break;
        case q4_K:
        case q5_K: a.partition = Partition::interleaved_quarters; a.chain_per_group = 4; a.min_by_part = true; break;
        case q6_K: a.partition = Partition::runs_of_4; a.chain_per_group = 8; break;
        default:
          a.partition = Partition::interleaved_halves;
          a.half_scale_products = type == q4_1 || type == q5_1;
          break;
      }
      break;
    case Route::ggml_cpu_vec_dot:
      a.partition = is_k_quant(type) ? Partition::lanes_of_8 : Partition::whole;
      a.chain_extra = 8;
      break;
    default: break;
  }
  return a;
}

// One group's contribution to one output element, and what its slack must cover.
struct GroupTerms {
  double value = 0;
  double magnitude = 0;        // sum |terms| entering f32 arithmetic
  double half_rounding = 0;    // f16 roundings of the route's intermediate scale products
  double ambiguity = 0;        // what the route leaves open (a q step, the other f16 neighbour)
};

GroupTerms group_terms(const Arithmetic& arith, const ActivationGroup& a, const WeightGroup& w) {
  GroupTerms r;
  int64_t half_dot[2] = {0, 0};
  double part_value[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int32_t part_q_sum[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int32_t q_sum = 0;
  for (int j = 0; j < kGroup; ++j) {
    const int32_t product = int32_t(w.q[j]) * a.q[j];
    const int part = part_of(arith.partition, j);
    half_dot[j / 16] += product;
    part_value[part] += w.scale[j / 16] * product;
    part_q_sum[part] += a.q[j];
    q_sum += a.q[j];
  }
  const double dot_term = a.d * (w.scale[0] * double(half_dot[0]) + w.scale[1] * double(half_dot[1]));
  const double min_term = w.min * a.sum;
  r.value = dot_term + min_term;

  double scaled_parts = 0;
  for (double v : part_value) scaled_parts += std::fabs(v);
  r.magnitude = std::fabs(a.d) * scaled_parts;
  if (arith.min_by_part) {
    double parts = 0;
    for (int32_t s : part_q_sum) parts += std::fabs(double(s));
    r.magnitude += std::fabs(w.min * a.d) * parts;
  } else {
    r.magnitude += std::fabs(min_term);
  }

  // Intermediate f16 roundings: the route's scale products (ggml MMQ K-quants) and ggml MMVQ's
  // half products f16(d_w * d_a) and f16(m * sum).
  const double scaled_dots = std::fabs(w.scale[0] * double(half_dot[0])) + std::fabs(w.scale[1] * double(half_dot[1]));
  r.half_rounding = std::fabs(a.d) * (std::fabs(double(half_dot[0])) * w.scale_error[0] +
                                      std::fabs(double(half_dot[1])) * w.scale_error[1]) +
                    std::fabs(a.sum) * w.min_error;
  if (arith.half_scale_products)
    r.half_rounding += std::fabs(double(half_dot[0] + half_dot[1])) * half_rounding_error(w.scale[0] * a.d) +
                       half_rounding_error(min_term);

  // What the profile leaves open: a q one step off, the neighbouring f16 d or sum.
  const double min_per_q = a.sum_is_d_times_q ? std::fabs(w.min) : 0.0;
  if (a.q_ambiguous) {
    double steps = 0;
    for (int j = 0; j < kGroup; ++j)
      if (a.q_ambiguous >> j & 1u) steps += std::fabs(w.q[j] * w.scale[j / 16]) + min_per_q;
    r.ambiguity += steps * (std::fabs(a.d) + a.d_ambiguity);
  }
  r.ambiguity += a.d_ambiguity * (scaled_dots + min_per_q * std::fabs(double(q_sum))) + std::fabs(w.min) * a.sum_ambiguity;
  return r;
}

// A quantized route whose expectation follows the route's own arithmetic.
Expectation expect_quantized(Route route, const GemmProblem& p, int threads) {
  const int64_t groups = p.k / kGroup;
  const std::vector<ActivationGroup> act = quantize_activations(route, p);
  const Arithmetic arith = arithmetic_of(route, p.type);
  // The terms are added into one f32 sum in any order: |y - ref| <= gamma_n * sum|terms|, n the
  // longest chain of roundings from a term to the output (Higham, Accuracy and Stability of
  // Numerical Algorithms, 2nd ed., section 3.1).
  const double n = arith.chain_per_group * double(groups) + arith.chain_extra;
  Expectation e;
  e.route = route_label(route);
  e.rtol = gamma(n, kUnitRoundoffF32);
  e.y.assign(size_t(p.nt * p.od), 0.0);
  e.slack.assign(e.y.size(), 0.0);
  for_each_row(p.od, threads, [&](int64_t o) {
    const std::vector<StoredGroup> stored = decode(p, o);
    std::vector<WeightGroup> w(stored.size());
    for (size_t g = 0; g < stored.size(); ++g) w[g] = split_weight(route, p.type, stored[g]);
    for (int64_t t = 0; t < p.nt; ++t) {
      double y = 0, magnitude = 0, budget = 0;
      for (int64_t g = 0; g < groups; ++g) {
        const GroupTerms terms = group_terms(arith, act[size_t(t * groups + g)], w[size_t(g)]);
        y += terms.value;
        magnitude += terms.magnitude;
        budget += terms.half_rounding + terms.ambiguity;
      }
      const size_t i = size_t(t * p.od + o);
      e.y[i] = y;
      e.slack[i] = e.rtol * magnitude + budget;
    }
  });
  return e;
}

// ---- unknown lineage, quantized path ------------------------------------------------------------

// The offset or min a lineage may apply through an f16 sum of the activations: q4_0's 8 d, q5_0's
// 16 d, q6_K's 32 d*sc, q4_1/q5_1's m, the K-quants' dmin*m.
double offset_through_sum(int32_t type, const StoredGroup& s) {
  const double d = half_value(s.d), m = half_value(s.m);
  switch (type) {
    case q4_0: return 8 * std::fabs(d);
    case q5_0: return 16 * std::fabs(d);
    case q6_K: return 32 * std::fabs(d) * std::max(std::abs(s.scale[0]), std::abs(s.scale[1]));
    case q4_1:
    case q5_1: return std::fabs(m);
    case q4_K:
    case q5_K: return std::fabs(m * s.min);
    default: return 0;
  }
}

// The exact product, with the worst case of 8-bit activations per 32 values as the slack: per
// group, half a quantization step times sum|w|, the activation scale and the scale products kept in
// f16, an offset applied through an f16 sum of x, and f32 arithmetic (docs/parity.md).
Expectation expect_unknown_mmq(const GemmProblem& p, int threads) {
  const int64_t groups = p.k / kGroup;
  Expectation e;
  e.route = route_label(Route::unknown_mmq);
  e.rtol = gamma(4.0 * double(groups) + 16, kUnitRoundoffF32);
  e.y = exact_product(p, threads);
  e.slack.assign(e.y.size(), 0.0);
  for_each_row(p.od, threads, [&](int64_t o) {
    const std::vector<StoredGroup> stored = decode(p, o);
    std::vector<WeightGroup> w(stored.size());
    for (size_t g = 0; g < stored.size(); ++g) w[g] = split_weight(Route::qgate_mmq, p.type, stored[g]);
    for (int64_t t = 0; t < p.nt; ++t) {
      double slack = 0;
      for (int64_t g = 0; g < groups; ++g) {
        const float* x = p.x + t * p.k + g * kGroup;
        const WeightGroup& wg = w[size_t(g)];
        const double d = double(group_amax(x)) / 127.0;
        if (d == 0) continue;
        const double d_error = half_rounding_error(d);
        double abs_w = 0, quantized_abs_q = 0, scaled_products = 0, abs_x = 0;
        for (int j = 0; j < kGroup; ++j) {
          const double weight = std::fabs(wg.q[j] * wg.scale[j / 16]) + std::fabs(wg.min);
          const double ax = std::fabs(double(x[j]));
          abs_w += weight;
          quantized_abs_q += weight * (ax / d + 0.5);  // |q_j| <= |x_j|/d + 1/2
          scaled_products += weight * (ax + d / 2);    // |w_j * dequantized x_j|
          abs_x += ax;
        }
        slack += d / 2 * abs_w                                   // rounding x/d to an integer
                 + d_error * quantized_abs_q                     // d kept in f16
                 + 2 * kUnitRoundoffF16 * scaled_products        // two f16 scale products per term
                 + offset_through_sum(p.type, stored[size_t(g)]) *  // an f16 sum of x
                       (half_rounding_error(abs_x) + 31 * kUnitRoundoffF32 * abs_x)
                 + e.rtol * scaled_products;                     // f32 arithmetic
      }
      e.slack[size_t(t * p.od + o)] = slack;
    }
  });
  return e;
}

// ---- f16 routes --------------------------------------------------------------------------------

// Partial sums of a run of products accumulated in f16: the rounding error of each partial sum
// (and, when products are rounded too, of each product), squared and summed.
struct HalfAccumulation {
  double squared_errors = 0;
  void add_chain(const double* products, int64_t count, int64_t stride, bool products_rounded,
                 double (*rounding_error)(double)) {
    double partial = 0;
    for (int64_t i = 0; i < count; ++i) {
      const double p = products[i * stride];
      if (products_rounded) squared_errors += rounding_error(p) * rounding_error(p);
      partial += p;
      squared_errors += rounding_error(partial) * rounding_error(partial);
    }
  }
};

// ggml's MMVF (mmvf.cu, default precision): thread t of a block of `block_size` threads keeps a
// half2 accumulator over element pairs t, t + block_size, ...; ggml picks the smallest multiple of
// 32 up to 256 that minimises the iterations ceil(k / (2 * block_size)).
int64_t ggml_mmvf_block_size(int64_t k) {
  int64_t best = 32, best_iterations = (k + 63) / 64;
  for (int64_t size = 64; size <= 256; size += 32) {
    const int64_t iterations = (k + 2 * size - 1) / (2 * size);
    if (iterations < best_iterations) {
      best_iterations = iterations;
      best = size;
    }
  }
  return best;
}

// cuBLAS with CUBLAS_COMPUTE_16F: products of f16 values are exact inside the tensor core; partial
// sums are f16 and rounded at least once per this many products, in k order (assumed: neither the
// tensor core's internal width nor cuBLAS's kernel choice is documented).
constexpr int64_t kCublasHalfChunk = 4;

// The f16 path: f16 weights (dequantized in f32, then rounded) times f16 activations, the exact
// products summed in f64; the slack is the route's accumulation budget.
Expectation expect_f16_route(Route route, const GemmProblem& p, int threads) {
  Expectation e;
  e.route = route_label(route);
  const bool exact_reference = route == Route::unknown_f16;
  std::vector<double> x16(size_t(p.nt * p.k));
  for (size_t i = 0; i < x16.size(); ++i) x16[i] = round_to_half(double(p.x[i]));
  // f32 accumulation of exact f16 x f16 products, on tensor cores that need not round to nearest:
  // rounding errors of a long sum behave as independent, mean-zero terms (Higham and Mary, SIAM J.
  // Sci. Comput. 41(5), 2019): |y - ref| <= lambda * sqrt(k) * u * sum|products|; u = 2^-23 covers
  // truncating accumulation.
  const double f32_accumulation = kLambda * std::sqrt(double(p.k)) * kUnitTruncationF32;
  switch (route) {
    case Route::ggml_mmvf: e.rtol = gamma(12, kUnitRoundoffF32); break;  // lanes, warps, blocks
    case Route::ggml_cublas_f16: e.rtol = 0; break;  // every sum is f16: the slack is absolute
    default: e.rtol = f32_accumulation; break;
  }
  const int64_t mmvf_block = ggml_mmvf_block_size(p.k);
  e.y.assign(size_t(p.nt * p.od), 0.0);
  e.slack.assign(e.y.size(), 0.0);
  for_each_row(p.od, threads, [&](int64_t o) {
    const std::vector<double> w = dequantized_row(p, o);
    std::vector<double> w16(w.size());
    for (size_t j = 0; j < w.size(); ++j) w16[j] = round_to_half(double(float(w[j])));
    std::vector<double> products(size_t(p.k));
    for (int64_t t = 0; t < p.nt; ++t) {
      const double* xt = x16.data() + t * p.k;
      double y = 0, magnitude = 0;
      for (int64_t j = 0; j < p.k; ++j) {
        products[size_t(j)] = w16[size_t(j)] * xt[j];
        y += products[size_t(j)];
        magnitude += std::fabs(products[size_t(j)]);
      }
      double slack = e.rtol * magnitude;
      HalfAccumulation half;
      if (route == Route::ggml_mmvf) {
        // Each half2 lane: niter f16 products (RN) and niter f16 partial sums (RN), independent.
        for (int64_t start = 0; start < std::min<int64_t>(p.k, 2 * mmvf_block); ++start) {
          const int64_t count = (p.k - start + 2 * mmvf_block - 1) / (2 * mmvf_block);
          half.add_chain(products.data() + start, count, 2 * mmvf_block, true, half_rounding_error);
        }
        slack += kLambda * std::sqrt(half.squared_errors);
      }
      if (route == Route::ggml_cublas_f16 || route == Route::unknown_f16) {
        // A partial sum every kCublasHalfChunk products, each rounded to f16 with an error up to a
        // whole f16 spacing (truncation allowed), independent.
        std::vector<double> chunks;
        for (int64_t j = 0; j < p.k; j += kCublasHalfChunk) {
          double chunk = 0;
          for (int64_t i = j; i < std::min(p.k, j + kCublasHalfChunk); ++i) chunk += products[size_t(i)];
          chunks.push_back(chunk);
        }
        half.add_chain(chunks.data(), int64_t(chunks.size()), 1, false, half_spacing);
        slack += kLambda * std::sqrt(half.squared_errors);
      }
      const size_t i = size_t(t * p.od + o);
      if (exact_reference) {
        // The reference is the exact product: the f16 roundings of both operands are budget too.
        double exact = 0, operand_rounding = 0;
        const float* xf = p.x + t * p.k;
        for (int64_t j = 0; j < p.k; ++j) {
          const double wj = w[size_t(j)], xj = double(xf[j]);
          exact += wj * xj;
          const double w_error = half_rounding_error(wj) + kUnitRoundoffF32 * std::fabs(wj), x_error = half_rounding_error(xj);
          operand_rounding += std::fabs(wj) * x_error + std::fabs(xj) * w_error + w_error * x_error;
        }
        y = exact;
        slack += operand_rounding;
      }
      e.y[i] = y;
      e.slack[i] = slack;
    }
  });
  return e;
}

}  // namespace

std::string_view to_string(Numerics numerics) {
  switch (numerics) {
    case Numerics::qgate: return "qgate";
    case Numerics::ggml: return "ggml";
    case Numerics::ggml_cpu: return "ggml-cpu";
    case Numerics::unknown: return "unknown";
  }
  return "qgate";
}

std::optional<Numerics> parse_numerics(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "qgate") return Numerics::qgate;
  if (lower == "ggml") return Numerics::ggml;
  if (lower == "ggml-cpu" || lower == "ggml_cpu") return Numerics::ggml_cpu;
  if (lower == "unknown") return Numerics::unknown;
  return std::nullopt;
}

std::string_view to_string(Route route) {
  switch (route) {
    case Route::qgate_mmq: return "qgate/mmq";
    case Route::qgate_f16: return "qgate/f16";
    case Route::ggml_mmvq: return "ggml/mmvq";
    case Route::ggml_mmq: return "ggml/mmq";
    case Route::ggml_mmvf: return "ggml/mmvf";
    case Route::ggml_mmf: return "ggml/mmf";
    case Route::ggml_cublas_f16: return "ggml/cublas-f16";
    case Route::ggml_cpu_vec_dot: return "ggml-cpu/vec_dot";
    case Route::ggml_cpu_f16: return "ggml-cpu/f16";
    case Route::unknown_mmq: return "unknown/mmq";
    case Route::unknown_f16: return "unknown/f16";
  }
  return "qgate/mmq";
}

Route mmq_route(Numerics numerics, const GemmProblem& p) {
  switch (numerics) {
    case Numerics::ggml: return p.nt <= kGgmlMmvqMaxTokens ? Route::ggml_mmvq : Route::ggml_mmq;
    case Numerics::ggml_cpu: return Route::ggml_cpu_vec_dot;
    case Numerics::unknown: return Route::unknown_mmq;
    case Numerics::qgate: break;
  }
  return Route::qgate_mmq;
}

Route f16_route(Numerics numerics, const GemmProblem& p) {
  switch (numerics) {
    case Numerics::ggml:
      if (p.nt == kGgmlMmvfTokens) return Route::ggml_mmvf;
      if (p.nt <= kGgmlMmfMaxTokens && p.k % 64 == 0 && p.od % 32 == 0) return Route::ggml_mmf;
      return Route::ggml_cublas_f16;
    case Numerics::ggml_cpu: return Route::ggml_cpu_f16;
    case Numerics::unknown: return Route::unknown_f16;
    case Numerics::qgate: break;
  }
  return Route::qgate_f16;
}

Expectation expect_route(Route route, const GemmProblem& p, int threads) {
  check_problem(p);
  switch (route) {
    case Route::qgate_mmq:
    case Route::ggml_mmvq:
    case Route::ggml_mmq:
    case Route::ggml_cpu_vec_dot: return expect_quantized(route, p, threads);
    case Route::unknown_mmq: return expect_unknown_mmq(p, threads);
    default: return expect_f16_route(route, p, threads);
  }
}

Expectation expect_mmq(Numerics numerics, const GemmProblem& p, int threads) {
  return expect_route(mmq_route(numerics, p), p, threads);
}

Expectation expect_f16(Numerics numerics, const GemmProblem& p, int threads) {
  return expect_route(f16_route(numerics, p), p, threads);
}

Expectation expect_f16(const GemmProblem& p, int threads) { return expect_f16(Numerics::qgate, p, threads); }

std::vector<double> exact_product(const GemmProblem& p, int threads) {
  check_problem(p);
  std::vector<double> y(size_t(p.nt * p.od), 0.0);
  for_each_row(p.od, threads, [&](int64_t o) {
    const std::vector<double> w = dequantized_row(p, o);
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
