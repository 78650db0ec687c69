// IEEE binary16 conversions on the host, round-to-nearest-even, with no compiler extension needed.
#pragma once

#include <cstdint>

namespace qgate::quant {

uint16_t f32_to_f16(float value);
float f16_to_f32(uint16_t bits);
/// value rounded to the nearest f16 and back: what a GPU's __float2half would store.
inline float round_to_f16(float value) { return f16_to_f32(f32_to_f16(value)); }

}  // namespace qgate::quant
