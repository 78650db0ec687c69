// Block formats: the byte-compatibility proof: blocks built byte by byte from ggml's documented
// layouts decode to known values at known element positions (the types' facts: common/tests).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "qgate/quant/block_formats.h"
#include "qgate/quant/quantize.h"

namespace qgate::quant {
namespace {

constexpr uint16_t kF16One = 0x3c00;
constexpr uint16_t kF16Two = 0x4000;
constexpr uint16_t kF16Half = 0x3800;
constexpr uint16_t kF16Quarter = 0x3400;
constexpr uint16_t kF16MinusOne = 0xbc00;

template <typename Block>
std::vector<float> decode(WeightType type, const Block& block) {
  std::vector<float> y(static_cast<size_t>(traits(type).block_elems));
  dequantize_row(type, &block, y.data(), static_cast<int64_t>(y.size()));
  return y;
}

TEST(BlockFormats, Q4_0LowNibbleIsElementJHighNibbleIsElementJPlus16) {
  BlockQ4_0 b{};
  b.d = kF16Two;
  std::memset(b.qs, 0x88, sizeof(b.qs));  // every nibble 8 -> value 0
  b.qs[3] = 0xA5;                         // element 3: (5-8)*2, element 19: (10-8)*2
  const auto y = decode(WeightType::q4_0, b);
  for (int i = 0; i < 32; ++i) {
    const float expected = i == 3 ? -6.0f : i == 19 ? 4.0f : 0.0f;
    EXPECT_EQ(y[i], expected) << i;
  }
}

TEST(BlockFormats, Q4_1AddsTheMin) {
  BlockQ4_1 b{};
  b.d = kF16Half;
  b.m = kF16MinusOne;
  b.qs[0] = 0x3F;  // element 0: 15*0.5-1, element 16: 3*0.5-1
  const auto y = decode(WeightType::q4_1, b);
  for (int i = 0; i < 32; ++i) {
    const float expected = i == 0 ? 6.5f : i == 16 ? 0.5f : -1.0f;
    EXPECT_EQ(y[i], expected) << i;
  }
}

TEST(BlockFormats, Q5_0HighBitsAreALittleEndianWord) {
  BlockQ5_0 b{};
  b.d = kF16One;
  b.qs[5] = 0x03;   // element 5 low bits 3
  b.qs[4] = 0x70;   // element 20 low bits 7
  b.qs[9] = 0x20;   // element 25 low bits 2
  b.qh[0] = 0x20;   // bit 5  -> element 5
  b.qh[2] = 0x10;   // bit 20 -> element 20
  b.qh[3] = 0x02;   // bit 25 -> element 25
  const auto y = decode(WeightType::q5_0, b);
  for (int i = 0; i < 32; ++i) {
    const float expected = i == 5 ? 3.0f : i == 20 ? 7.0f : i == 25 ? 2.0f : -16.0f;
    EXPECT_EQ(y[i], expected) << i;
  }
}

TEST(BlockFormats, Q5_1HighBitsAndMin) {
  BlockQ5_1 b{};
  b.d = kF16Two;
  b.m = kF16Half;
  b.qs[15] = 0xF1;  // element 15 low 1, element 31 low 15
  b.qh[1] = 0x80;   // bit 15 -> element 15
  b.qh[3] = 0x80;   // bit 31 -> element 31
  b.qh[0] = 0x01;   // bit 0 -> element 0 (low bits 0)
  const auto y = decode(WeightType::q5_1, b);
  for (int i = 0; i < 32; ++i) {
    const float expected = i == 15 ? 17 * 2.0f + 0.5f
                         : i == 31 ? 31 * 2.0f + 0.5f
                         : i == 0  ? 16 * 2.0f + 0.5f
                                   : 0.5f;
    EXPECT_EQ(y[i], expected) << i;
  }
}

TEST(BlockFormats, Q8_0IsSignedBytesTimesD) {
  BlockQ8_0 b{};
  b.d = kF16Quarter;
  b.qs[7] = -100;
  b.qs[31] = 127;
  b.qs[0] = -128;
  const auto y = decode(WeightType::q8_0, b);
  for (int i = 0; i < 32; ++i) {
    const float expected = i == 7 ? -25.0f : i == 31 ? 31.75f : i == 0 ? -32.0f : 0.0f;
    EXPECT_EQ(y[i], expected) << i;
  }
}

// Packed scales used by both K-quant tests: sub-block 1 has scale 3 / min 2 (6-bit fields of
// bytes 1 and 5); sub-block 6 has scale 45 = 0b10'1101 / min 33 = 0b10'0001, split as low
// nibbles in byte 10 and top two bits in bytes 2 and 6. Everything else is 0.
void set_k_test_scales(uint8_t scales[12]) {
  std::memset(scales, 0, 12);
  scales[1] = 3;
  scales[5] = 2;
  scales[10] = 0x1D;  // low nibble 13 (scale 6), high nibble 1 (min 6)
  scales[2] = 0x80;   // top bits of scale 6
  scales[6] = 0x80;   // top bits of min 6
}

TEST(BlockFormats, Q4_KScalesAndNibbleOrder) {
  BlockQ4_K b{};
  b.d = kF16One;
  b.dmin = kF16Half;
  set_k_test_scales(b.scales);
  b.qs[4] = 0x70;    // high nibble: element 32+4 (sub-block 1); low nibble element 4 (sub-block 0)
  b.qs[100] = 0x09;  // low nibble: element 192+4 (sub-block 6)
  const auto y = decode(WeightType::q4_K, b);
  for (int i = 0; i < 256; ++i) {
    float expected = 0.0f;
    if (i >= 32 && i < 64) expected = -1.0f;     // sub-block 1: 3*q - 0.5*2
    if (i >= 192 && i < 224) expected = -16.5f;  // sub-block 6: 45*q - 0.5*33
    if (i == 36) expected = 3.0f * 7 - 1.0f;
    if (i == 196) expected = 45.0f * 9 - 16.5f;
    EXPECT_EQ(y[i], expected) << i;
  }
}

TEST(BlockFormats, Q5_KHighBitPairs) {
  BlockQ5_K b{};
  b.d = kF16One;
  b.dmin = kF16Half;
  set_k_test_scales(b.scales);
  b.qs[4] = 0x70;
  b.qs[100] = 0x09;
  b.qh[4] = 0x02 | 0x40;  // bit 1: element 32+4; bit 6: element 192+4
  b.qh[9] = 0x02;         // bit 1 of qh[9]: element 32+9 gets q = 16
  const auto y = decode(WeightType::q5_K, b);
  for (int i = 0; i < 256; ++i) {
    float expected = 0.0f;
    if (i >= 32 && i < 64) expected = -1.0f;
    if (i >= 192 && i < 224) expected = -16.5f;
    if (i == 36) expected = 3.0f * 23 - 1.0f;
    if (i == 41) expected = 3.0f * 16 - 1.0f;
    if (i == 196) expected = 45.0f * 25 - 16.5f;
    EXPECT_EQ(y[i], expected) << i;
  }
}

TEST(BlockFormats, Q6_KLayoutAndSubScales) {
  BlockQ6_K b{};
  b.d = kF16Half;
  for (int s = 0; s < 16; ++s) b.scales[s] = static_cast<int8_t>(s + 1);
  b.scales[13] = -3;
  // Element 77 = 64 + 13: high nibble of ql[13], bits 4-5 of qh[13]; q = 5 | 2<<4 = 37.
  b.ql[13] = 0x50;
  b.qh[13] = 0x20;
  // Element 40 = 32 + 8: low nibble of ql[40], bits 2-3 of qh[8]; q = 12 | 1<<4 = 28.
  b.ql[40] = 0x0C;
  b.qh[8] = 0x04;
  // Element 234 = 128 + 96 + 10: high nibble of ql[64+32+10], bits 6-7 of qh[32+10]; q = 63.
  b.ql[106] = 0xF0;
  b.qh[42] = 0xC0;
  // Element 129 = 128 + 1: low nibble of ql[65], bits 0-1 of qh[33]; q = 4 | 3<<4 = 52.
  b.ql[65] = 0x04;
  b.qh[33] = 0x03;
  const auto y = decode(WeightType::q6_K, b);
  for (int i = 0; i < 256; ++i) {
    const float scale = 0.5f * static_cast<float>(b.scales[i / 16]);
    float expected = scale * -32.0f;
    if (i == 77) expected = 0.5f * 5 * 5;        // scale index 4
    if (i == 40) expected = 0.5f * 3 * -4;       // scale index 2
    if (i == 234) expected = 0.5f * 15 * 31;     // scale index 14
    if (i == 129) expected = 0.5f * 9 * 20;      // scale index 8
    EXPECT_EQ(y[i], expected) << i;
  }
  EXPECT_EQ(y[210], 48.0f);  // sub-block 13 with its negative scale: 0.5 * -3 * -32
}

}  // namespace
}  // namespace qgate::quant
