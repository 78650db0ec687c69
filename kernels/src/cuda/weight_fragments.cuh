// Weight-side device code both MMQ kernels that take the weights as the mma's A operand share
// (the decode kernel, and on sm_90a the wgmma kernel): the geometry of a row's staged window of raw
// ggml bytes, and the A fragment words and scales of one 32-k chunk read straight from a window.
// Fragment facts (PTX ISA, m16n8k32 .s8 and wgmma m64nNk32 .s8 from registers, per warp;
// g = lane/4, t = lane%4): a0/a1 = rows g/g+8, k 4t..4t+3; a2/a3 = the same rows, k 16+4t..16+4t+3.
// For every type those two k runs of a row are one 4-byte word of its quants (or two, for q8_0).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/block_formats.cuh"

namespace qgate::cuda::weights {

using namespace blocks;

constexpr int kStageChunks = 8;  // 32-k chunks per stage: 256 k, one K-quant super-block

// Bytes of one row's stage (8 chunks, or 1 super-block).
__host__ __device__ constexpr int stage_bytes(int type) {
  return is_kquant(type) ? block_bytes(type) : kStageChunks * block_bytes(type);
}
// Row pitch of a window in 16-byte units: room for the stage plus a misaligned start, rounded up
// to an odd number so that rows g = 0..7 start on 8 different banks 4j (the 4 lanes of a row read
// 4 consecutive words, so the fragment loads are conflict-free).
__host__ __device__ constexpr int window_pitch(int type) {
  const int need = (stage_bytes(type) + 15 + 15) / 16;
  return need | 1;
}
__device__ __forceinline__ uint32_t lds_u16(const uint8_t* p) { return *reinterpret_cast<const uint16_t*>(p); }
// Block fields are 2-byte aligned at best (18-, 22-, 34- and 210-byte blocks).
__device__ __forceinline__ uint32_t lds_u32(const uint8_t* p) { return lds_u16(p) | (lds_u16(p + 2) << 16); }

// The scales of K-quant (q4_K, q5_K) sub-block `c` of the super-block at `s`: ds for its quants and
// dm for its min term (the quants' dot is ds * dot + dm * sum(q_a)).
template <int TYPE>
__device__ __forceinline__ void kquant_chunk_scales(const uint8_t* s, int c, float* ds, float* dm) {
  static_assert(TYPE == kQ4_K || TYPE == kQ5_K, "the super-blocks with 6-bit scales and mins");
  uint32_t sc, m;
  kquant_scale_min([s](int j) -> uint32_t { return s[4 + j]; }, c, &sc, &m);
  const uint32_t dd = lds_u32(s);
  *ds = f16_bits_to_f32(dd) * static_cast<float>(sc);
  *dm = -(f16_bits_to_f32(dd >> 16) * static_cast<float>(m));
}

// One row's A fragment words for 32-k chunk `c` of a stage (`s` = the stage's first byte in the
// window): lo = k 4t..4t+3, hi = k 16+4t..16+4t+3 as four s8 each (q4_0's scaled by 16, its ds
// divided by 16), and the chunk's scales:
// ds0 for k 0..15, ds1 for k 16..31 (they differ only for q6_K), dm the rank-1 term's.
struct Frag {
  int lo, hi;
  float ds0, ds1, dm;
};

template <int TYPE>
__device__ __forceinline__ Frag decode_frag(const uint8_t* s, int c, int t) {
  Frag f;
  f.dm = 0.0f;
  if constexpr (TYPE == kQ4_0) {  // {f16 d; u8 qs[16]}: element j = low nibble of qs[j], j+16 high
    // Each s8 is 16 * (q - 8): the nibble in the byte's high half with its top bit flipped, one
    // LOP3 (and a shift for the low nibbles) instead of mask, add and flip; ds is d / 16 to match.
    // Scaling by 16 and 1/16 is exact, so ds * dot is the same f32 as d * dot of the q - 8.
    const uint8_t* b = s + c * 18;
    const uint32_t w = lds_u32(b + 2 + 4 * t);
    f.lo = static_cast<int>(((w << 4) & 0xf0f0f0f0u) ^ 0x80808080u);
    f.hi = static_cast<int>((w & 0xf0f0f0f0u) ^ 0x80808080u);
    f.ds0 = f.ds1 = f16_bits_to_f32(lds_u16(b)) * 0.0625f;
  } else if constexpr (TYPE == kQ4_1) {  // {f16 d, m; u8 qs[16]}: unsigned q
    const uint8_t* b = s + c * 20;
    const uint32_t w = lds_u32(b + 4 + 4 * t);
    f.lo = static_cast<int>(w & 0x0f0f0f0fu);
    f.hi = static_cast<int>((w >> 4) & 0x0f0f0f0fu);
    f.ds0 = f.ds1 = f16_bits_to_f32(lds_u16(b));
    f.dm = f16_bits_to_f32(lds_u16(b + 2));
  } else if constexpr (TYPE == kQ5_0) {  // {f16 d; u8 qh[4]; u8 qs[16]}: bit j of qh = element j's 5th bit
    const uint8_t* b = s + c * 22;
    const uint32_t qh = lds_u32(b + 2);
    const uint32_t w = lds_u32(b + 6 + 4 * t);
    f.lo = static_cast<int>(bytes_minus<16>((w & 0x0f0f0f0fu) | spread4_to_bit4(qh >> (4 * t))));
    f.hi = static_cast<int>(bytes_minus<16>(((w >> 4) & 0x0f0f0f0fu) | spread4_to_bit4(qh >> (16 + 4 * t))));
    f.ds0 = f.ds1 = f16_bits_to_f32(lds_u16(b));
  } else if constexpr (TYPE == kQ5_1) {  // {f16 d, m; u8 qh[4]; u8 qs[16]}: unsigned 5-bit q
    const uint8_t* b = s + c * 24;
    const uint32_t qh = lds_u32(b + 4);
    const uint32_t w = lds_u32(b + 8 + 4 * t);
    f.lo = static_cast<int>((w & 0x0f0f0f0fu) | spread4_to_bit4(qh >> (4 * t)));
    f.hi = static_cast<int>(((w >> 4) & 0x0f0f0f0fu) | spread4_to_bit4(qh >> (16 + 4 * t)));
    f.ds0 = f.ds1 = f16_bits_to_f32(lds_u16(b));
    f.dm = f16_bits_to_f32(lds_u16(b + 2));
  } else if constexpr (TYPE == kQ8_0) {  // {f16 d; i8 qs[32]}
    const uint8_t* b = s + c * 34;
    f.lo = static_cast<int>(lds_u32(b + 2 + 4 * t));
    f.hi = static_cast<int>(lds_u32(b + 18 + 4 * t));
    f.ds0 = f.ds1 = f16_bits_to_f32(lds_u16(b));
  } else if constexpr (TYPE == kQ4_K || TYPE == kQ5_K) {
    // {f16 d, dmin; u8 scales[12]; [q5_K: u8 qh[32];] u8 qs[128]}: sub-block c is the low (c even)
    // or high (c odd) nibbles of qs[32*(c/2) .. +32]; q5_K's fifth bit of element l is bit c of qh[l].
    constexpr int qs_at = TYPE == kQ4_K ? 16 : 48;
    const int shift = (c & 1) * 4;
    const uint8_t* q = s + qs_at + 32 * (c >> 1);
    uint32_t lo = (lds_u32(q + 4 * t) >> shift) & 0x0f0f0f0fu;
    uint32_t hi = (lds_u32(q + 16 + 4 * t) >> shift) & 0x0f0f0f0fu;
    if constexpr (TYPE == kQ5_K) {
      lo |= ((lds_u32(s + 16 + 4 * t) >> c) & 0x01010101u) << 4;
      hi |= ((lds_u32(s + 32 + 4 * t) >> c) & 0x01010101u) << 4;
    }
    f.lo = static_cast<int>(lo);
    f.hi = static_cast<int>(hi);
    kquant_chunk_scales<TYPE>(s, c, &f.ds0, &f.dm);
    f.ds1 = f.ds0;
  } else {  // kQ6_K: {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}, sub-block c = 4n + g
    const int n = c >> 2, g = c & 3;
    const uint8_t* ql = s + 64 * n + 32 * (g & 1);
    const uint8_t* qh = s + 128 + 32 * n;
    const int lshift = (g >> 1) * 4;
    const uint32_t lo = ((lds_u32(ql + 4 * t) >> lshift) & 0x0f0f0f0fu) |
                        (((lds_u32(qh + 4 * t) >> (2 * g)) & 0x03030303u) << 4);
    const uint32_t hi = ((lds_u32(ql + 16 + 4 * t) >> lshift) & 0x0f0f0f0fu) |
                        (((lds_u32(qh + 16 + 4 * t) >> (2 * g)) & 0x03030303u) << 4);
    f.lo = static_cast<int>(bytes_minus<32>(lo));
    f.hi = static_cast<int>(bytes_minus<32>(hi));
    const float d = f16_bits_to_f32(lds_u16(s + 208));
    f.ds0 = d * static_cast<float>(static_cast<int8_t>(s[192 + 2 * c]));
    f.ds1 = d * static_cast<float>(static_cast<int8_t>(s[192 + 2 * c + 1]));
  }
  return f;
}

}  // namespace qgate::cuda::weights
