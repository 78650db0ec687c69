// The MMQ decompositions: unpacked weights reproduce the dequantizer (w = ds*q + dm) for every
// type, and q8 activation quantization rounds, clamps and sums exactly as the contract says.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "qgate/quant/block_formats.h"
#include "qgate/quant/half.h"
#include "qgate/quant/mmq_math.h"
#include "qgate/quant/quantize.h"

namespace qgate::quant {
namespace {

std::vector<float> uniform(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct QRange { int lo, hi; };
QRange expected_q_range(WeightType type) {
  switch (type) {
    case WeightType::q4_0: return {-8, 7};
    case WeightType::q4_1: return {0, 15};
    case WeightType::q5_0: return {-16, 15};
    case WeightType::q5_1: return {0, 31};
    case WeightType::q8_0: return {-128, 127};
    case WeightType::q4_K: return {0, 15};   // unsigned: the min goes to dm
    case WeightType::q5_K: return {0, 31};
    case WeightType::q6_K: return {-32, 31};
  }
  return {0, 0};
}

class UnpackRowMmq : public ::testing::TestWithParam<WeightType> {};

TEST_P(UnpackRowMmq, ReconstructsTheDequantizer) {
  const WeightType type = GetParam();
  const int64_t k = 1024;
  for (uint32_t seed : {1u, 2u, 3u}) {
    const auto x = uniform(k, seed);
    std::vector<uint8_t> blocks(row_bytes(type, k));
    quantize_row(type, x.data(), blocks.data(), k);
    std::vector<float> deq(k);
    dequantize_row(type, blocks.data(), deq.data(), k);
    std::vector<MmqWeightBlock> unpacked(k / kQK);
    unpack_row_mmq(type, blocks.data(), k, unpacked.data());
    const QRange range = expected_q_range(type);
    for (int64_t b = 0; b < k / kQK; ++b) {
      const MmqWeightBlock& w = unpacked[b];
      if (type != WeightType::q6_K) EXPECT_EQ(w.ds[1], w.ds[0]) << b;
      if (!traits(type).has_min) EXPECT_EQ(w.dm, 0.0f) << b;
      for (int i = 0; i < kQK; ++i) {
        ASSERT_GE(w.q[i], range.lo);
        ASSERT_LE(w.q[i], range.hi);
        const float rebuilt = w.ds[i < 16 ? 0 : 1] * static_cast<float>(w.q[i]) + w.dm;
        const float expected = deq[b * kQK + i];
#if defined(__FMA__) || defined(__FP_FAST_FMAF)
        // A fused multiply-add may round once instead of twice: allow one f32 rounding.
        ASSERT_NEAR(rebuilt, expected, 1e-6f * (std::fabs(expected) + std::fabs(w.dm)) + 1e-30f);
#else
        ASSERT_EQ(rebuilt, expected) << traits(type).name << " block " << b << " element " << i;
#endif
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, UnpackRowMmq, ::testing::ValuesIn(all_types().begin(), all_types().end()),
                         [](const auto& info) { return std::string(traits(info.param).name); });

TEST(UnpackRowMmq, Q6KChunksTakeConsecutiveScalePairs) {
  BlockQ6_K b{};
  b.d = 0x3c00;  // 1.0
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(s + 1);
  MmqWeightBlock out[8];
  unpack_row_mmq(WeightType::q6_K, &b, kQKK, out);
  for (int c = 0; c < 8; ++c) {
    EXPECT_EQ(out[c].ds[0], static_cast<float>(2 * c + 1)) << c;
    EXPECT_EQ(out[c].ds[1], static_cast<float>(2 * c + 2)) << c;
    for (int i = 0; i < kQK; ++i) EXPECT_EQ(out[c].q[i], -32);
  }
}

TEST(UnpackRowMmq, KQuantMinIsNegatedIntoDm) {
  BlockQ4_K b{};
  b.d = 0x3c00;     // 1.0
  b.dmin = 0x3800;  // 0.5
  b.scales[0] = 5;  // sub-block 0: scale 5
  b.scales[4] = 6;  // sub-block 0: min 6
  b.qs[0] = 0x2B;   // element 0 nibble 11, element 32 nibble 2
  MmqWeightBlock out[8];
  unpack_row_mmq(WeightType::q4_K, &b, kQKK, out);
  EXPECT_EQ(out[0].q[0], 11);
  EXPECT_EQ(out[1].q[0], 2);
  EXPECT_EQ(out[0].ds[0], 5.0f);
  EXPECT_EQ(out[0].dm, -3.0f);
  EXPECT_EQ(out[1].ds[0], 0.0f);
}

TEST(QuantizeBlockQ8, RoundsHalfToEven) {
  // amax = 127 gives d = 1 and 1/d = 1, so x*di is x itself and ties are exact.
  float x[kQK] = {};
  for (int i = 0; i < kQK; ++i) x[i] = 0.25f;  // never zero: rounds to 0
  x[0] = 127.0f;
  x[1] = 2.5f;    // -> 2
  x[2] = 3.5f;    // -> 4
  x[3] = -2.5f;   // -> -2
  x[4] = 0.5f;    // -> 0
  x[5] = -1.5f;   // -> -2
  x[6] = 2.4999998f;  // just below the tie -> 2
  x[7] = 2.5000002f;  // just above the tie -> 3
  int8_t q[kQK];
  float d;
  int32_t sum;
  quantize_block_q8(x, q, &d, &sum);
  EXPECT_EQ(d, 1.0f);
  const int expected_head[] = {127, 2, 4, -2, 0, -2, 2, 3};
  int32_t expected_sum = 0;
  for (int i = 0; i < kQK; ++i) {
    const int expected = i < 8 ? expected_head[i] : 0;
    EXPECT_EQ(q[i], expected) << i;
    expected_sum += expected;
  }
  EXPECT_EQ(sum, expected_sum);
}

TEST(QuantizeBlockQ8, UsesTheUnroundedDForTheReciprocalAndStoresItRoundedToF16) {
  // amax = 1: d = 1/127 (f32), which is not an f16 value; q must come from x * (1/d).
  const auto x = uniform(kQK, 17);
  float xs[kQK];
  float amax = 0;
  for (int i = 0; i < kQK; ++i) {
    xs[i] = x[i];
    amax = std::fmax(amax, std::fabs(xs[i]));
  }
  int8_t q[kQK];
  float d;
  int32_t sum;
  quantize_block_q8(xs, q, &d, &sum);
  const float d32 = amax / 127.0f;
  const float inverse = 1.0f / d32;
  EXPECT_EQ(d, round_to_f16(d32));
  EXPECT_NE(d, d32);  // the stored d really is the rounded one (fails if it were kept in f32)
  int32_t expected_sum = 0;
  for (int i = 0; i < kQK; ++i) {
    const float scaled = xs[i] * inverse;
    EXPECT_EQ(q[i], static_cast<int>(std::nearbyint(scaled))) << i;
    EXPECT_LE(std::fabs(scaled - q[i]), 0.5f);
    expected_sum += q[i];
  }
  EXPECT_EQ(sum, expected_sum);
  // The block's largest magnitude maps to +-127.
  int max_abs_q = 0;
  for (int i = 0; i < kQK; ++i) max_abs_q = std::max(max_abs_q, std::abs(static_cast<int>(q[i])));
  EXPECT_EQ(max_abs_q, 127);
}

TEST(QuantizeBlockQ8, ClampsToTheInt8Range) {
  // With an amax this small, 1/d overflows to Inf in f32, so x*di is +-Inf and only the clamp
  // keeps q in range: +Inf -> 127, -Inf -> -128.
  float x[kQK];
  for (int i = 0; i < kQK; ++i) x[i] = (i % 2 == 0) ? 1e-37f : -1e-37f;
  int8_t q[kQK];
  float d;
  int32_t sum;
  quantize_block_q8(x, q, &d, &sum);
  for (int i = 0; i < kQK; ++i) EXPECT_EQ(q[i], (i % 2 == 0) ? 127 : -128) << i;
  EXPECT_EQ(sum, 16 * 127 + 16 * -128);
  EXPECT_TRUE(std::isfinite(d));
}

TEST(QuantizeBlockQ8, ZeroBlockHasZeroScaleQuantsAndSum) {
  float x[kQK] = {};
  int8_t q[kQK];
  float d = -1;
  int32_t sum = -1;
  quantize_block_q8(x, q, &d, &sum);
  EXPECT_EQ(d, 0.0f);
  EXPECT_EQ(sum, 0);
  for (int i = 0; i < kQK; ++i) EXPECT_EQ(q[i], 0);
}

TEST(QuantizeActivationsQ8, LaysOutTokensAndBlocksRowMajor) {
  const int64_t nt = 3, k = 96;
  const auto x = uniform(nt * k, 5);
  const Q8Activations a = quantize_activations_q8(x.data(), nt, k);
  ASSERT_EQ(a.nt, nt);
  ASSERT_EQ(a.k, k);
  ASSERT_EQ(a.q.size(), static_cast<size_t>(nt * k));
  ASSERT_EQ(a.d.size(), static_cast<size_t>(nt * k / kQK));
  ASSERT_EQ(a.sum.size(), static_cast<size_t>(nt * k / kQK));
  for (int64_t t = 0; t < nt; ++t) {
    for (int64_t b = 0; b < k / kQK; ++b) {
      int8_t q[kQK];
      float d;
      int32_t sum;
      quantize_block_q8(x.data() + t * k + b * kQK, q, &d, &sum);
      const int64_t blk = t * (k / kQK) + b;
      EXPECT_EQ(a.d[blk], d);
      EXPECT_EQ(a.sum[blk], sum);
      for (int i = 0; i < kQK; ++i) EXPECT_EQ(a.q[t * k + b * kQK + i], q[i]);
    }
  }
}

}  // namespace
}  // namespace qgate::quant
