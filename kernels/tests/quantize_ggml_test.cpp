// The `ggml` quantizer recipe: exact bytes for small blocks worked out by hand from llama.cpp's
// reference arithmetic (half-up truncation against 1/d of the unrounded d, roundf for q8_0, the
// q6_K/q4_K scale searches), round-trip error bounds for every type, and the `qgate` recipe's
// bytes pinned to what they were before the recipes existed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "qgate/common/fnv1a.h"
#include "qgate/quant/block_formats.h"
#include "qgate/quant/quantize.h"

namespace qgate::quant {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes quantize(WeightType type, const std::vector<float>& x, QuantRecipe recipe) {
  const auto k = static_cast<int64_t>(x.size());
  Bytes out(row_bytes(type, k), 0xCD);  // poison: every byte must be written
  quantize_row(type, x.data(), out.data(), k, recipe);
  return out;
}

// A reproducible row that depends on no library distribution: mt19937's output is specified
// by the standard, and the conversion to [-1, 1) is exact. Blocks further in are larger.
std::vector<float> seeded_row(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const float u = static_cast<float>(rng() >> 8) * (1.0f / 16777216.0f);
    v[i] = (2.0f * u - 1.0f) * (1.0f + static_cast<float>(i / 256));
  }
  return v;
}

// The first half's blocks have the extreme -1 and otherwise multiples of 1/32, so q4_0
// (id = 8) and q5_0 (id = 16) meet exact ties, where half-up, half-away and half-even rounding
// disagree; the second half is seeded_row's.
std::vector<float> ties_then_random(uint32_t seed) {
  std::vector<float> x = seeded_row(1024, seed);
  std::mt19937 rng(seed);
  for (size_t i = 0; i < x.size() / 2; ++i) {
    x[i] = i % 32 == 0 ? -1.0f : static_cast<float>(static_cast<int>(rng() % 63) - 31) / 32.0f;
  }
  return x;
}

std::string hex(const Bytes& b) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t c : b) {
    s += digits[c >> 4];
    s += digits[c & 15];
    s += ' ';
  }
  return s;
}

void append_f16(Bytes& b, uint16_t bits) {
  b.push_back(static_cast<uint8_t>(bits & 0xFF));
  b.push_back(static_cast<uint8_t>(bits >> 8));
}

// ---- hand-derived blocks ----

TEST(QuantizeGgml, Q4_0RoundsHalfUpAgainstTheSignedMax) {
  // The signed max is x[0] = 4 (x[5] = -4 ties in magnitude, the first wins), so
  // d = 4 / -8 = -0.5 (f16 0xb800) and id = -2. Code = trunc(x*id + 8.5), capped at 15:
  //   4 -> 0.5 -> 0;  -0.25 -> 9.0 -> 9 (round-half-even would give 8);
  //   0.75 -> 7.0 -> 7 (half-even: 6);  -3.5 -> 15.5 -> 15;  0 -> 8;  -4 -> 16.5 -> cap 15;
  //   1.25 -> 6.0 -> 6;  2 -> 4.5 -> 4;  3.9 -> 0.7 -> 0;  -1.1 -> 10.7 -> 10.
  std::vector<float> x(32, 0.0f);
  const float lo[] = {4.0f, -0.25f, 0.75f, -3.5f, 0.0f, -4.0f, 1.25f, 2.0f};
  std::copy(std::begin(lo), std::end(lo), x.begin());
  x[16] = 3.9f;
  x[17] = -1.1f;
  // qs[j] = code[j] | code[j + 16] << 4.
  Bytes want;
  append_f16(want, 0xb800);
  for (uint8_t q : {0x00, 0xa9, 0x87, 0x8f, 0x88, 0x8f, 0x86, 0x84}) want.push_back(q);
  for (int j = 8; j < 16; ++j) want.push_back(0x88);
  EXPECT_EQ(hex(quantize(WeightType::q4_0, x, QuantRecipe::ggml)), hex(want));
}

TEST(QuantizeGgml, Q4_0UsesTheUnroundedScaleForTheCodes) {
  // max 8.004: d = -1.0005, whose f16 is -1.0009765625 (0xbc01: 0.0005 is 0.512 of an f16 ulp
  // at 1, so it rounds up). With id = 1/d of the unrounded d, -6.504 * id = 6.50075 and
  // trunc(6.50075 + 8.5) = 15; against the stored d it would be 6.49765 -> 14.
  std::vector<float> x(32, 0.0f);
  x[0] = 8.004f;   // 8.004 * id = -8.0 -> 0.5 -> 0
  x[1] = -6.504f;  // 15
  Bytes want;
  append_f16(want, 0xbc01);
  want.push_back(0x80);  // code 0, and code 8 of x[16] = 0
  want.push_back(0x8f);
  for (int j = 2; j < 16; ++j) want.push_back(0x88);
  EXPECT_EQ(hex(quantize(WeightType::q4_0, x, QuantRecipe::ggml)), hex(want));
}

TEST(QuantizeGgml, Q8_0UsesRoundfWhereHalfEvenDiffers) {
  // Block 0: amax 127 -> d = 1 (f16 0x3c00), id = 1; roundf takes ties away from zero:
  //   0.5 -> 1 (half-even 0), -2.5 -> -3 (half-even -2), 1.5 -> 2, -0.5 -> -1, 3.25 -> 3.
  // Block 1: amax 100 -> d = 100/127 = 0.787401..., stored as f16 1613 * 2^-11 = 0.787597...
  //   (0x3a4d); 79.1417 * (127/100) = 100.51 -> 101, where the stored d would give 100.485 -> 100.
  std::vector<float> x(64, 0.0f);
  const float b0[] = {127.0f, 0.5f, -2.5f, 1.5f, -127.0f, -0.5f, 3.25f};
  std::copy(std::begin(b0), std::end(b0), x.begin());
  x[32] = 100.0f;  // 127
  x[33] = 79.1417f;
  Bytes want;
  append_f16(want, 0x3c00);
  for (uint8_t q : {0x7f, 0x01, 0xfd, 0x02, 0x81, 0xff, 0x03}) want.push_back(q);
  for (int j = 7; j < 32; ++j) want.push_back(0x00);
  append_f16(want, 0x3a4d);
  want.push_back(0x7f);
  want.push_back(0x65);  // 101
  for (int j = 2; j < 32; ++j) want.push_back(0x00);
  EXPECT_EQ(hex(quantize(WeightType::q8_0, x, QuantRecipe::ggml)), hex(want));
}

TEST(QuantizeGgml, Q4_1TruncatesFromTheMin) {
  // min -3, max 12: d = 15/15 = 1 (0x3c00), m = -3 (0xc200), id = 1; code = trunc((x+3) + 0.5):
  //   -3 -> 0;  12 -> 15;  -2.5 -> 1 (half-even 0);  0 -> 3;  1.5 -> 5 (half-even 4);  4.49 -> 7.
  std::vector<float> x(32, 0.0f);
  const float v[] = {-3.0f, 12.0f, -2.5f, 0.0f, 1.5f, 4.49f};
  std::copy(std::begin(v), std::end(v), x.begin());
  Bytes want;
  append_f16(want, 0x3c00);
  append_f16(want, 0xc200);
  for (uint8_t q : {0x30, 0x3f, 0x31, 0x33, 0x35, 0x37}) want.push_back(q);  // x[16..31] = 0 -> 3
  for (int j = 6; j < 16; ++j) want.push_back(0x33);
  EXPECT_EQ(hex(quantize(WeightType::q4_1, x, QuantRecipe::ggml)), hex(want));
}

TEST(QuantizeGgml, ZeroBlocks) {
  // d = 0 gives id = 0: q4_0 codes trunc(8.5) = 8, q5_0 trunc(16.5) = 16 (low nibbles 0, every
  // fifth bit set); the min types and q8_0 give 0. q4_0 and q5_0 store d = 0 / -8 = -0 (f16
  // 0x8000). The K-quants find no scale anywhere: all zero.
  for (WeightType type : all_types()) {
    const int k = traits(type).block_elems;
    const std::vector<float> x(k, 0.0f);
    Bytes want(traits(type).block_bytes, 0x00);
    // After the 2-byte d: q4_0's 16 qs bytes, q5_0's 4 qh bytes.
    if (type == WeightType::q4_0) for (size_t i = 2; i < want.size(); ++i) want[i] = 0x88;
    if (type == WeightType::q5_0) for (size_t i = 2; i < 6; ++i) want[i] = 0xff;
    if (type == WeightType::q4_0 || type == WeightType::q5_0) want[1] = 0x80;
    EXPECT_EQ(hex(quantize(type, x, QuantRecipe::ggml)), hex(want)) << traits(type).name;
  }
}

TEST(QuantizeGgml, Q6_KOneHotBlock) {
  // x[0] = 1, the rest 0. Group 0's search: extreme 1, grid -32 -> l = -32 for x[0]; weights
  // x^2, so scale = (1*1*-32) / (1*32*32) = -1/32 and no other grid is strictly better (grids
  // -31.x give l = -31 or -32 and the same ratio). Groups 1..15 are below 1e-15: scale 0 and
  // codes 0. d = 1 / (-128 / (-1/32)) = 2^-12 (f16 0x0c00); int8 scales -128, then 0.
  // Group 0 again against d*(-128) = -1/32: x[0] -> -32 -> code 0, zeros -> code 32. Groups with
  // scale 0 keep the search's codes, 0. Packing: ql nibbles all 0 (32 & 15 = 0); qh[l] for
  // l = 1..15 gets code 32 >> 4 = 2 in bits 0-1.
  std::vector<float> x(256, 0.0f);
  x[0] = 1.0f;
  Bytes want(sizeof(BlockQ6_K), 0x00);
  auto* b = reinterpret_cast<BlockQ6_K*>(want.data());
  for (int l = 1; l < 16; ++l) b->qh[l] = 2;
  b->scales[0] = -128;
  b->d = 0x0c00;
  EXPECT_EQ(hex(quantize(WeightType::q6_K, x, QuantRecipe::ggml)), hex(want));
}

TEST(QuantizeGgml, Q4_KOneHotBlock) {
  // x[0] = 1, the rest 0. Sub-block 0: min 0, max 1; the plain grid 15 gives codes 15 and 0,
  // scale 1/15 with error exactly 0 (fl(1/15) * 15 rounds to 1), so no candidate beats it; the
  // fitted min is 0. Sub-blocks 1..7 are constant: scale 0, codes 0. d = f16((1/15)/63) =
  // f16(0.0010582) = 1.083984375 * 2^-10 (mantissa 85.6 -> 86: 0x1456), dmin = 0; 6-bit scale
  // 63 for sub-block 0, 0 elsewhere. Requantized against 0x1456 * 63 = 0.066690: x[0] -> 14.995
  // -> 15.
  std::vector<float> x(256, 0.0f);
  x[0] = 1.0f;
  Bytes want(sizeof(BlockQ4_K), 0x00);
  auto* b = reinterpret_cast<BlockQ4_K*>(want.data());
  b->d = 0x1456;
  b->scales[0] = 63;
  b->qs[0] = 0x0f;
  EXPECT_EQ(hex(quantize(WeightType::q4_K, x, QuantRecipe::ggml)), hex(want));
}

TEST(QuantizeGgml, Q6_KGivesTheLargestGroupScaleMinus128) {
  // ggml maps the group of largest |scale| to int8 -128 (iscale = -128 / max_scale); the other
  // groups stay within [-128, 127].
  const auto x = seeded_row(1024, 7);
  const Bytes q = quantize(WeightType::q6_K, x, QuantRecipe::ggml);
  for (size_t off = 0; off < q.size(); off += sizeof(BlockQ6_K)) {
    const auto* b = reinterpret_cast<const BlockQ6_K*>(q.data() + off);
    EXPECT_EQ(*std::min_element(b->scales, b->scales + 16), -128) << off;
  }
}

// ---- round trips ----

// Largest decode error as a fraction of the block's largest |x|. Legacy types: half a step
// (a full step at the clamped end of q4_0/q5_0), plus the f16 rounding of d and m, which the
// codes do not see (they use the unrounded d): q8_0 adds 127 * d * 2^-11 = amax * 2^-11.
// K-quants: the search minimises the weighted squared error and may shrink a grid so that the
// extreme clamps: up to 1.25 steps of a grid over 2*amax. q6_K: half a step of amax/32 plus its
// int8 scale rounding.
double ggml_error_bound(WeightType type) {
  switch (type) {
    case WeightType::q4_0: return 1.0 / 8 * 1.05;
    case WeightType::q4_1: return 2.0 / 30 * 1.1;
    case WeightType::q5_0: return 1.0 / 16 * 1.05;
    case WeightType::q5_1: return 2.0 / 62 * 1.1;
    case WeightType::q8_0: return (0.5 / 127 + 1.0 / 2048) * 1.05;
    case WeightType::q4_K: return 1.25 * 2.0 / 15;
    case WeightType::q5_K: return 1.25 * 2.0 / 31;
    case WeightType::q6_K: return 1.0 / 32 * 1.05;
  }
  return 0;
}

double nmse_bound(WeightType type) {
  switch (type) {
    case WeightType::q4_0: case WeightType::q4_1: case WeightType::q4_K: return 6e-3;
    case WeightType::q5_0: case WeightType::q5_1: case WeightType::q5_K: return 1.6e-3;
    case WeightType::q6_K: return 4e-4;
    case WeightType::q8_0: return 2e-5;
  }
  return 0;
}

struct RoundTrip {
  double worst_rel = 0;  // max |y - x| / block amax
  double err2 = 0, ref2 = 0;
};

RoundTrip round_trip(WeightType type, QuantRecipe recipe, const std::vector<float>& x) {
  const auto k = static_cast<int64_t>(x.size());
  const Bytes q = quantize(type, x, recipe);
  std::vector<float> y(x.size());
  dequantize_row(type, q.data(), y.data(), k);
  RoundTrip r;
  const int block = traits(type).block_elems;
  for (size_t b0 = 0; b0 < x.size(); b0 += block) {
    float amax = 0;
    for (int i = 0; i < block; ++i) amax = std::max(amax, std::fabs(x[b0 + i]));
    for (int i = 0; i < block; ++i) {
      const double e = std::fabs(static_cast<double>(y[b0 + i]) - x[b0 + i]);
      if (amax > 0) r.worst_rel = std::max(r.worst_rel, e / amax);
      r.err2 += e * e;
      r.ref2 += static_cast<double>(x[b0 + i]) * x[b0 + i];
    }
  }
  return r;
}

class QuantizeGgmlTypes : public ::testing::TestWithParam<WeightType> {};

TEST_P(QuantizeGgmlTypes, RoundTripStaysWithinTheErrorBound) {
  const WeightType type = GetParam();
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    const RoundTrip r = round_trip(type, QuantRecipe::ggml, seeded_row(1024, seed));
    EXPECT_LE(r.worst_rel, ggml_error_bound(type)) << traits(type).name << " seed " << seed;
    EXPECT_LT(r.err2 / r.ref2, nmse_bound(type)) << traits(type).name << " seed " << seed;
  }
}

TEST_P(QuantizeGgmlTypes, MatrixIsRowByRowWithTheRecipe) {
  const WeightType type = GetParam();
  const int64_t od = 3, k = 512;
  const auto x = seeded_row(static_cast<size_t>(od * k), 21);
  const Bytes m = quantize_matrix(type, x.data(), od, k, QuantRecipe::ggml);
  const size_t rb = row_bytes(type, k);
  ASSERT_EQ(m.size(), rb * od);
  for (int64_t r = 0; r < od; ++r) {
    const std::vector<float> row(x.begin() + r * k, x.begin() + (r + 1) * k);
    EXPECT_EQ(hex(quantize(type, row, QuantRecipe::ggml)), hex(Bytes(m.begin() + r * rb, m.begin() + (r + 1) * rb)))
        << r;
  }
}

TEST_P(QuantizeGgmlTypes, RejectsRowLengthsThatAreNotWholeBlocks) {
  const WeightType type = GetParam();
  std::vector<float> x(300, 0.1f);
  Bytes blocks(4096);
  EXPECT_THROW(quantize_row(type, x.data(), blocks.data(), 33, QuantRecipe::ggml), std::invalid_argument);
}

// ---- the qgate recipe is unchanged ----

uint64_t fnv1a(const Bytes& b) { return common::fnv1a64(b.data(), b.size()); }

// FNV-1a of the qgate quantizer's bytes for ties_then_random(20261130), recorded from the
// quantizer as it was before recipes existed (its ties round half to even).
uint64_t qgate_bytes_hash(WeightType type) {
  switch (type) {
    case WeightType::q4_0: return 0x48a60d4de89c1965ull;
    case WeightType::q4_1: return 0xef5e64a6eb7eada2ull;
    case WeightType::q5_0: return 0x516df9823b0c4359ull;
    case WeightType::q5_1: return 0xef97aedb73374345ull;
    case WeightType::q8_0: return 0x1e93e2432b2aa5c7ull;
    case WeightType::q4_K: return 0xe8beaa1890bd2f58ull;
    case WeightType::q5_K: return 0x1bef3808b509bf79ull;
    case WeightType::q6_K: return 0x771145d1fc0ce798ull;
  }
  return 0;
}

TEST_P(QuantizeGgmlTypes, QgateRecipeIsUnchangedAndTheDefault) {
  const WeightType type = GetParam();
  const auto x = ties_then_random(20261130u);
  const Bytes explicit_qgate = quantize(type, x, QuantRecipe::qgate);
  Bytes by_default(row_bytes(type, 1024), 0xCD);
  quantize_row(type, x.data(), by_default.data(), 1024);
  EXPECT_EQ(fnv1a(explicit_qgate), qgate_bytes_hash(type)) << traits(type).name;
  EXPECT_EQ(hex(by_default), hex(explicit_qgate)) << traits(type).name;
  EXPECT_EQ(quantize_matrix(type, x.data(), 1, 1024), explicit_qgate) << traits(type).name;
}

TEST_P(QuantizeGgmlTypes, RecipesDifferOnARow) {
  // A guard that the recipe argument is not ignored anywhere.
  const WeightType type = GetParam();
  const auto x = ties_then_random(3);
  EXPECT_TRUE(quantize(type, x, QuantRecipe::ggml) != quantize(type, x, QuantRecipe::qgate))
      << traits(type).name;
}

// FNV-1a of the bytes that llama.cpp's reference quantizer (quantize_row_*_ref in ggml-quants.c,
// ggml commit d99724f, built for x86-64 without FMA) writes for ties_then_random(20261130):
// a pin for the parts the hand-made blocks above do not reach (the full K-quant searches).
uint64_t llama_cpp_bytes_hash(WeightType type) {
  switch (type) {
    case WeightType::q4_0: return 0xbc440eb8fdf0188eull;
    case WeightType::q4_1: return 0x719585035f2e2d9bull;
    case WeightType::q5_0: return 0xf78d50f9efa1cedcull;
    case WeightType::q5_1: return 0xf64987b42eb8ec0aull;
    case WeightType::q8_0: return 0xdd17b05c0d0965e3ull;
    case WeightType::q4_K: return 0xe8982ccb688583daull;
    case WeightType::q5_K: return 0xb4190043418cf04bull;
    case WeightType::q6_K: return 0xae4c3b9be164022cull;
  }
  return 0;
}

TEST_P(QuantizeGgmlTypes, MatchesPinnedLlamaCppBytes) {
  const WeightType type = GetParam();
  EXPECT_EQ(fnv1a(quantize(type, ties_then_random(20261130u), QuantRecipe::ggml)), llama_cpp_bytes_hash(type))
      << traits(type).name;
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantizeGgmlTypes, ::testing::ValuesIn(all_types().begin(), all_types().end()),
                         [](const auto& info) { return std::string(traits(info.param).name); });

class QuantizeGgmlKTypes : public ::testing::TestWithParam<WeightType> {};

TEST_P(QuantizeGgmlKTypes, SearchBeatsThePlainGrid) {
  // The point of ggml's K-quant search: a lower squared error than qgate's plain per-block grid.
  const WeightType type = GetParam();
  double ggml_err = 0, qgate_err = 0;
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    const auto x = seeded_row(1024, seed);
    ggml_err += round_trip(type, QuantRecipe::ggml, x).err2;
    qgate_err += round_trip(type, QuantRecipe::qgate, x).err2;
  }
  EXPECT_LT(ggml_err, 0.95 * qgate_err) << traits(type).name;
}

INSTANTIATE_TEST_SUITE_P(KQuants, QuantizeGgmlKTypes,
                         ::testing::Values(WeightType::q4_K, WeightType::q5_K, WeightType::q6_K),
                         [](const auto& info) { return std::string(traits(info.param).name); });

TEST(QuantRecipeNames, ParseAndPrint) {
  for (QuantRecipe r : {QuantRecipe::qgate, QuantRecipe::ggml}) {
    EXPECT_EQ(parse_recipe(to_string(r)), r);
  }
  EXPECT_EQ(to_string(QuantRecipe::ggml), "ggml");
  EXPECT_EQ(to_string(QuantRecipe::qgate), "qgate");
  EXPECT_EQ(parse_recipe("GGML"), QuantRecipe::ggml);
  EXPECT_EQ(parse_recipe("QGate"), QuantRecipe::qgate);
  EXPECT_FALSE(parse_recipe(""));
  EXPECT_FALSE(parse_recipe("ggml "));
  EXPECT_FALSE(parse_recipe("llama"));
}

// Not a check: the RMSE table of bench/RESULTS.md ("Quantizer recipes: qgate vs ggml RMSE").
// Run with --gtest_also_run_disabled_tests --gtest_filter='*RecipeRmseTable*'; QGATE_RMSE_ROWS
// sets the number of rows of 4096 (default 4096). Uniform rows are U[-1, 1) and gaussian rows
// N(0, 1) (Box-Muller), both from mt19937 seeded per distribution.
TEST(QuantizeRecipeRmse, DISABLED_RecipeRmseTable) {
  const char* rows_env = std::getenv("QGATE_RMSE_ROWS");
  const int64_t rows = rows_env ? std::atoll(rows_env) : 4096;
  constexpr int64_t k = 4096;
  std::printf("| type | uniform: qgate | uniform: ggml | ggml/qgate | gaussian: qgate | gaussian: ggml | ggml/qgate |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (WeightType type : all_types()) {
    double rmse[2][2] = {};  // [distribution][recipe]
    for (int dist = 0; dist < 2; ++dist) {
      std::mt19937 rng(dist == 0 ? 101u : 202u);
      auto unit = [&] { return (static_cast<double>(rng() >> 8) + 0.5) / 16777216.0; };  // (0, 1)
      std::vector<float> x(k), y(k);
      Bytes q(row_bytes(type, k));
      double err2[2] = {};
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t i = 0; i < k; i += 2) {
          if (dist == 0) {
            x[i] = static_cast<float>(2 * unit() - 1);
            x[i + 1] = static_cast<float>(2 * unit() - 1);
          } else {
            const double radius = std::sqrt(-2 * std::log(unit()));
            const double angle = 2 * std::numbers::pi * unit();
            x[i] = static_cast<float>(radius * std::cos(angle));
            x[i + 1] = static_cast<float>(radius * std::sin(angle));
          }
        }
        for (int recipe = 0; recipe < 2; ++recipe) {
          quantize_row(type, x.data(), q.data(), k, recipe == 0 ? QuantRecipe::qgate : QuantRecipe::ggml);
          dequantize_row(type, q.data(), y.data(), k);
          for (int64_t i = 0; i < k; ++i) {
            const double e = static_cast<double>(y[i]) - x[i];
            err2[recipe] += e * e;
          }
        }
      }
      for (int recipe = 0; recipe < 2; ++recipe) rmse[dist][recipe] = std::sqrt(err2[recipe] / (rows * k));
    }
    std::printf("| %s | %.6f | %.6f | %.4f | %.6f | %.6f | %.4f |\n", std::string(traits(type).name).c_str(),
                rmse[0][0], rmse[0][1], rmse[0][1] / rmse[0][0], rmse[1][0], rmse[1][1], rmse[1][1] / rmse[1][0]);
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace qgate::quant
