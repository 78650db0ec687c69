// The MMQ decompositions on the host: weight blocks split into small integers plus per-32
// scales (w = ds*q + dm), and activations quantized to q8 blocks carrying their int sum. The
// arithmetic mirrors the CUDA kernels operation for operation so both sides see the same bits.
#include "qgate/quant/mmq_math.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "qgate/quant/half.h"

namespace qgate::quant {

namespace {

void set_scales(MmqWeightBlock* out, float ds, float dm) {
  out->ds[0] = ds;
  out->ds[1] = ds;
  out->dm = dm;
}

uint32_t load_u32_le(const uint8_t bytes[4]) {
  return static_cast<uint32_t>(bytes[0]) | (static_cast<uint32_t>(bytes[1]) << 8) |
         (static_cast<uint32_t>(bytes[2]) << 16) | (static_cast<uint32_t>(bytes[3]) << 24);
}

// Nibble j of a legacy block: low nibble of qs[j] for j < 16, high nibble of qs[j - 16] after.
int legacy_nibble(const uint8_t qs[kQK / 2], int j) {
  return j < kQK / 2 ? (qs[j] & 0xF) : (qs[j - kQK / 2] >> 4);
}

// The 6-bit scale and min of sub-block j (0..7) of a q4_K/q5_K super-block.
void k_scale_min(const uint8_t packed[kKScaleBytes], int j, int* scale, int* min) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *min = packed[j + 4] & 63;
  } else {
    *scale = (packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4);
    *min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

void unpack_q4_0(const BlockQ4_0& b, MmqWeightBlock* out) {
  for (int j = 0; j < kQK; ++j) out->q[j] = static_cast<int8_t>(legacy_nibble(b.qs, j) - 8);
  set_scales(out, f16_to_f32(b.d), 0.0f);
}

void unpack_q4_1(const BlockQ4_1& b, MmqWeightBlock* out) {
  for (int j = 0; j < kQK; ++j) out->q[j] = static_cast<int8_t>(legacy_nibble(b.qs, j));
  set_scales(out, f16_to_f32(b.d), f16_to_f32(b.m));
}

int q5_value(const uint8_t qs[kQK / 2], uint32_t qh, int j) {
  return legacy_nibble(qs, j) | static_cast<int>(((qh >> j) & 1u) << 4);
}

void unpack_q5_0(const BlockQ5_0& b, MmqWeightBlock* out) {
  const uint32_t qh = load_u32_le(b.qh);
  for (int j = 0; j < kQK; ++j) out->q[j] = static_cast<int8_t>(q5_value(b.qs, qh, j) - 16);
  set_scales(out, f16_to_f32(b.d), 0.0f);
}

void unpack_q5_1(const BlockQ5_1& b, MmqWeightBlock* out) {
  const uint32_t qh = load_u32_le(b.qh);
  for (int j = 0; j < kQK; ++j) out->q[j] = static_cast<int8_t>(q5_value(b.qs, qh, j));
  set_scales(out, f16_to_f32(b.d), f16_to_f32(b.m));
}

void unpack_q8_0(const BlockQ8_0& b, MmqWeightBlock* out) {
  for (int j = 0; j < kQK; ++j) out->q[j] = b.qs[j];
  set_scales(out, f16_to_f32(b.d), 0.0f);
}

// q4_K/q5_K sub-block j (elements 32j..32j+31): nibbles from qs[32*(j/2) + l], low nibble for
// even j and high for odd; q5_K adds bit j of qh[l] as the fifth bit. Nibbles stay unsigned.
template <bool kHasHighBit>
void unpack_k_super_block(uint16_t d_bits, uint16_t dmin_bits, const uint8_t* scales,
                          const uint8_t* qs, const uint8_t* qh, MmqWeightBlock* out) {
  const float d = f16_to_f32(d_bits);
  const float dmin = f16_to_f32(dmin_bits);
  for (int j = 0; j < kQKK / kQK; ++j) {
    const uint8_t* nibbles = qs + 32 * (j / 2);
    const int shift = (j % 2) * 4;
    for (int l = 0; l < kQK; ++l) {
      int q = (nibbles[l] >> shift) & 0xF;
      if constexpr (kHasHighBit) q |= ((qh[l] >> j) & 1) << 4;
      out[j].q[l] = static_cast<int8_t>(q);
    }
    int scale, min;
    k_scale_min(scales, j, &scale, &min);
    // Same float products as ggml's dequantizer (d * sc, dmin * m), so ds*q + dm reproduces it.
    set_scales(&out[j], d * static_cast<float>(scale), -(dmin * static_cast<float>(min)));
  }
}

// q6_K 32-element chunk c (0..7) lives in half h = c/4 at position p = c%4 of that half:
// p = 0..3 take the low nibble of ql[l], low of ql[l+32], high of ql[l], high of ql[l+32]
// (offset 64h) and bits 2p..2p+1 of qh[32h + l]. Its elements 0..15 use scales[2c] and
// 16..31 use scales[2c+1] (scale index = element / 16 across the super-block).
void unpack_q6_K(const BlockQ6_K& b, MmqWeightBlock* out) {
  const float d = f16_to_f32(b.d);
  for (int c = 0; c < kQKK / kQK; ++c) {
    const int half = c / 4, position = c % 4;
    const uint8_t* ql = b.ql + 64 * half + (position % 2) * 32;
    const uint8_t* qh = b.qh + 32 * half;
    const int nibble_shift = (position / 2) * 4;
    for (int l = 0; l < kQK; ++l) {
      const int low = (ql[l] >> nibble_shift) & 0xF;
      const int high = (qh[l] >> (2 * position)) & 3;
      out[c].q[l] = static_cast<int8_t>((low | (high << 4)) - 32);
    }
    out[c].ds[0] = d * static_cast<float>(b.scales[2 * c]);
    out[c].ds[1] = d * static_cast<float>(b.scales[2 * c + 1]);
    out[c].dm = 0.0f;
  }
}

}  // namespace

void unpack_row_mmq(WeightType type, const void* row_blocks, int64_t k, MmqWeightBlock* out) {
  const int block_elems = traits(type).block_elems;
  if (k < 0 || k % block_elems != 0) {
    throw std::invalid_argument("unpack_row_mmq: row length " + std::to_string(k) +
                                " is not a multiple of " + std::to_string(block_elems));
  }
  const int64_t blocks = k / block_elems;
  switch (type) {
    case WeightType::q4_0:
      for (int64_t i = 0; i < blocks; ++i) unpack_q4_0(static_cast<const BlockQ4_0*>(row_blocks)[i], out + i);
      return;
    case WeightType::q4_1:
      for (int64_t i = 0; i < blocks; ++i) unpack_q4_1(static_cast<const BlockQ4_1*>(row_blocks)[i], out + i);
      return;
    case WeightType::q5_0:
      for (int64_t i = 0; i < blocks; ++i) unpack_q5_0(static_cast<const BlockQ5_0*>(row_blocks)[i], out + i);
      return;
    case WeightType::q5_1:
      for (int64_t i = 0; i < blocks; ++i) unpack_q5_1(static_cast<const BlockQ5_1*>(row_blocks)[i], out + i);
      return;
    case WeightType::q8_0:
      for (int64_t i = 0; i < blocks; ++i) unpack_q8_0(static_cast<const BlockQ8_0*>(row_blocks)[i], out + i);
      return;
    case WeightType::q4_K:
      for (int64_t i = 0; i < blocks; ++i) {
        const BlockQ4_K& b = static_cast<const BlockQ4_K*>(row_blocks)[i];
        unpack_k_super_block<false>(b.d, b.dmin, b.scales, b.qs, nullptr, out + 8 * i);
      }
      return;
    case WeightType::q5_K:
      for (int64_t i = 0; i < blocks; ++i) {
        const BlockQ5_K& b = static_cast<const BlockQ5_K*>(row_blocks)[i];
        unpack_k_super_block<true>(b.d, b.dmin, b.scales, b.qs, b.qh, out + 8 * i);
      }
      return;
    case WeightType::q6_K:
      for (int64_t i = 0; i < blocks; ++i) unpack_q6_K(static_cast<const BlockQ6_K*>(row_blocks)[i], out + 8 * i);
      return;
  }
  throw std::invalid_argument("unpack_row_mmq: unknown weight type");
}

void quantize_block_q8(const float* x, int8_t* q, float* d, int32_t* sum) {
  float amax = 0.0f;
  for (int i = 0; i < kQK; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  // Every step is one f32 operation, the same a CUDA thread performs: a division, a
  // reciprocal of the unrounded d, a product and a round-half-even.
  const float scale = amax / 127.0f;
  const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
  int32_t total = 0;
  for (int i = 0; i < kQK; ++i) {
    float v = std::nearbyint(x[i] * inverse);
    v = std::fmin(std::fmax(v, -128.0f), 127.0f);
    q[i] = static_cast<int8_t>(v);
    total += q[i];
  }
  *d = round_to_f16(scale);
  *sum = total;
}

Q8Activations quantize_activations_q8(const float* x, int64_t nt, int64_t k) {
  if (nt < 0 || k < 0 || k % kQK != 0) {
    throw std::invalid_argument("quantize_activations_q8: k " + std::to_string(k) +
                                " is not a multiple of 32");
  }
  Q8Activations a;
  a.nt = nt;
  a.k = k;
  const int64_t blocks_per_row = k / kQK;
  a.q.resize(static_cast<size_t>(nt * k));
  a.d.resize(static_cast<size_t>(nt * blocks_per_row));
  a.sum.resize(static_cast<size_t>(nt * blocks_per_row));
  for (int64_t b = 0; b < nt * blocks_per_row; ++b) {
    quantize_block_q8(x + b * kQK, a.q.data() + b * kQK, a.d.data() + b, a.sum.data() + b);
  }
  return a;
}

}  // namespace qgate::quant
