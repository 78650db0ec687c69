// Weight block formats of the eight quantized types, byte-compatible with ggml/GGUF. The types'
// facts (ids, names, block elements and bytes, min terms) live in common/ (weight_types.h); this
// header adds the block layouts and checks their sizes against those facts.
#pragma once

#include <cstdint>

#include "qgate/common/weight_types.h"

namespace qgate::quant {

inline constexpr int kKScaleBytes = 12;

// ggml's block layouts. f16 fields are stored as raw IEEE binary16 bits.
struct BlockQ4_0 { uint16_t d; uint8_t qs[kQK / 2]; };
struct BlockQ4_1 { uint16_t d; uint16_t m; uint8_t qs[kQK / 2]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[kQK / 2]; };
struct BlockQ5_1 { uint16_t d; uint16_t m; uint8_t qh[4]; uint8_t qs[kQK / 2]; };
struct BlockQ8_0 { uint16_t d; int8_t qs[kQK]; };
struct BlockQ4_K { uint16_t d; uint16_t dmin; uint8_t scales[kKScaleBytes]; uint8_t qs[kQKK / 2]; };
struct BlockQ5_K { uint16_t d; uint16_t dmin; uint8_t scales[kKScaleBytes]; uint8_t qh[kQKK / 8]; uint8_t qs[kQKK / 2]; };
struct BlockQ6_K { uint8_t ql[kQKK / 2]; uint8_t qh[kQKK / 4]; int8_t scales[kQKK / 16]; uint16_t d; };

static_assert(sizeof(BlockQ4_0) == traits(WeightType::q4_0).block_bytes);
static_assert(sizeof(BlockQ4_1) == traits(WeightType::q4_1).block_bytes);
static_assert(sizeof(BlockQ5_0) == traits(WeightType::q5_0).block_bytes);
static_assert(sizeof(BlockQ5_1) == traits(WeightType::q5_1).block_bytes);
static_assert(sizeof(BlockQ8_0) == traits(WeightType::q8_0).block_bytes);
static_assert(sizeof(BlockQ4_K) == traits(WeightType::q4_K).block_bytes);
static_assert(sizeof(BlockQ5_K) == traits(WeightType::q5_K).block_bytes);
static_assert(sizeof(BlockQ6_K) == traits(WeightType::q6_K).block_bytes);

}  // namespace qgate::quant
