// f32 <-> f16 conversion: exact encodings at the edges (ties, subnormals, overflow, Inf, NaN)
// and agreement with the compiler's own _Float16 where the compiler has one.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "qgate/quant/half.h"

namespace qgate::quant {
namespace {

TEST(Half, EncodesOrdinaryValuesExactly) {
  EXPECT_EQ(f32_to_f16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(0.5f), 0x3800);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);  // largest finite f16
  EXPECT_EQ(f32_to_f16(0.333251953125f), 0x3555);
}

TEST(Half, RoundsTiesToEvenInTheNormalRange) {
  const float ulp = std::ldexp(1.0f, -10);  // f16 spacing just above 1
  EXPECT_EQ(f32_to_f16(1.0f + ulp / 2), 0x3c00);      // tie, 1.0 is even
  EXPECT_EQ(f32_to_f16(1.0f + 3 * ulp / 2), 0x3c02);  // tie, 1+2ulp is even
  EXPECT_EQ(f32_to_f16(std::nextafter(1.0f + ulp / 2, 2.0f)), 0x3c01);  // just above the tie
  EXPECT_EQ(f32_to_f16(std::nextafter(1.0f + ulp / 2, 0.0f)), 0x3c00);  // just below it
  // A carry out of the mantissa moves to the next binade.
  EXPECT_EQ(f32_to_f16(std::nextafter(2.0f, 0.0f)), 0x4000);
}

TEST(Half, OverflowsToInfinityOnlyPastTheRoundingBoundary) {
  EXPECT_EQ(f32_to_f16(65519.99f), 0x7bff);  // rounds down to 65504
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);   // tie between 65504 and 65536: rounds to Inf
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);
  EXPECT_EQ(f32_to_f16(-1e30f), 0xfc00);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::max()), 0x7c00);
}

TEST(Half, HandlesInfinityAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_f16(inf), 0x7c00);
  EXPECT_EQ(f32_to_f16(-inf), 0xfc00);
  const uint16_t nan_bits = f32_to_f16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan_bits & 0x7c00, 0x7c00);
  EXPECT_NE(nan_bits & 0x03ff, 0);  // still a NaN, not Inf
  // A signalling NaN whose payload sits only in low bits must not collapse into Inf.
  EXPECT_NE(f32_to_f16(std::bit_cast<float>(0x7f800001u)) & 0x03ff, 0);
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0xfc01)));
  EXPECT_EQ(f16_to_f32(0x7c00), inf);
  EXPECT_EQ(f16_to_f32(0xfc00), -inf);
}

TEST(Half, HandlesSubnormals) {
  const float tiny = std::ldexp(1.0f, -24);  // smallest f16 subnormal
  EXPECT_EQ(f32_to_f16(tiny), 0x0001);
  EXPECT_EQ(f32_to_f16(-tiny), 0x8001);
  EXPECT_EQ(f32_to_f16(tiny / 2), 0x0000);                    // tie with 0: even is 0
  EXPECT_EQ(f32_to_f16(std::nextafter(tiny / 2, 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_f16(tiny * 1.5f), 0x0002);                 // tie between 1 and 2: 2
  EXPECT_EQ(f32_to_f16(tiny * 2.5f), 0x0002);                 // tie between 2 and 3: 2
  EXPECT_EQ(f32_to_f16(std::ldexp(1023.0f, -24)), 0x03ff);    // largest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);       // smallest normal
  EXPECT_EQ(f32_to_f16(std::ldexp(1023.5f, -24)), 0x0400);    // tie rounds up into the normals
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(f32_to_f16(-std::numeric_limits<float>::denorm_min()), 0x8000);
  EXPECT_EQ(f16_to_f32(0x0001), tiny);
  EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16_to_f32(0x8200), -std::ldexp(512.0f, -24));
}

TEST(Half, EveryNonNaNBitPatternRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = f16_to_f32(h);
    if ((h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << bits;
      continue;
    }
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << bits;
    EXPECT_EQ(round_to_f16(f), f);
  }
}

TEST(Half, RoundsToTheNearestRepresentable) {
  // Independent check without compiler support: the result is at least as close as either
  // neighbouring f16, and on a tie it is the even one.
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any_bits(0, 0xffffffffu);
  for (int i = 0; i < 200000; ++i) {
    const float f = std::bit_cast<float>(any_bits(rng) & 0xbfffffffu);  // |f| < 2, many subnormal-ish
    const float scaled = std::ldexp(f, static_cast<int>(i % 40) - 30);
    if (!std::isfinite(scaled) || std::fabs(scaled) >= 65504.0f) continue;
    const uint16_t h = f32_to_f16(scaled);
    const double chosen = f16_to_f32(h);
    const double err = std::fabs(chosen - scaled);
    for (int step : {-1, 1}) {
      const uint16_t neighbour = static_cast<uint16_t>(h + step);
      if ((h & 0x7fff) == 0 && step == -1) continue;
      const float nv = f16_to_f32(neighbour);
      if (!std::isfinite(nv) || (std::signbit(nv) != std::signbit(chosen) && chosen != 0)) continue;
      const double nerr = std::fabs(static_cast<double>(nv) - scaled);
      ASSERT_LE(err, nerr) << scaled;
      if (err == nerr) ASSERT_EQ(h & 1, 0) << "tie not to even at " << scaled;
    }
  }
}

#if defined(__FLT16_MAX__)
TEST(Half, MatchesTheCompilersFloat16) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> any_bits(0, 0xffffffffu);
  for (int i = 0; i < 1000000; ++i) {
    const float f = std::bit_cast<float>(any_bits(rng));
    if (std::isnan(f)) continue;
    const _Float16 h = static_cast<_Float16>(f);
    ASSERT_EQ(f32_to_f16(f), std::bit_cast<uint16_t>(h)) << f;
  }
}
#endif

}  // namespace
}  // namespace qgate::quant
