// The parity reference, from the format specification: hand-built blocks decode to the values
// the format defines; the qgate profile agrees with qgate's own MMQ reference; each profile picks the
// route its library dispatches to; kernels simulated in f32 from each library's arithmetic pass their
// route's error budget, pass it when they round less than the route, and fail it when they round
// more; a one-block error fails every profile.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <random>
#include <vector>

#include "reference/block_decode.h"
#include "detail/gemm_backend.h"
#include "qgate/quant/half.h"
#include "qgate/quant/quantize.h"
#include "qgate/reference/parity_reference.h"

namespace qgate::reference {
namespace {

using quant::WeightType;

std::vector<float> uniform(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

GemmProblem problem(WeightType type, const std::vector<uint8_t>& w, const std::vector<float>& x, int64_t od,
                    int64_t k) {
  return GemmProblem{int32_t(type), od, k, int64_t(x.size()) / k, w.data(), x.data()};
}

// ---- kernels simulated in f32 --------------------------------------------------------------------
// Each re-evaluates one library's arithmetic in f32, as docs/parity.md records it (ggml at
// d99724f2), written apart from the reference's f64 evaluation. A Variant changes one rounding: a
// kernel that rounds less than its route must pass, one that rounds more must fail.

enum class Variant {
  faithful,
  k_scale_products_in_f32,  // ggml MMQ q4_K/q5_K: d*sc and dmin*m kept in f32 instead of f16
  activation_d_in_f16,      // ggml MMQ q5_0/q8_0/q6_K: the f32 activation d rounded to f16
  f16_accumulator,          // the f32 sum of a kernel's terms rounded to f16 after every term
};

float f16(float v) { return quant::round_to_f16(v); }

struct Accumulator {
  Variant variant;
  float sum = 0.0f;
  void add(float term) {
    sum += term;
    if (variant == Variant::f16_accumulator) sum = f16(sum);
  }
};

// An activation group as a kernel holds it: the integers, the scale its dots use, and the sum its
// min or offset multiplies.
struct KernelActivation {
  int q[32] = {};
  float d = 0.0f;
  float sum = 0.0f;
};

float amax_of(const float* x, int n) {
  float amax = 0.0f;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}

// A warp's butterfly sum of 32 lanes, as ggml's warp_reduce_sum adds them.
float warp_sum(const float* x) {
  float lanes[32];
  std::copy(x, x + 32, lanes);
  for (int offset = 16; offset > 0; offset /= 2) {
    float next[32];
    for (int i = 0; i < 32; ++i) next[i] = lanes[i] + lanes[i ^ offset];
    std::copy(next, next + 32, lanes);
  }
  return lanes[0];
}

// ggml CUDA MMQ: d_inv = 127/amax, q = roundf(x * d_inv), d = 1/d_inv; (f16 d, f16 sum) or f32 d.
KernelActivation ggml_mmq_activation(const float* x, bool f16_pair, Variant variant) {
  KernelActivation a;
  const float inverse = 127.0f / amax_of(x, 32);
  for (int j = 0; j < 32; ++j) {
    const float p = x[j] * inverse;
    a.q[j] = std::isnan(p) ? 0 : int(std::round(p));
  }
  a.d = 1.0f / inverse;
  if (f16_pair) {
    a.d = f16(a.d);
    a.sum = f16(warp_sum(x));
  } else if (variant == Variant::activation_d_in_f16) {
    a.d = f16(a.d);
  }
  return a;
}

// ggml CUDA MMVQ (q8_1 for every type): d = amax/127, q = roundf(x/d), (f16 d, f16 sum of x).
KernelActivation ggml_mmvq_activation(const float* x) {
  KernelActivation a;
  const float amax = amax_of(x, 32), d = amax / 127.0f;
  for (int j = 0; j < 32; ++j) a.q[j] = amax == 0.0f ? 0 : int(std::round(x[j] / d));
  a.d = f16(d);
  a.sum = f16(warp_sum(x));
  return a;
}

bool ggml_mmq_keeps_f16_pair(WeightType type) {
  return type == WeightType::q4_0 || type == WeightType::q4_1 || type == WeightType::q5_1 ||
         type == WeightType::q4_K || type == WeightType::q5_K;
}

int legacy_offset(WeightType type) { return type == WeightType::q4_0 ? 8 : type == WeightType::q5_0 ? 16 : 0; }

std::vector<detail::StoredGroup> stored_row(WeightType type, const std::vector<uint8_t>& blocks, int64_t row,
                                            int64_t k) {
  std::vector<detail::StoredGroup> groups(size_t(k / 32));
  detail::decode_row(int32_t(type), blocks.data() + size_t(row) * quant::row_bytes(type, k), k, groups.data());
  return groups;
}

// One kernel term per 32-group (or per part of one), evaluated for every output element.
template <typename GroupTerms>
std::vector<float> simulate(WeightType type, const std::vector<uint8_t>& blocks, int64_t od, int64_t k,
                            const std::vector<float>& x, Variant variant, GroupTerms terms) {
  const int64_t nt = int64_t(x.size()) / k;
  std::vector<float> y(size_t(nt * od));
  for (int64_t o = 0; o < od; ++o) {
    const auto groups = stored_row(type, blocks, o, k);
    for (int64_t t = 0; t < nt; ++t) {
      Accumulator acc{variant};
      for (int64_t g = 0; g < k / 32; ++g) terms(groups[size_t(g)], x.data() + t * k + g * 32, acc);
      y[size_t(t * od + o)] = acc.sum;
    }
  }
  return y;
}

std::vector<float> simulate_ggml_mmq(WeightType type, const std::vector<uint8_t>& blocks, int64_t od, int64_t k,
                                     const std::vector<float>& x, Variant variant) {
  return simulate(type, blocks, od, k, x, variant, [&](const detail::StoredGroup& s, const float* xg, Accumulator& acc) {
    const KernelActivation a = ggml_mmq_activation(xg, ggml_mmq_keeps_f16_pair(type), variant);
    const float d = quant::f16_to_f32(s.d), m = quant::f16_to_f32(s.m);
    int dot[2] = {0, 0};
    const int offset = type == WeightType::q6_K ? 32 : legacy_offset(type);
    for (int j = 0; j < 32; ++j) dot[j / 16] += (s.stored[j] - offset) * a.q[j];
    switch (type) {
      case WeightType::q4_1:
      case WeightType::q5_1: acc.add((d * a.d) * float(dot[0] + dot[1]) + m * a.sum); break;
      case WeightType::q4_K:
      case WeightType::q5_K: {
        float scale = d * float(s.scale[0]), min = -(m * float(s.min));
        if (variant != Variant::k_scale_products_in_f32) {
          scale = f16(scale);
          min = f16(min);
        }
        acc.add(scale * (a.d * float(dot[0] + dot[1])) + min * a.sum);
        break;
      }
      case WeightType::q6_K:
        acc.add(a.d * (d * float(s.scale[0] * dot[0] + s.scale[1] * dot[1])));
        break;
      default: acc.add(d * (a.d * float(dot[0] + dot[1]))); break;
    }
  });
}

std::vector<float> simulate_ggml_mmvq(WeightType type, const std::vector<uint8_t>& blocks, int64_t od, int64_t k,
                                      const std::vector<float>& x, Variant variant) {
  return simulate(type, blocks, od, k, x, variant, [&](const detail::StoredGroup& s, const float* xg, Accumulator& acc) {
    const KernelActivation a = ggml_mmvq_activation(xg);
    const float d = quant::f16_to_f32(s.d), m = quant::f16_to_f32(s.m);
    // The integer dot of one thread's values: those j with part(j) == p.
    auto dot = [&](auto part, int p, int offset) {
      int sum = 0;
      for (int j = 0; j < 32; ++j)
        if (part(j) == p) sum += (s.stored[j] - offset) * a.q[j];
      return sum;
    };
    auto thread_half = [](int j) { return (j % 16) / 8; };
    switch (type) {
      case WeightType::q4_0:
      case WeightType::q5_0:  // the offset through the f16 sum: half of it per thread
        for (int p = 0; p < 2; ++p)
          acc.add(d * (float(dot(thread_half, p, 0)) * a.d - float(legacy_offset(type) / 2) * a.sum));
        break;
      case WeightType::q4_1:
      case WeightType::q5_1: {  // half products f16(d_w * d_a) and f16(m * sum)
        const float dd = f16(d * a.d), ms = f16(m * a.sum);
        for (int p = 0; p < 2; ++p) acc.add(float(dot(thread_half, p, 0)) * dd + ms / 2);
        break;
      }
      case WeightType::q8_0:
        for (int p = 0; p < 4; ++p) acc.add((d * a.d) * float(dot([](int j) { return j / 8; }, p, 0)));
        break;
      case WeightType::q4_K:
      case WeightType::q5_K: {  // per thread: d8*(dot*sc) and d8*(sum(q)*m), then d and dmin
        auto quarter = [](int j) { return (j % 16) / 4; };
        for (int p = 0; p < 4; ++p) {
          int q_sum = 0;
          for (int j = 0; j < 32; ++j)
            if (quarter(j) == p) q_sum += a.q[j];
          const float sum_d = a.d * float(dot(quarter, p, 0) * s.scale[0]);
          const float sum_m = a.d * float(q_sum * s.min);
          acc.add(d * sum_d - m * sum_m);
        }
        break;
      }
      case WeightType::q6_K:
        for (int p = 0; p < 8; ++p)
          acc.add(d * (a.d * float(dot([](int j) { return j / 4; }, p, 32) * s.scale[p / 4])));
        break;
    }
  });
}

// ggml-cpu's generic vec_dots: q8_0 / q8_1 per 32 for the legacy types, q8_K per 256 for the
// K-quants, all in f32.
std::vector<float> simulate_ggml_cpu(WeightType type, const std::vector<uint8_t>& blocks, int64_t od, int64_t k,
                                     const std::vector<float>& x) {
  const int64_t nt = int64_t(x.size()) / k;
  const bool k_quant = type == WeightType::q4_K || type == WeightType::q5_K || type == WeightType::q6_K;
  std::vector<float> y(size_t(nt * od));
  for (int64_t o = 0; o < od; ++o) {
    const auto groups = stored_row(type, blocks, o, k);
    for (int64_t t = 0; t < nt; ++t) {
      const float* xt = x.data() + t * k;
      float sumf = 0.0f, lane_sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      if (!k_quant) {
        for (int64_t g = 0; g < k / 32; ++g) {
          const detail::StoredGroup& s = groups[size_t(g)];
          const float* xg = xt + g * 32;
          const float d_a = amax_of(xg, 32) / 127.0f, inverse = d_a != 0.0f ? 1.0f / d_a : 0.0f;
          int q[32], q_sum = 0, sumi = 0;
          for (int j = 0; j < 32; ++j) {
            q[j] = int(std::round(xg[j] * inverse));
            q_sum += q[j];
            sumi += (s.stored[j] - legacy_offset(type)) * q[j];
          }
          const float dw = quant::f16_to_f32(s.d), da = f16(d_a);
          switch (type) {
            case WeightType::q4_0: sumf += float(sumi) * dw * da; break;
            case WeightType::q4_1:
            case WeightType::q5_1: sumf += (dw * da) * float(sumi) + quant::f16_to_f32(s.m) * f16(float(q_sum) * d_a); break;
            case WeightType::q5_0: sumf += (dw * da) * float(sumi); break;
            default: sumf += float(sumi) * (dw * da); break;
          }
        }
      } else {
        for (int64_t b = 0; b < k / 256; ++b) {
          const float* xb = xt + b * 256;
          float amax = 0.0f, max = 0.0f;
          for (int j = 0; j < 256; ++j)
            if (std::fabs(xb[j]) > amax) {
              amax = std::fabs(xb[j]);
              max = xb[j];
            }
          if (amax == 0.0f) continue;
          const float iscale = -127.0f / max, d_a = 1.0f / iscale;
          int32_t lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0}, min_sum = 0;
          for (int g = 0; g < 8; ++g) {
            const detail::StoredGroup& s = groups[size_t(b * 8 + g)];
            for (int j = 0; j < 32; ++j) {
              const int q = std::min(127, int(std::nearbyint(iscale * xb[g * 32 + j])));
              const int w = type == WeightType::q6_K ? s.stored[j] - 32 : s.stored[j];
              lanes[j % 8] += s.scale[j / 16] * w * q;
              min_sum += s.min * q;
            }
          }
          const float d = quant::f16_to_f32(groups[size_t(b * 8)].d) * d_a;
          for (int l = 0; l < 8; ++l) lane_sums[l] += d * float(lanes[l]);
          sumf -= (quant::f16_to_f32(groups[size_t(b * 8)].m) * d_a) * float(min_sum);
        }
        for (float s : lane_sums) sumf += s;
      }
      y[size_t(t * od + o)] = sumf;
    }
  }
  return y;
}

// f16 weights times f16 activations. Half-precision accumulation in chunks of `chunk` products (in
// k order, as a tensor core with f16 accumulators), or f32 accumulation when chunk is 0.
std::vector<float> simulate_f16_gemm(WeightType type, const std::vector<uint8_t>& blocks, int64_t od, int64_t k,
                                     const std::vector<float>& x, int chunk) {
  const int64_t nt = int64_t(x.size()) / k;
  std::vector<float> y(size_t(nt * od));
  std::vector<float> w(static_cast<size_t>(k));
  for (int64_t o = 0; o < od; ++o) {
    quant::dequantize_row(type, blocks.data() + size_t(o) * quant::row_bytes(type, k), w.data(), k);
    for (int64_t t = 0; t < nt; ++t) {
      float sum = 0.0f, partial = 0.0f;
      for (int64_t j = 0; j < k; ++j) {
        const float product = f16(w[size_t(j)]) * f16(x[size_t(t * k + j)]);
        if (chunk == 0) {
          sum += product;
          continue;
        }
        partial += product;
        if ((j + 1) % chunk == 0) {
          sum = f16(sum + partial);
          partial = 0.0f;
        }
      }
      y[size_t(t * od + o)] = sum;
    }
  }
  return y;
}

// ggml's MMVF at one token: thread t of `block` threads keeps a half2 sum over pairs t, t+block, ...
std::vector<float> simulate_ggml_mmvf(WeightType type, const std::vector<uint8_t>& blocks, int64_t od, int64_t k,
                                      const std::vector<float>& x, int block) {
  std::vector<float> y(static_cast<size_t>(od));
  std::vector<float> w(static_cast<size_t>(k));
  for (int64_t o = 0; o < od; ++o) {
    quant::dequantize_row(type, blocks.data() + size_t(o) * quant::row_bytes(type, k), w.data(), k);
    float total = 0.0f;
    for (int t = 0; t < block; ++t) {
      float lanes[2] = {0.0f, 0.0f};
      for (int64_t pair = t; 2 * pair < k; pair += block)
        for (int l = 0; l < 2; ++l) {
          const int64_t j = 2 * pair + l;
          lanes[l] = f16(lanes[l] + f16(f16(w[size_t(j)]) * f16(x[size_t(j)])));
        }
      total += lanes[0] + lanes[1];
    }
    y[size_t(o)] = total;
  }
  return y;
}

// The worker's rule: element i passes iff |y_i - ref_i| <= atol + slack_i. Returns max over i of
// |y_i - ref_i| / (atol + slack_i): the case passes iff it is <= 1.
double worst_fraction(const std::vector<float>& y, const Expectation& e) {
  double worst = 0;
  for (size_t i = 0; i < y.size(); ++i)
    worst = std::max(worst, std::fabs(double(y[i]) - e.y[i]) / (kAbsoluteTolerance + e.slack[i]));
  return worst;
}

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - double(b[i])));
  return worst;
}

// Rows as the worker's sweep has them: random, a 1e4 outlier in the first block, random times 10.
std::vector<float> mixed_rows(int64_t nt, int64_t k, uint32_t seed) {
  auto x = uniform(size_t(nt * k), seed);
  for (int64_t t = 0; t < nt; ++t) {
    if (t % 3 == 1) x[size_t(t * k + 5 + t % 7)] = 1e4f;
    if (t % 3 == 2)
      for (int64_t j = 0; j < k; ++j) x[size_t(t * k + j)] *= 10.0f;
  }
  return x;
}

constexpr Numerics kEveryProfile[] = {Numerics::qgate, Numerics::ggml, Numerics::ggml_cpu, Numerics::unknown};

TEST(BlockDecode, Q4_0BlockFromItsBytes) {
  // d = 0.5 (f16 0x3800); byte j holds element j (low nibble) and element j + 16 (high nibble).
  uint8_t block[18] = {0x00, 0x38};
  for (int j = 0; j < 16; ++j) block[2 + j] = uint8_t(j | ((15 - j) << 4));
  detail::StoredGroup g;
  detail::decode_row(2, block, 32, &g);
  std::vector<double> w(32);
  detail::dequantize_exact(2, &g, 32, w.data());
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(w[j], 0.5 * (j - 8)) << j;
    EXPECT_EQ(w[16 + j], 0.5 * (15 - j - 8)) << j;
  }
}

TEST(BlockDecode, Q5_1HighBitsAndMin) {
  // d = 1, m = -2 (f16 0xC000), qh bit j gives element j its fifth bit.
  uint8_t block[24] = {0x00, 0x3C, 0x00, 0xC0, 0x01, 0x00, 0x00, 0x80};
  for (int j = 0; j < 16; ++j) block[8 + j] = 0x21;  // low nibbles 1, high nibbles 2
  detail::StoredGroup g;
  detail::decode_row(7, block, 32, &g);
  EXPECT_EQ(g.stored[0], 1 + 16);   // bit 0 of qh
  EXPECT_EQ(g.stored[1], 1);
  EXPECT_EQ(g.stored[16], 2);
  EXPECT_EQ(g.stored[31], 2 + 16);  // bit 31 of qh
  std::vector<double> w(32);
  detail::dequantize_exact(7, &g, 32, w.data());
  EXPECT_EQ(w[0], 17.0 - 2.0);
  EXPECT_EQ(w[16], 0.0);
}

TEST(BlockDecode, HalfConversionsAgreeWithBitLevelOnes) {
  std::mt19937 rng(5);
  for (int i = 0; i < 100000; ++i) {
    const uint16_t bits = uint16_t(rng());
    if (((bits >> 10) & 0x1F) == 0x1F) continue;
    EXPECT_EQ(detail::half_value(bits), double(quant::f16_to_f32(bits))) << bits;
  }
  for (float v : uniform(100000, 6, 70000.0f))
    EXPECT_EQ(detail::round_to_half(double(v)), double(quant::round_to_f16(v))) << v;
  EXPECT_EQ(detail::round_to_half(1.0 + 0x1p-11), 1.0);  // a tie goes to even
  EXPECT_EQ(detail::round_to_half(1.0 + 3 * 0x1p-11), 1.0 + 0x1p-9);
}

// Every type: the exact dequantization equals qgate's f32 dequantizer wherever f32 holds it.
class EveryType : public ::testing::TestWithParam<WeightType> {};

TEST_P(EveryType, ExactDequantizationMatchesTheFormat) {
  const WeightType type = GetParam();
  const int64_t k = 512;
  const auto w = uniform(size_t(k), 11);
  std::vector<uint8_t> blocks(quant::row_bytes(type, k));
  quant::quantize_row(type, w.data(), blocks.data(), k);
  std::vector<float> expected(static_cast<size_t>(k));
  quant::dequantize_row(type, blocks.data(), expected.data(), k);
  std::vector<detail::StoredGroup> groups(size_t(k / 32));
  detail::decode_row(int32_t(type), blocks.data(), k, groups.data());
  std::vector<double> exact(static_cast<size_t>(k));
  detail::dequantize_exact(int32_t(type), groups.data(), k, exact.data());
  for (int64_t i = 0; i < k; ++i) EXPECT_NEAR(exact[i], expected[i], 1e-6 * std::fabs(expected[i]) + 1e-7) << i;
}

TEST_P(EveryType, ProfilesStayCloseToTheExactProduct) {
  const WeightType type = GetParam();
  const int64_t od = 33, k = 512, nt = 7;
  const auto blocks = quant::quantize_matrix(type, uniform(size_t(od * k), 31).data(), od, k);
  const auto x = uniform(size_t(nt * k), 32);
  const GemmProblem p = problem(type, blocks, x, od, k);
  const std::vector<double> exact = exact_product(p);
  for (const Expectation& e : {expect_mmq(Numerics::qgate, p), expect_mmq(Numerics::ggml, p),
                               expect_route(Route::ggml_mmq, p), expect_mmq(Numerics::ggml_cpu, p), expect_f16(p),
                               expect_f16(Numerics::ggml, p)}) {
    double err = 0, ref = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
      err += (e.y[i] - exact[i]) * (e.y[i] - exact[i]);
      ref += exact[i] * exact[i];
    }
    EXPECT_LT(err / ref, kExactNmseLimit / 4) << e.route;  // llama.cpp-style kernels sit near 6e-5
    EXPECT_GT(err / ref, 0.0) << e.route;  // quantized activations (or f16 rounding) always cost something
  }
}

TEST_P(EveryType, TheCpuBackendPassesTheQgateProfileOnAnOutlierRowThatAnAbsoluteGateWouldFail) {
  const WeightType type = GetParam();
  const int64_t od = 96, k = 512, nt = 8;
  const auto blocks = quant::quantize_matrix(type, uniform(size_t(od * k), 41).data(), od, k);
  auto x = uniform(size_t(nt * k), 42);
  for (int64_t t = 0; t < nt; ++t) x[size_t(t * k + 5 + t)] = 1e4f;  // one outlier per row, block 0
  auto backend = kernels::make_cpu_backend(kernels::GemmPath::mmq, 2);
  std::unique_ptr<kernels::PreparedGemm> gemm;
  ASSERT_TRUE(backend->prepare(type, od, k, blocks.data(), nt, &gemm));
  std::vector<float> y(size_t(nt * od));
  ASSERT_TRUE(gemm->run(x.data(), nt, y.data(), nullptr));
  const Expectation e = expect_mmq(Numerics::qgate, problem(type, blocks, x, od, k));
  double worst_fraction = 0, max_diff = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double diff = std::fabs(double(y[i]) - e.y[i]);
    max_diff = std::max(max_diff, diff);
    worst_fraction = std::max(worst_fraction, diff / (kAbsoluteTolerance + e.slack[i]));
  }
  EXPECT_LE(worst_fraction, 1.0) << "max |diff| " << max_diff;
  RecordProperty("max_abs_diff", std::to_string(max_diff));
}

TEST_P(EveryType, GgmlMmvqArithmeticPassesTheGgmlProfileAtUpTo8Tokens) {
  // What a correct llama.cpp build computes at <= 8 tokens, outlier and large rows included.
  const WeightType type = GetParam();
  const int64_t od = 32, k = 1024, nt = 8;
  const auto blocks = quant::quantize_matrix(type, uniform(size_t(od * k), 71).data(), od, k);
  const auto x = mixed_rows(nt, k, 72);
  const Expectation e = expect_mmq(Numerics::ggml, problem(type, blocks, x, od, k));
  ASSERT_EQ(e.route, "ggml/mmvq sm90");
  EXPECT_LE(worst_fraction(simulate_ggml_mmvq(type, blocks, od, k, x, Variant::faithful), e), 1.0);
}

TEST_P(EveryType, GgmlMmqArithmeticPassesTheGgmlProfileAbove8Tokens) {
  const WeightType type = GetParam();
  const int64_t od = 32, k = 1024, nt = 12;
  const auto blocks = quant::quantize_matrix(type, uniform(size_t(od * k), 73).data(), od, k);
  const auto x = mixed_rows(nt, k, 74);
  const Expectation e = expect_mmq(Numerics::ggml, problem(type, blocks, x, od, k));
  ASSERT_EQ(e.route, "ggml/mmq sm90");
  EXPECT_LE(worst_fraction(simulate_ggml_mmq(type, blocks, od, k, x, Variant::faithful), e), 1.0);
}

TEST_P(EveryType, AnF16AccumulatorFailsBothGgmlRoutes) {
  // Rounding the f32 sum of terms to f16 is more rounding than either route does.
  const WeightType type = GetParam();
  const int64_t od = 32, k = 1024;
  const auto blocks = quant::quantize_matrix(type, uniform(size_t(od * k), 75).data(), od, k);
  const auto x8 = mixed_rows(8, k, 76), x12 = mixed_rows(12, k, 76);
  const Expectation mmvq = expect_mmq(Numerics::ggml, problem(type, blocks, x8, od, k));
  const Expectation mmq = expect_mmq(Numerics::ggml, problem(type, blocks, x12, od, k));
  EXPECT_GT(worst_fraction(simulate_ggml_mmvq(type, blocks, od, k, x8, Variant::f16_accumulator), mmvq), 1.0);
  EXPECT_GT(worst_fraction(simulate_ggml_mmq(type, blocks, od, k, x12, Variant::f16_accumulator), mmq), 1.0);
}

TEST_P(EveryType, GgmlCpuArithmeticPassesTheGgmlCpuProfileAndAnF16OutputFailsIt) {
  const WeightType type = GetParam();
  const int64_t od = 32, k = 1024, nt = 9;
  const auto blocks = quant::quantize_matrix(type, uniform(size_t(od * k), 77).data(), od, k);
  const auto x = mixed_rows(nt, k, 78);
  const Expectation e = expect_mmq(Numerics::ggml_cpu, problem(type, blocks, x, od, k));
  ASSERT_EQ(e.route, "ggml-cpu/vec_dot");
  EXPECT_LE(worst_fraction(simulate_ggml_cpu(type, blocks, od, k, x), e), 1.0);
  // A CPU build that rounds its f32 sums to f16 before writing them rounds more than ggml-cpu.
  std::vector<float> rounded = simulate_ggml_cpu(type, blocks, od, k, x);
  for (float& v : rounded) v = f16(v);
  EXPECT_GT(worst_fraction(rounded, e), 1.0);
}

TEST_P(EveryType, EveryKnownLineagePassesTheUnknownProfile) {
  // The unknown profile's bound is the worst case of 8-bit activations per 32 values: a correct
  // kernel of any lineage is inside it, on outlier and large rows too.
  const WeightType type = GetParam();
  const int64_t od = 32, k = 1024, nt = 9;
  const auto blocks = quant::quantize_matrix(type, uniform(size_t(od * k), 79).data(), od, k);
  const auto x = mixed_rows(nt, k, 80);
  const GemmProblem p = problem(type, blocks, x, od, k);
  const Expectation e = expect_mmq(Numerics::unknown, p);
  ASSERT_EQ(e.route, "unknown/mmq");
  EXPECT_EQ(e.y, exact_product(p));
  EXPECT_LE(worst_fraction(simulate_ggml_mmvq(type, blocks, od, k, x, Variant::faithful), e), 1.0) << "ggml mmvq";
  EXPECT_LE(worst_fraction(simulate_ggml_mmq(type, blocks, od, k, x, Variant::faithful), e), 1.0) << "ggml mmq";
  EXPECT_LE(worst_fraction(simulate_ggml_cpu(type, blocks, od, k, x), e), 1.0) << "ggml-cpu";
  auto backend = kernels::make_cpu_backend(kernels::GemmPath::mmq, 2);
  std::unique_ptr<kernels::PreparedGemm> gemm;
  ASSERT_TRUE(backend->prepare(type, od, k, blocks.data(), nt, &gemm));
  std::vector<float> y(size_t(nt * od));
  ASSERT_TRUE(gemm->run(x.data(), nt, y.data(), nullptr));
  EXPECT_LE(worst_fraction(y, e), 1.0) << "qgate's CPU backend";
}

TEST_P(EveryType, ADoubledBlockScaleFailsEveryProfile) {
  const WeightType type = GetParam();
  const int64_t od = 16, k = 512;
  auto blocks = quant::quantize_matrix(type, uniform(size_t(od * k), 81).data(), od, k);
  const auto good_blocks = blocks;
  // Double the f16 d of every row's last block (every type keeps a d at a known offset).
  const size_t block_bytes = quant::traits(type).block_bytes, d_offset = type == WeightType::q6_K ? 208 : 0;
  for (int64_t o = 0; o < od; ++o) {
    uint8_t* last = blocks.data() + size_t(o + 1) * quant::row_bytes(type, k) - block_bytes + d_offset;
    uint16_t d;
    std::memcpy(&d, last, 2);
    d = quant::f32_to_f16(2.0f * quant::f16_to_f32(d));
    std::memcpy(last, &d, 2);
  }
  for (int64_t nt : {4, 12}) {
    const auto x = uniform(size_t(nt * k), 82);
    for (Numerics n : kEveryProfile) {
      // The faulty kernel: faithful to the profile in every other respect.
      const Expectation good = expect_mmq(n, problem(type, good_blocks, x, od, k));
      const Expectation bad = expect_mmq(n, problem(type, blocks, x, od, k));
      const std::vector<float> y(bad.y.begin(), bad.y.end());
      EXPECT_GT(worst_fraction(y, good), n == Numerics::unknown ? 1.0 : 10.0) << good.route;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, EveryType,
                         ::testing::Values(WeightType::q4_0, WeightType::q4_1, WeightType::q5_0, WeightType::q5_1,
                                           WeightType::q8_0, WeightType::q4_K, WeightType::q5_K, WeightType::q6_K),
                         [](const auto& info) { return std::string(quant::traits(info.param).name); });

TEST(ParityReference, AnAbsoluteGateFailsTheCpuBackendOnOutlierRowsOfSomeTypes) {
  // The rule qgate used before: max |diff| < 1e-3. f32 spacing near |y| ~ 1e4 is already 1e-3.
  int failing_types = 0;
  for (WeightType type : quant::all_types()) {
    const int64_t od = 96, k = 512, nt = 8;
    const auto blocks = quant::quantize_matrix(type, uniform(size_t(od * k), 41).data(), od, k);
    auto x = uniform(size_t(nt * k), 42);
    for (int64_t t = 0; t < nt; ++t) x[size_t(t * k + 5 + t)] = 1e4f;
    auto backend = kernels::make_cpu_backend(kernels::GemmPath::mmq, 2);
    std::unique_ptr<kernels::PreparedGemm> gemm;
    ASSERT_TRUE(backend->prepare(type, od, k, blocks.data(), nt, &gemm));
    std::vector<float> y(size_t(nt * od));
    ASSERT_TRUE(gemm->run(x.data(), nt, y.data(), nullptr));
    const Expectation e = expect_mmq(Numerics::qgate, problem(type, blocks, x, od, k));
    double max_diff = 0;
    for (size_t i = 0; i < y.size(); ++i) max_diff = std::max(max_diff, std::fabs(double(y[i]) - e.y[i]));
    failing_types += max_diff >= kAbsoluteTolerance;
  }
  EXPECT_GE(failing_types, 1);
}

TEST(ParityReference, TiesRoundHalfEvenInQgateAndAwayFromZeroInGgml) {
  // amax = 127/64, so 1/d = 64 exactly and x = (n + 1/2)/64 quantizes to a tie.
  const int64_t k = 32;
  std::vector<float> x(static_cast<size_t>(k));
  x[0] = 127.0f / 64.0f;
  for (int j = 1; j < k; ++j) x[size_t(j)] = (float(j) + 0.5f) / 64.0f;  // 1.5, 2.5, ...
  // One q8_0 row with d = 1 and every weight 1: y = d_a * sum(q_a).
  uint8_t row[34] = {0x00, 0x3C};
  for (int j = 0; j < 32; ++j) row[2 + j] = 1;
  const GemmProblem p{8, 1, k, 1, row, x.data()};
  const double qgate = expect_mmq(Numerics::qgate, p).y[0];
  const double ggml = expect_mmq(Numerics::ggml, p).y[0];
  int64_t even = 127, away = 127;
  for (int j = 1; j < k; ++j) {
    even += (j % 2 == 0) ? j : j + 1;  // j + 0.5 rounds to the even neighbour
    away += j + 1;
  }
  EXPECT_DOUBLE_EQ(qgate, even / 64.0);
  EXPECT_DOUBLE_EQ(ggml, away / 64.0);  // one token: MMVQ, roundf(x/d)
  EXPECT_DOUBLE_EQ(expect_route(Route::ggml_mmq, p).y[0], away / 64.0);  // MMQ, roundf(x*127/amax)
  // ggml-cpu: the generic quantizer rounds away from zero, x86's AVX2 one to even; both are faithful.
  const Expectation cpu = expect_mmq(Numerics::ggml_cpu, p);
  EXPECT_DOUBLE_EQ(cpu.y[0], away / 64.0);
  EXPECT_LE(std::fabs(even / 64.0 - cpu.y[0]), kAbsoluteTolerance + cpu.slack[0]);
  // amax = 127 * 2^-6 makes ggml's fast-math division exact: no tie is left ambiguous, so a kernel
  // that rounds ties the other way is outside either profile's bound.
  for (Numerics n : {Numerics::qgate, Numerics::ggml})
    EXPECT_LT(kAbsoluteTolerance + expect_mmq(n, p).slack[0], std::fabs(ggml - qgate)) << to_string(n);
}

TEST(ParityReference, ZeroActivationsGiveZeroInEveryProfile) {
  const int64_t od = 4, k = 256;
  const auto blocks = quant::quantize_matrix(WeightType::q4_K, uniform(size_t(od * k), 51).data(), od, k);
  const std::vector<float> x(size_t(k), 0.0f);
  const GemmProblem p{int32_t(WeightType::q4_K), od, k, 1, blocks.data(), x.data()};
  for (Numerics n : kEveryProfile) {
    for (double y : expect_mmq(n, p).y) EXPECT_EQ(y, 0.0) << to_string(n);
    for (double y : expect_f16(n, p).y) EXPECT_EQ(y, 0.0) << to_string(n);
  }
  for (double y : expect_route(Route::ggml_mmq, p).y) EXPECT_EQ(y, 0.0);
}

TEST(ParityReference, ASingleWrongBlockScaleIsFarOutsideTheSlack) {
  for (WeightType type : quant::all_types()) {
    const int64_t od = 16, k = 4096, nt = 4;
    auto blocks = quant::quantize_matrix(type, uniform(size_t(od * k), 61).data(), od, k);
    const auto x = uniform(size_t(nt * k), 62);
    const Expectation good = expect_mmq(Numerics::ggml, problem(type, blocks, x, od, k));
    // Double the f16 d of the row's last block (every type keeps a d at a known offset).
    const size_t block_bytes = quant::traits(type).block_bytes;
    const size_t d_offset = type == WeightType::q6_K ? 208 : 0;
    uint8_t* last = blocks.data() + quant::row_bytes(type, k) - block_bytes + d_offset;
    uint16_t d;
    std::memcpy(&d, last, 2);
    d = quant::f32_to_f16(2.0f * quant::f16_to_f32(d));
    std::memcpy(last, &d, 2);
    const Expectation bad = expect_mmq(Numerics::ggml, problem(type, blocks, x, od, k));
    double worst = 0;
    for (int64_t t = 0; t < nt; ++t)
      worst = std::max(worst, std::fabs(bad.y[size_t(t * od)] - good.y[size_t(t * od)]) /
                                  (kAbsoluteTolerance + good.slack[size_t(t * od)]));
    EXPECT_GT(worst, 10.0) << quant::traits(type).name;
  }
}

TEST(ParityReference, RefusesBadProblems) {
  const std::vector<uint8_t> w(18);
  const std::vector<float> x(32);
  EXPECT_THROW(expect_mmq(Numerics::qgate, GemmProblem{99, 1, 32, 1, w.data(), x.data()}), std::invalid_argument);
  EXPECT_THROW(expect_mmq(Numerics::qgate, GemmProblem{2, 1, 48, 1, w.data(), x.data()}), std::invalid_argument);
  EXPECT_THROW(exact_product(GemmProblem{2, 1, 32, 1, nullptr, x.data()}), std::invalid_argument);
  EXPECT_EQ(parse_numerics("GGML"), Numerics::ggml);
  EXPECT_FALSE(parse_numerics("llama"));
  EXPECT_FALSE(parse_numerics("ggml-cuda"));
}

TEST(ParityReference, EveryProfileNameRoundTrips) {
  for (Numerics n : kEveryProfile) EXPECT_EQ(parse_numerics(to_string(n)), n) << to_string(n);
  EXPECT_EQ(to_string(Numerics::ggml_cpu), "ggml-cpu");
  EXPECT_EQ(parse_numerics("ggml_cpu"), Numerics::ggml_cpu);
  EXPECT_EQ(parse_numerics("Unknown"), Numerics::unknown);
}


TEST(ParityReference, EachProfilePicksTheRouteItsLibraryDispatchesTo) {
  const std::vector<uint8_t> w(size_t(64) * 18);
  const std::vector<float> x(size_t(17) * 32);
  auto route_at = [&](Numerics n, int64_t nt, int64_t od, bool f16) {
    const GemmProblem p{2, od, 32, nt, w.data(), x.data()};
    return std::string(to_string(f16 ? f16_route(n, p) : mmq_route(n, p)));
  };
  for (int64_t nt = 1; nt <= kGgmlMmvqMaxTokens; ++nt) EXPECT_EQ(route_at(Numerics::ggml, nt, 32, false), "ggml/mmvq") << nt;
  for (int64_t nt : {9, 12, 17}) EXPECT_EQ(route_at(Numerics::ggml, nt, 32, false), "ggml/mmq") << nt;
  EXPECT_EQ(route_at(Numerics::qgate, 1, 32, false), "qgate/mmq");
  EXPECT_EQ(route_at(Numerics::ggml_cpu, 1, 32, false), "ggml-cpu/vec_dot");
  EXPECT_EQ(route_at(Numerics::unknown, 17, 32, false), "unknown/mmq");
  // f16: MMVF at one token; MMF up to 16 tokens when k % 64 == 0 and od % 32 == 0; cuBLAS above.
  const GemmProblem k64{2, 32, 64, 16, w.data(), x.data()};
  EXPECT_EQ(route_at(Numerics::ggml, 1, 32, true), "ggml/mmvf");
  EXPECT_EQ(to_string(f16_route(Numerics::ggml, k64)), "ggml/mmf");
  EXPECT_EQ(route_at(Numerics::ggml, 16, 32, true), "ggml/cublas-f16");  // k = 32 is not a multiple of 64
  EXPECT_EQ(to_string(f16_route(Numerics::ggml, GemmProblem{2, 33, 64, 16, w.data(), x.data()})), "ggml/cublas-f16");
  EXPECT_EQ(to_string(f16_route(Numerics::ggml, GemmProblem{2, 32, 64, 17, w.data(), x.data()})), "ggml/cublas-f16");
  EXPECT_EQ(route_at(Numerics::qgate, 1, 32, true), "qgate/f16");
  EXPECT_EQ(route_at(Numerics::ggml_cpu, 1, 32, true), "ggml-cpu/f16");
  EXPECT_EQ(route_at(Numerics::unknown, 1, 32, true), "unknown/f16");
  // The expectation names its route, with the compute capability ggml's CUDA routes assume.
  EXPECT_EQ(expect_mmq(Numerics::ggml, GemmProblem{2, 64, 32, 8, w.data(), x.data()}).route, "ggml/mmvq sm90");
  EXPECT_EQ(expect_mmq(Numerics::ggml, GemmProblem{2, 64, 32, 9, w.data(), x.data()}).route, "ggml/mmq sm90");
  EXPECT_EQ(expect_mmq(Numerics::qgate, GemmProblem{2, 64, 32, 9, w.data(), x.data()}).route, "qgate/mmq");
  EXPECT_EQ(expect_f16(GemmProblem{2, 64, 32, 9, w.data(), x.data()}).route, "qgate/f16");
}

TEST(ParityReference, TheMmqRouteFailsGgmlsMmvqArithmeticWhichItsOwnRoutePasses) {
  // The reported symptom: a correct llama.cpp build judged by the MMQ numerics at <= 8 tokens.
  // MMVQ multiplies the legacy offsets into the f16 sum of x; on a 1e4 outlier row that sum is
  // rounded to a spacing of 8, so MMQ's folded offsets are far from what MMVQ computes.
  int failing_types = 0;
  for (WeightType type : quant::all_types()) {
    const int64_t od = 96, k = 512, nt = 8;
    const auto blocks = quant::quantize_matrix(type, uniform(size_t(od * k), 41).data(), od, k);
    auto x = uniform(size_t(nt * k), 42);
    for (int64_t t = 0; t < nt; ++t) x[size_t(t * k + 5 + t)] = 1e4f;
    const GemmProblem p = problem(type, blocks, x, od, k);
    const auto y = simulate_ggml_mmvq(type, blocks, od, k, x, Variant::faithful);
    EXPECT_LE(worst_fraction(y, expect_mmq(Numerics::ggml, p)), 1.0) << quant::traits(type).name;
    const bool mmq_fails = worst_fraction(y, expect_route(Route::ggml_mmq, p)) > 1.0;
    failing_types += mmq_fails;
    if (type == WeightType::q5_0) EXPECT_TRUE(mmq_fails);
  }
  EXPECT_GE(failing_types, 2);
}

TEST(ParityReference, KQuantScaleProductsKeptInF32PassGgmlMmq) {
  // ggml's MMQ rounds q4_K/q5_K's d*sc and dmin*m to f16; a kernel that keeps them in f32 rounds
  // less and must pass. The difference is material: larger than the absolute floor.
  for (WeightType type : {WeightType::q4_K, WeightType::q5_K}) {
    const int64_t od = 32, k = 2048, nt = 12;
    const auto blocks = quant::quantize_matrix(type, uniform(size_t(od * k), 91).data(), od, k);
    const auto x = mixed_rows(nt, k, 92);
    const Expectation e = expect_mmq(Numerics::ggml, problem(type, blocks, x, od, k));
    ASSERT_EQ(e.route, "ggml/mmq sm90");
    const auto faithful = simulate_ggml_mmq(type, blocks, od, k, x, Variant::faithful);
    const auto in_f32 = simulate_ggml_mmq(type, blocks, od, k, x, Variant::k_scale_products_in_f32);
    EXPECT_GT(max_difference(faithful, in_f32), kAbsoluteTolerance) << quant::traits(type).name;
    EXPECT_LE(worst_fraction(faithful, e), 1.0) << quant::traits(type).name;
    EXPECT_LE(worst_fraction(in_f32, e), 1.0) << quant::traits(type).name;
  }
}

TEST(ParityReference, AnActivationScaleRoundedToF16FailsGgmlMmqWhereItKeepsF32) {
  // ggml's MMQ keeps q5_0/q8_0/q6_K's activation d in f32; rounding it to f16 rounds more.
  for (WeightType type : {WeightType::q5_0, WeightType::q8_0, WeightType::q6_K}) {
    const int64_t od = 32, k = 512, nt = 12;
    const auto blocks = quant::quantize_matrix(type, uniform(size_t(od * k), 93).data(), od, k);
    const auto x = mixed_rows(nt, k, 94);
    const Expectation e = expect_mmq(Numerics::ggml, problem(type, blocks, x, od, k));
    EXPECT_LE(worst_fraction(simulate_ggml_mmq(type, blocks, od, k, x, Variant::faithful), e), 1.0)
        << quant::traits(type).name;
    EXPECT_GT(worst_fraction(simulate_ggml_mmq(type, blocks, od, k, x, Variant::activation_d_in_f16), e), 1.0)
        << quant::traits(type).name;
  }
}

TEST(ParityReference, GgmlF16RoutesBudgetTheirHalfPrecisionSums) {
  const WeightType type = WeightType::q8_0;
  const int64_t od = 32, k = 4096;
  const auto blocks = quant::quantize_matrix(type, uniform(size_t(od * k), 95).data(), od, k);
  // One token: MMVF's half2 lanes (ggml picks 256 threads at k = 4096: 8 pairs per thread).
  const auto x1 = mixed_rows(1, k, 96);
  const Expectation mmvf = expect_f16(Numerics::ggml, problem(type, blocks, x1, od, k));
  ASSERT_EQ(mmvf.route, "ggml/mmvf sm90");
  EXPECT_LE(worst_fraction(simulate_ggml_mmvf(type, blocks, od, k, x1, 256), mmvf), 1.0);
  // 17 tokens: cuBLAS with f16 accumulation. A kernel accumulating in f16 passes the cuBLAS route
  // and fails qgate's f32-accumulation bound; one accumulating in f32 rounds less and passes both.
  const auto x17 = mixed_rows(17, k, 97);
  const GemmProblem p = problem(type, blocks, x17, od, k);
  const Expectation cublas = expect_f16(Numerics::ggml, p);
  ASSERT_EQ(cublas.route, "ggml/cublas-f16 sm90");
  const auto half_sums = simulate_f16_gemm(type, blocks, od, k, x17, 16);
  const auto f32_sums = simulate_f16_gemm(type, blocks, od, k, x17, 0);
  EXPECT_LE(worst_fraction(half_sums, cublas), 1.0);
  EXPECT_GT(worst_fraction(half_sums, expect_f16(p)), 1.0);
  EXPECT_LE(worst_fraction(f32_sums, cublas), 1.0);
  EXPECT_LE(worst_fraction(f32_sums, expect_f16(p)), 1.0);
  // The unknown profile admits both.
  const Expectation unknown = expect_f16(Numerics::unknown, p);
  EXPECT_LE(worst_fraction(half_sums, unknown), 1.0);
  EXPECT_LE(worst_fraction(f32_sums, unknown), 1.0);
}

}  // namespace
}  // namespace qgate::reference
