// IEEE binary16 <-> binary32 conversion by bit manipulation, so host results match a GPU's
// __float2half_rn / __half2float exactly without relying on a compiler's _Float16 support.
#include "qgate/quant/half.h"

#include <bit>
#include <cmath>

namespace qgate::quant {

namespace {

constexpr uint32_t kF32SignMask = 0x80000000u;
constexpr uint32_t kF32ExpMask = 0x7f800000u;
constexpr uint32_t kF32MantMask = 0x007fffffu;
constexpr uint16_t kF16Inf = 0x7c00;
constexpr uint16_t kF16QuietBit = 0x0200;

// Shifts `mantissa` right by `shift` bits, rounding the dropped bits to nearest, ties to even.
uint32_t shift_right_round_even(uint32_t mantissa, int shift) {
  const uint32_t kept = mantissa >> shift;
  const uint32_t dropped = mantissa & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (dropped > half || (dropped == half && (kept & 1u))) return kept + 1u;
  return kept;
}

}  // namespace

uint16_t f32_to_f16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const auto sign = static_cast<uint16_t>((bits & kF32SignMask) >> 16);
  const uint32_t magnitude = bits & ~kF32SignMask;
  const int biased_exp = static_cast<int>(magnitude >> 23);
  const uint32_t mantissa = magnitude & kF32MantMask;

  if ((magnitude & kF32ExpMask) == kF32ExpMask) {
    if (mantissa == 0) return sign | kF16Inf;
    // Keep the top payload bits and force the quiet bit so a NaN never turns into Inf.
    return static_cast<uint16_t>(sign | kF16Inf | kF16QuietBit | (mantissa >> 13));
  }
  // f16 exponent = f32 exponent - 127 + 15; 31 and above is out of range.
  const int half_exp = biased_exp - 112;
  if (half_exp >= 31) return sign | kF16Inf;
  if (half_exp >= 1) {
    // Normal result. A rounding carry out of the mantissa correctly bumps the exponent, and
    // from the largest exponent it lands exactly on the Inf encoding (overflow).
    const uint32_t combined = (static_cast<uint32_t>(half_exp) << 23) | mantissa;
    return static_cast<uint16_t>(sign | shift_right_round_even(combined, 13));
  }
  // Subnormal (or zero) result: value = m * 2^-24 with m = round(full_mantissa * 2^(e - 126)).
  // f32 subnormals (biased_exp == 0) are far below 2^-25 and round to zero.
  if (biased_exp == 0) return sign;
  const uint32_t full_mantissa = mantissa | 0x00800000u;
  const int shift = 126 - biased_exp;  // >= 14 here
  if (shift > 24) return sign;         // below half the smallest subnormal
  return static_cast<uint16_t>(sign | shift_right_round_even(full_mantissa, shift));
}

float f16_to_f32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x03ffu;
  if (exp == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in f32.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exp == 31) return std::bit_cast<float>(sign | kF32ExpMask | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mantissa << 13));
}

}  // namespace qgate::quant
