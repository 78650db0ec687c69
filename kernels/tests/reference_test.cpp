// The CPU references against naive f64 restatements of their definitions, and their
// independence from the thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "qgate/quant/block_formats.h"
#include "qgate/quant/half.h"
#include "qgate/quant/mmq_math.h"
#include "qgate/quant/quantize.h"
#include "qgate/quant/reference.h"

namespace qgate::quant {
namespace {

std::vector<float> uniform(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Case {
  std::vector<uint8_t> weights;
  std::vector<float> x;
  int64_t nt, od, k;
};

Case make_case(WeightType type, int64_t nt, int64_t od, int64_t k, uint32_t seed) {
  const auto w = uniform(static_cast<size_t>(od * k), seed);
  return {quantize_matrix(type, w.data(), od, k), uniform(static_cast<size_t>(nt * k), seed + 100), nt, od, k};
}

std::vector<double> dequantized_weights(WeightType type, const Case& c) {
  std::vector<float> row(c.k);
  std::vector<double> w(c.od * c.k);
  for (int64_t o = 0; o < c.od; ++o) {
    dequantize_row(type, c.weights.data() + o * row_bytes(type, c.k), row.data(), c.k);
    for (int64_t i = 0; i < c.k; ++i) w[o * c.k + i] = row[i];
  }
  return w;
}

class ReferenceTest : public ::testing::TestWithParam<WeightType> {};

TEST_P(ReferenceTest, MmqEqualsTheDotOfDequantizedWeightsAndQ8Activations) {
  const WeightType type = GetParam();
  const Case c = make_case(type, 3, 5, 512, 42);
  const auto w = dequantized_weights(type, c);
  // Activations as the MMQ path sees them: d (f16-rounded) times q.
  const Q8Activations a = quantize_activations_q8(c.x.data(), c.nt, c.k);
  std::vector<double> y(c.nt * c.od);
  reference_mmq(type, c.weights.data(), c.od, c.k, c.x.data(), c.nt, y.data());
  for (int64_t t = 0; t < c.nt; ++t) {
    for (int64_t o = 0; o < c.od; ++o) {
      double expected = 0, magnitude = 0;
      for (int64_t i = 0; i < c.k; ++i) {
        const double xa = static_cast<double>(a.d[t * (c.k / kQK) + i / kQK]) * a.q[t * c.k + i];
        expected += w[o * c.k + i] * xa;
        magnitude += std::fabs(w[o * c.k + i] * xa);
      }
      EXPECT_NEAR(y[t * c.od + o], expected, 1e-9 * magnitude) << traits(type).name << " t" << t << " o" << o;
    }
  }
}

TEST_P(ReferenceTest, F16EqualsTheDotOfF16RoundedOperands) {
  const WeightType type = GetParam();
  const Case c = make_case(type, 4, 3, 256, 7);
  const auto w = dequantized_weights(type, c);
  std::vector<double> y(c.nt * c.od);
  reference_f16(type, c.weights.data(), c.od, c.k, c.x.data(), c.nt, y.data());
  for (int64_t t = 0; t < c.nt; ++t) {
    for (int64_t o = 0; o < c.od; ++o) {
      double expected = 0, magnitude = 0;
      for (int64_t i = 0; i < c.k; ++i) {
        const double p = static_cast<double>(round_to_f16(static_cast<float>(w[o * c.k + i]))) *
                         static_cast<double>(round_to_f16(c.x[t * c.k + i]));
        expected += p;
        magnitude += std::fabs(p);
      }
      EXPECT_NEAR(y[t * c.od + o], expected, 1e-12 * magnitude) << traits(type).name;
    }
  }
}

TEST_P(ReferenceTest, ResultDoesNotDependOnTheThreadCount) {
  const WeightType type = GetParam();
  const Case c = make_case(type, 9, 37, 512, 3);
  std::vector<double> one(c.nt * c.od), many(c.nt * c.od), f16_one(c.nt * c.od), f16_many(c.nt * c.od);
  reference_mmq(type, c.weights.data(), c.od, c.k, c.x.data(), c.nt, one.data(), 1);
  reference_mmq(type, c.weights.data(), c.od, c.k, c.x.data(), c.nt, many.data(), 3);
  reference_f16(type, c.weights.data(), c.od, c.k, c.x.data(), c.nt, f16_one.data(), 1);
  reference_f16(type, c.weights.data(), c.od, c.k, c.x.data(), c.nt, f16_many.data(), 4);
  EXPECT_EQ(one, many);
  EXPECT_EQ(f16_one, f16_many);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, ReferenceTest, ::testing::ValuesIn(all_types().begin(), all_types().end()),
                         [](const auto& info) { return std::string(traits(info.param).name); });

TEST(Reference, MmqUsesQuantizedActivationsNotRawOnes) {
  // The MMQ reference differs from an f64 dot with the raw activations by the q8 error: if it
  // silently used raw x, this difference would vanish.
  const WeightType type = WeightType::q8_0;
  const Case c = make_case(type, 2, 2, 256, 11);
  const auto w = dequantized_weights(type, c);
  std::vector<double> y(c.nt * c.od);
  reference_mmq(type, c.weights.data(), c.od, c.k, c.x.data(), c.nt, y.data());
  double max_diff = 0;
  for (int64_t t = 0; t < c.nt; ++t) {
    for (int64_t o = 0; o < c.od; ++o) {
      double raw = 0;
      for (int64_t i = 0; i < c.k; ++i) raw += w[o * c.k + i] * c.x[t * c.k + i];
      max_diff = std::max(max_diff, std::fabs(raw - y[t * c.od + o]));
    }
  }
  EXPECT_GT(max_diff, 1e-6);
  EXPECT_LT(max_diff, 0.1);
}

}  // namespace
}  // namespace qgate::quant
