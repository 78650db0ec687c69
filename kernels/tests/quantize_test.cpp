// Quantizers: round trips stay within each type's error bound, degenerate blocks (zeros,
// constants, huge values) produce valid finite blocks, and quantize_matrix is row by row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "qgate/quant/block_formats.h"
#include "qgate/quant/quantize.h"

namespace qgate::quant {
namespace {

std::vector<float> uniform(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

std::vector<float> round_trip(WeightType type, const std::vector<float>& x) {
  const int64_t k = static_cast<int64_t>(x.size());
  std::vector<uint8_t> blocks(row_bytes(type, k));
  quantize_row(type, x.data(), blocks.data(), k);
  std::vector<float> y(x.size());
  dequantize_row(type, blocks.data(), y.data(), k);
  return y;
}

// Largest decode error allowed, as a fraction of the block's largest |x|, from each grid's step:
// half a step where the grid covers the block's range (q4_1/q5_1: range/15, range/31; q8_0:
// amax/127; K-quants the same plus their 6-bit sub-scale rounding), a full step for the
// symmetric grids whose far end clamps (q4_0: amax/8, q5_0: amax/16, q6_K: amax/32, as in
// ggml: the signed extreme maps to -2^(n-1), the opposite extreme clamps at 2^(n-1)-1).
double error_bound(WeightType type) {
  switch (type) {
    case WeightType::q4_0: return 1.0 / 8 * 1.05;
    case WeightType::q4_1: return 2.0 / 30 * 1.05;
    case WeightType::q5_0: return 1.0 / 16 * 1.05;
    case WeightType::q5_1: return 2.0 / 62 * 1.05;
    case WeightType::q8_0: return 0.5 / 127 * 1.05;
    case WeightType::q4_K: return 2.0 / 30 * 1.25;
    case WeightType::q5_K: return 2.0 / 62 * 1.25;
    case WeightType::q6_K: return 1.0 / 32 * 1.3;
  }
  return 0;
}

// Bound on the mean squared error relative to the mean square of the input (NMSE).
double nmse_bound(WeightType type) {
  switch (type) {
    case WeightType::q4_0: case WeightType::q4_1: case WeightType::q4_K: return 6e-3;
    case WeightType::q5_0: case WeightType::q5_1: case WeightType::q5_K: return 1.6e-3;
    case WeightType::q6_K: return 4e-4;
    case WeightType::q8_0: return 2e-5;
  }
  return 0;
}

class QuantizeRoundTrip : public ::testing::TestWithParam<WeightType> {};

TEST_P(QuantizeRoundTrip, StaysWithinTheErrorBound) {
  const WeightType type = GetParam();
  const int block = traits(type).block_elems;
  for (uint32_t seed : {1u, 2u, 3u, 1234u}) {
    const auto x = uniform(1024, seed);
    const auto y = round_trip(type, x);
    double err2 = 0, ref2 = 0;
    for (size_t b0 = 0; b0 < x.size(); b0 += block) {
      float amax = 0;
      for (int i = 0; i < block; ++i) amax = std::max(amax, std::fabs(x[b0 + i]));
      for (int i = 0; i < block; ++i) {
        const double e = std::fabs(static_cast<double>(y[b0 + i]) - x[b0 + i]);
        ASSERT_LE(e, error_bound(type) * amax)
            << traits(type).name << " seed " << seed << " element " << b0 + i;
        err2 += e * e;
        ref2 += static_cast<double>(x[b0 + i]) * x[b0 + i];
      }
    }
    EXPECT_LT(err2 / ref2, nmse_bound(type)) << traits(type).name << " seed " << seed;
  }
}

TEST_P(QuantizeRoundTrip, ScaledInputsScaleTheError) {
  // A block of small values must be quantized against its own scale, not an absolute one.
  const WeightType type = GetParam();
  auto x = uniform(512, 99, -1e-2f, 1e-2f);
  const auto y = round_trip(type, x);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], error_bound(type) * 1e-2 * 1.1) << i;
}

TEST_P(QuantizeRoundTrip, ZeroBlockDecodesToZeros) {
  const WeightType type = GetParam();
  const std::vector<float> x(512, 0.0f);
  const auto y = round_trip(type, x);
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

TEST_P(QuantizeRoundTrip, ConstantAndOneSidedBlocksDecodeClose) {
  const WeightType type = GetParam();
  for (float c : {0.5f, -0.75f}) {
    const std::vector<float> x(512, c);
    const auto y = round_trip(type, x);
    for (float v : y) EXPECT_NEAR(v, c, error_bound(type) * std::fabs(c)) << traits(type).name << c;
  }
  const auto positive = uniform(512, 5, 0.25f, 1.0f);
  const auto y = round_trip(type, positive);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], positive[i], error_bound(type)) << i;
}

TEST_P(QuantizeRoundTrip, HugeValuesNeverProduceNaNOrInfScales) {
  const WeightType type = GetParam();
  auto x = uniform(512, 8);
  x[3] = 1e30f;
  x[300] = -1e30f;
  const auto y = round_trip(type, x);
  for (float v : y) EXPECT_TRUE(std::isfinite(v));
}

TEST_P(QuantizeRoundTrip, MatrixIsRowByRow) {
  const WeightType type = GetParam();
  const int64_t od = 3, k = 512;
  const auto x = uniform(static_cast<size_t>(od * k), 21);
  const auto m = quantize_matrix(type, x.data(), od, k);
  const size_t rb = row_bytes(type, k);
  ASSERT_EQ(m.size(), rb * od);
  std::vector<uint8_t> row(rb);
  for (int64_t r = 0; r < od; ++r) {
    quantize_row(type, x.data() + r * k, row.data(), k);
    EXPECT_EQ(std::memcmp(row.data(), m.data() + r * rb, rb), 0) << r;
  }
}

TEST_P(QuantizeRoundTrip, RejectsRowLengthsThatAreNotWholeBlocks) {
  const WeightType type = GetParam();
  std::vector<float> x(300, 0.1f);
  std::vector<uint8_t> blocks(4096);
  EXPECT_THROW(quantize_row(type, x.data(), blocks.data(), 33), std::invalid_argument);
  EXPECT_THROW(dequantize_row(type, blocks.data(), x.data(), 33), std::invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantizeRoundTrip, ::testing::ValuesIn(all_types().begin(), all_types().end()),
                         [](const auto& info) { return std::string(traits(info.param).name); });

}  // namespace
}  // namespace qgate::quant
