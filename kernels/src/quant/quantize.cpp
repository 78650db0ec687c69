// Quantizers (f32 -> ggml blocks) and dequantizers (ggml blocks -> f32) for the eight types.
// The dequantizers are the byte-level definition of each format and follow ggml's
// dequantize_row_* arithmetic operation for operation, so values match ggml bit for bit.
// The quantizers here are the `qgate` recipe: plain round-to-nearest per block (not ggml's
// error-minimising search); they only need to produce valid blocks that decode close to their
// input. The `ggml` recipe, byte-compatible with llama.cpp's reference quantizer, is in
// quantize_ggml.cpp.
#include "qgate/quant/quantize.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "qgate/quant/half.h"

namespace qgate::quant {

namespace {

// f16 encoding of a scale that is never NaN or Inf: out-of-range values saturate to the largest
// finite f16 so a pathological input cannot poison every product with its block.
uint16_t encode_scale(float value) {
  if (std::isnan(value)) return 0;
  const uint16_t bits = f32_to_f16(value);
  if ((bits & 0x7c00u) == 0x7c00u) return static_cast<uint16_t>((bits & 0x8000u) | 0x7bffu);
  return bits;
}

// Rounds to nearest (ties to even) and clamps to [lo, hi]; clamping first keeps the int
// conversion defined for huge quotients, and NaN lands on lo.
int round_clamped(float value, int lo, int hi) {
  if (!(value >= static_cast<float>(lo))) return lo;
  if (value > static_cast<float>(hi)) return hi;
  return static_cast<int>(std::nearbyint(value));
}

float reciprocal_or_zero(float d) { return d != 0.0f ? 1.0f / d : 0.0f; }

// The element of largest magnitude, with its sign (q4_0/q5_0/q6_K map it to the -2^(n-1) end).
float signed_absmax(const float* x, int n) {
  float best = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > std::fabs(best)) best = x[i];
  }
  return best;
}

void min_max(const float* x, int n, float* lo, float* hi) {
  *lo = x[0];
  *hi = x[0];
  for (int i = 1; i < n; ++i) {
    *lo = std::min(*lo, x[i]);
    *hi = std::max(*hi, x[i]);
  }
}

// ---- 6-bit scale/min packing of q4_K and q5_K (12 bytes for 8 scales and 8 mins) ----
// Sub-blocks 0..3 keep their 6 bits in the low bits of bytes 0..3 (scales) and 4..7 (mins);
// sub-blocks 4..7 put their low nibbles in bytes 8..11 and their top 2 bits in the top 2 bits
// of bytes 0..3 (scales) and 4..7 (mins).
void pack_k_scales(const uint8_t scale[8], const uint8_t min[8], uint8_t packed[kKScaleBytes]) {
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<uint8_t>((scale[j] & 63) | ((scale[j + 4] >> 4) << 6));
    packed[j + 4] = static_cast<uint8_t>((min[j] & 63) | ((min[j + 4] >> 4) << 6));
    packed[j + 8] = static_cast<uint8_t>((scale[j + 4] & 0xF) | ((min[j + 4] & 0xF) << 4));
  }
}

void unpack_k_scale(int j, const uint8_t packed[kKScaleBytes], uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *min = packed[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4));
  }
}

// ---- legacy 32-element types ----

void quantize_q4_0(const float* x, BlockQ4_0* b) {
  b->d = encode_scale(signed_absmax(x, kQK) / -8.0f);
  const float inv_d = reciprocal_or_zero(f16_to_f32(b->d));
  for (int j = 0; j < kQK / 2; ++j) {
    const int lo = round_clamped(x[j] * inv_d, -8, 7) + 8;
    const int hi = round_clamped(x[j + kQK / 2] * inv_d, -8, 7) + 8;
    b->qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

void dequantize_q4_0(const BlockQ4_0* b, float* y) {
  const float d = f16_to_f32(b->d);
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>((b->qs[j] & 0xF) - 8) * d;
    y[j + kQK / 2] = static_cast<float>((b->qs[j] >> 4) - 8) * d;
  }
}

void quantize_q4_1(const float* x, BlockQ4_1* b) {
  float lo, hi;
  min_max(x, kQK, &lo, &hi);
  b->d = encode_scale((hi - lo) / 15.0f);
  b->m = encode_scale(lo);
  const float inv_d = reciprocal_or_zero(f16_to_f32(b->d));
  const float m = f16_to_f32(b->m);
  for (int j = 0; j < kQK / 2; ++j) {
    const int q0 = round_clamped((x[j] - m) * inv_d, 0, 15);
    const int q1 = round_clamped((x[j + kQK / 2] - m) * inv_d, 0, 15);
    b->qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
  }
}

void dequantize_q4_1(const BlockQ4_1* b, float* y) {
  const float d = f16_to_f32(b->d);
  const float m = f16_to_f32(b->m);
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>(b->qs[j] & 0xF) * d + m;
    y[j + kQK / 2] = static_cast<float>(b->qs[j] >> 4) * d + m;
  }
}

// q5 types: element j's low nibble in qs[j % 16] (high nibble for j >= 16), its fifth bit at bit j
// of qh read as a little-endian uint32.
void pack_q5(const int q[kQK], uint8_t qs[kQK / 2], uint8_t qh_bytes[4]) {
  uint32_t qh = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + kQK / 2] & 0xF) << 4));
    qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    qh |= static_cast<uint32_t>((q[j + kQK / 2] >> 4) & 1) << (j + kQK / 2);
  }
  for (int i = 0; i < 4; ++i) qh_bytes[i] = static_cast<uint8_t>(qh >> (8 * i));
}

uint32_t load_qh(const uint8_t qh_bytes[4]) {
  return static_cast<uint32_t>(qh_bytes[0]) | (static_cast<uint32_t>(qh_bytes[1]) << 8) |
         (static_cast<uint32_t>(qh_bytes[2]) << 16) | (static_cast<uint32_t>(qh_bytes[3]) << 24);
}

// The unsigned 5-bit values 0..31 of a q5 block, in element order.
void unpack_q5(const uint8_t qs[kQK / 2], const uint8_t qh_bytes[4], int q[kQK]) {
  const uint32_t qh = load_qh(qh_bytes);
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = (qs[j] & 0xF) | static_cast<int>(((qh >> j) & 1u) << 4);
    q[j + kQK / 2] = (qs[j] >> 4) | static_cast<int>(((qh >> (j + kQK / 2)) & 1u) << 4);
  }
}

void quantize_q5_0(const float* x, BlockQ5_0* b) {
  b->d = encode_scale(signed_absmax(x, kQK) / -16.0f);
  const float inv_d = reciprocal_or_zero(f16_to_f32(b->d));
  int q[kQK];
  for (int j = 0; j < kQK; ++j) q[j] = round_clamped(x[j] * inv_d, -16, 15) + 16;
  pack_q5(q, b->qs, b->qh);
}

void dequantize_q5_0(const BlockQ5_0* b, float* y) {
  const float d = f16_to_f32(b->d);
  int q[kQK];
  unpack_q5(b->qs, b->qh, q);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(q[j] - 16) * d;
}

void quantize_q5_1(const float* x, BlockQ5_1* b) {
  float lo, hi;
  min_max(x, kQK, &lo, &hi);
  b->d = encode_scale((hi - lo) / 31.0f);
  b->m = encode_scale(lo);
  const float inv_d = reciprocal_or_zero(f16_to_f32(b->d));
  const float m = f16_to_f32(b->m);
  int q[kQK];
  for (int j = 0; j < kQK; ++j) q[j] = round_clamped((x[j] - m) * inv_d, 0, 31);
  pack_q5(q, b->qs, b->qh);
}

void dequantize_q5_1(const BlockQ5_1* b, float* y) {
  const float d = f16_to_f32(b->d);
  const float m = f16_to_f32(b->m);
  int q[kQK];
  unpack_q5(b->qs, b->qh, q);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(q[j]) * d + m;
}

void quantize_q8_0(const float* x, BlockQ8_0* b) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  b->d = encode_scale(amax / 127.0f);
  const float inv_d = reciprocal_or_zero(f16_to_f32(b->d));
  for (int j = 0; j < kQK; ++j) b->qs[j] = static_cast<int8_t>(round_clamped(x[j] * inv_d, -127, 127));
}

void dequantize_q8_0(const BlockQ8_0* b, float* y) {
  const float d = f16_to_f32(b->d);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b->qs[j]) * d;
}

// ---- K-quants (256-element super-blocks) ----

// q4_K/q5_K: each 32-element sub-block j decodes as (d*scale_j) * q - (dmin*min_j), q in
// 0..max_q. Picks per-sub-block scale and min, quantizes them to 6 bits against f16 d and dmin,
// then quantizes the elements against the stored (rounded) scales. Writes q[256] and the header.
void quantize_k_super_block(const float* x, int max_q, uint16_t* d_out, uint16_t* dmin_out,
                            uint8_t packed_scales[kKScaleBytes], int q[kQKK]) {
  constexpr int kSubBlocks = kQKK / kQK;
  float sub_scale[kSubBlocks];
  float sub_min[kSubBlocks];  // the magnitude subtracted: value = scale*q - min, min >= 0
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < kSubBlocks; ++j) {
    float lo, hi;
    min_max(x + kQK * j, kQK, &lo, &hi);
    lo = std::min(lo, 0.0f);  // the min is stored unsigned, so the grid always reaches down to 0
    sub_scale[j] = (hi - lo) / static_cast<float>(max_q);
    sub_min[j] = -lo;
    max_scale = std::max(max_scale, sub_scale[j]);
    max_min = std::max(max_min, sub_min[j]);
  }
  *d_out = encode_scale(max_scale / 63.0f);
  *dmin_out = encode_scale(max_min / 63.0f);
  const float d = f16_to_f32(*d_out);
  const float dmin = f16_to_f32(*dmin_out);
  const float inv_d = reciprocal_or_zero(d);
  const float inv_dmin = reciprocal_or_zero(dmin);
  uint8_t scale6[kSubBlocks], min6[kSubBlocks];
  for (int j = 0; j < kSubBlocks; ++j) {
    scale6[j] = static_cast<uint8_t>(round_clamped(sub_scale[j] * inv_d, 0, 63));
    min6[j] = static_cast<uint8_t>(round_clamped(sub_min[j] * inv_dmin, 0, 63));
    const float step = d * static_cast<float>(scale6[j]);
    const float offset = dmin * static_cast<float>(min6[j]);
    const float inv_step = reciprocal_or_zero(step);
    for (int i = 0; i < kQK; ++i) {
      q[kQK * j + i] = round_clamped((x[kQK * j + i] + offset) * inv_step, 0, max_q);
    }
  }
  pack_k_scales(scale6, min6, packed_scales);
}

// Nibble layout shared by q4_K and q5_K: each 64 elements use 32 bytes, element 64c + l in the
// low nibble of byte 32c + l and element 64c + 32 + l in its high nibble.
void pack_k_nibbles(const int q[kQKK], uint8_t qs[kQKK / 2]) {
  for (int c = 0; c < kQKK / 64; ++c) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * c + l] = static_cast<uint8_t>((q[64 * c + l] & 0xF) | ((q[64 * c + 32 + l] & 0xF) << 4));
    }
  }
}

void quantize_q4_K(const float* x, BlockQ4_K* b) {
  int q[kQKK];
  quantize_k_super_block(x, 15, &b->d, &b->dmin, b->scales, q);
  pack_k_nibbles(q, b->qs);
}

void dequantize_q4_K(const BlockQ4_K* b, float* y) {
  const float d = f16_to_f32(b->d);
  const float dmin = f16_to_f32(b->dmin);
  const uint8_t* qs = b->qs;
  for (int c = 0; c < kQKK / 64; ++c) {
    uint8_t sc, m;
    unpack_k_scale(2 * c, b->scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    unpack_k_scale(2 * c + 1, b->scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) y[64 * c + l] = d1 * static_cast<float>(qs[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) y[64 * c + 32 + l] = d2 * static_cast<float>(qs[l] >> 4) - m2;
    qs += 32;
  }
}

// q5_K: the fifth bit of element 64c + l is bit 2c of qh[l]; of element 64c + 32 + l, bit 2c + 1.
void quantize_q5_K(const float* x, BlockQ5_K* b) {
  int q[kQKK];
  quantize_k_super_block(x, 31, &b->d, &b->dmin, b->scales, q);
  pack_k_nibbles(q, b->qs);
  std::memset(b->qh, 0, sizeof(b->qh));
  for (int c = 0; c < kQKK / 64; ++c) {
    for (int l = 0; l < 32; ++l) {
      b->qh[l] |= static_cast<uint8_t>(((q[64 * c + l] >> 4) & 1) << (2 * c));
      b->qh[l] |= static_cast<uint8_t>(((q[64 * c + 32 + l] >> 4) & 1) << (2 * c + 1));
    }
  }
}

void dequantize_q5_K(const BlockQ5_K* b, float* y) {
  const float d = f16_to_f32(b->d);
  const float dmin = f16_to_f32(b->dmin);
  const uint8_t* ql = b->qs;
  for (int c = 0; c < kQKK / 64; ++c) {
    uint8_t sc, m;
    unpack_k_scale(2 * c, b->scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    unpack_k_scale(2 * c + 1, b->scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    const uint8_t bit_lo = static_cast<uint8_t>(1u << (2 * c));
    const uint8_t bit_hi = static_cast<uint8_t>(2u << (2 * c));
    for (int l = 0; l < 32; ++l) {
      y[64 * c + l] = d1 * static_cast<float>((ql[l] & 0xF) + ((b->qh[l] & bit_lo) ? 16 : 0)) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      y[64 * c + 32 + l] = d2 * static_cast<float>((ql[l] >> 4) + ((b->qh[l] & bit_hi) ? 16 : 0)) - m2;
    }
    ql += 32;
  }
}

// q6_K: 16 sub-blocks of 16 elements (sub-block s = elements 16s..16s+15) with int8 scales
// against one f16 d; values are d * scale_s * (q - 32), q in 0..63. Each 128-element half h
// uses ql[64h..], qh[32h..]: for l < 32, elements 128h + l, +32, +64, +96 take the low nibble of
// ql[l], low nibble of ql[l+32], high nibble of ql[l], high nibble of ql[l+32], and bit pairs
// 0-1, 2-3, 4-5, 6-7 of qh[l].
void quantize_q6_K(const float* x, BlockQ6_K* b) {
  constexpr int kSubBlocks = kQKK / 16;
  float sub_scale[kSubBlocks];
  float max_abs_scale = 0.0f;
  for (int s = 0; s < kSubBlocks; ++s) {
    sub_scale[s] = signed_absmax(x + 16 * s, 16) / -32.0f;
    max_abs_scale = std::max(max_abs_scale, std::fabs(sub_scale[s]));
  }
  b->d = encode_scale(max_abs_scale / 127.0f);
  const float d = f16_to_f32(b->d);
  const float inv_d = reciprocal_or_zero(d);
  int q[kQKK];
  for (int s = 0; s < kSubBlocks; ++s) {
    const int scale = round_clamped(sub_scale[s] * inv_d, -128, 127);
    b->scales[s] = static_cast<int8_t>(scale);
    const float inv_step = reciprocal_or_zero(d * static_cast<float>(scale));
    for (int i = 0; i < 16; ++i) q[16 * s + i] = round_clamped(x[16 * s + i] * inv_step, -32, 31) + 32;
  }
  for (int h = 0; h < 2; ++h) {
    uint8_t* ql = b->ql + 64 * h;
    uint8_t* qh = b->qh + 32 * h;
    const int* qq = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int q1 = qq[l], q2 = qq[l + 32], q3 = qq[l + 64], q4 = qq[l + 96];
      ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
      qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
  }
}

void dequantize_q6_K(const BlockQ6_K* b, float* y) {
  const float d = f16_to_f32(b->d);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b->ql + 64 * h;
    const uint8_t* qh = b->qh + 32 * h;
    const int8_t* sc = b->scales + 8 * h;
    float* yy = y + 128 * h;
    for (int l = 0; l < 32; ++l) {
      const int s = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      yy[l] = d * static_cast<float>(sc[s]) * static_cast<float>(q1);
      yy[l + 32] = d * static_cast<float>(sc[s + 2]) * static_cast<float>(q2);
      yy[l + 64] = d * static_cast<float>(sc[s + 4]) * static_cast<float>(q3);
      yy[l + 96] = d * static_cast<float>(sc[s + 6]) * static_cast<float>(q4);
    }
  }
}

void check_row_length(WeightType type, int64_t k) {
  const int block_elems = traits(type).block_elems;
  if (k < 0 || k % block_elems != 0) {
    throw std::invalid_argument("row length " + std::to_string(k) + " is not a multiple of " +
                                std::to_string(block_elems));
  }
}

}  // namespace

std::string_view to_string(QuantRecipe recipe) {
  switch (recipe) {
    case QuantRecipe::qgate: return "qgate";
    case QuantRecipe::ggml: return "ggml";
  }
  return "unknown";
}

std::optional<QuantRecipe> parse_recipe(std::string_view name) {
  auto equals = [&](std::string_view want) {
    return name.size() == want.size() &&
           std::equal(name.begin(), name.end(), want.begin(), [](char a, char b) {
             return std::tolower(static_cast<unsigned char>(a)) == b;
           });
  };
  if (equals("qgate")) return QuantRecipe::qgate;
  if (equals("ggml")) return QuantRecipe::ggml;
  return std::nullopt;
}

void quantize_row(WeightType type, const float* x, void* blocks, int64_t k, QuantRecipe recipe) {
  check_row_length(type, k);
  if (recipe == QuantRecipe::ggml) return detail::quantize_row_ggml(type, x, blocks, k);
  if (recipe != QuantRecipe::qgate) throw std::invalid_argument("quantize_row: unknown recipe");
  auto run = [&](auto* out, int block_elems, auto quantize_block) {
    for (int64_t i = 0; i < k / block_elems; ++i) quantize_block(x + i * block_elems, out + i);
  };
  switch (type) {
    case WeightType::q4_0: return run(static_cast<BlockQ4_0*>(blocks), kQK, quantize_q4_0);
    case WeightType::q4_1: return run(static_cast<BlockQ4_1*>(blocks), kQK, quantize_q4_1);
    case WeightType::q5_0: return run(static_cast<BlockQ5_0*>(blocks), kQK, quantize_q5_0);
    case WeightType::q5_1: return run(static_cast<BlockQ5_1*>(blocks), kQK, quantize_q5_1);
    case WeightType::q8_0: return run(static_cast<BlockQ8_0*>(blocks), kQK, quantize_q8_0);
    case WeightType::q4_K: return run(static_cast<BlockQ4_K*>(blocks), kQKK, quantize_q4_K);
    case WeightType::q5_K: return run(static_cast<BlockQ5_K*>(blocks), kQKK, quantize_q5_K);
    case WeightType::q6_K: return run(static_cast<BlockQ6_K*>(blocks), kQKK, quantize_q6_K);
  }
  throw std::invalid_argument("quantize_row: unknown weight type");
}

void dequantize_row(WeightType type, const void* blocks, float* y, int64_t k) {
  check_row_length(type, k);
  auto run = [&](const auto* in, int block_elems, auto dequantize_block) {
    for (int64_t i = 0; i < k / block_elems; ++i) dequantize_block(in + i, y + i * block_elems);
  };
  switch (type) {
    case WeightType::q4_0: return run(static_cast<const BlockQ4_0*>(blocks), kQK, dequantize_q4_0);
    case WeightType::q4_1: return run(static_cast<const BlockQ4_1*>(blocks), kQK, dequantize_q4_1);
    case WeightType::q5_0: return run(static_cast<const BlockQ5_0*>(blocks), kQK, dequantize_q5_0);
    case WeightType::q5_1: return run(static_cast<const BlockQ5_1*>(blocks), kQK, dequantize_q5_1);
    case WeightType::q8_0: return run(static_cast<const BlockQ8_0*>(blocks), kQK, dequantize_q8_0);
    case WeightType::q4_K: return run(static_cast<const BlockQ4_K*>(blocks), kQKK, dequantize_q4_K);
    case WeightType::q5_K: return run(static_cast<const BlockQ5_K*>(blocks), kQKK, dequantize_q5_K);
    case WeightType::q6_K: return run(static_cast<const BlockQ6_K*>(blocks), kQKK, dequantize_q6_K);
  }
  throw std::invalid_argument("dequantize_row: unknown weight type");
}

std::vector<uint8_t> quantize_matrix(WeightType type, const float* x, int64_t od, int64_t k,
                                     QuantRecipe recipe) {
  const size_t bytes_per_row = row_bytes(type, k);
  std::vector<uint8_t> out(bytes_per_row * static_cast<size_t>(od));
  for (int64_t r = 0; r < od; ++r) {
    quantize_row(type, x + r * k, out.data() + static_cast<size_t>(r) * bytes_per_row, k, recipe);
  }
  return out;
}

}  // namespace qgate::quant
