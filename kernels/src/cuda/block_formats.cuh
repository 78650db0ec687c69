// Device-side facts about ggml's weight blocks that every CUDA GEMM kernel of the reference build
// shares: type ids, block sizes, f16 bits -> f32, the fifth-bit spread of 5-bit quants and the
// 6-bit scale/min packing of q4_K/q5_K. The host-side twin is qgate/quant/block_formats.h.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace qgate::cuda::blocks {

enum : int { kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14 };

__host__ __device__ constexpr int block_bytes(int type) {
  return type == kQ4_0 ? 18 : type == kQ4_1 ? 20 : type == kQ5_0 ? 22 : type == kQ5_1 ? 24
       : type == kQ8_0 ? 34 : type == kQ4_K ? 144 : type == kQ5_K ? 176 : type == kQ6_K ? 210 : 0;
}
__host__ __device__ constexpr bool is_kquant(int type) { return type >= kQ4_K; }
/// The min-carrying types: w = ds * q + dm with dm != 0.
__host__ __device__ constexpr bool has_min(int type) {
  return type == kQ4_1 || type == kQ5_1 || type == kQ4_K || type == kQ5_K;
}

__device__ __forceinline__ float f16_bits_to_f32(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xffffu)));
}

/// Four unsigned quants q (one per byte, each below 2m, m one of 8, 16, 32) as the four int8 q - m.
/// q + 128 - m never carries out of its byte, and flipping bit 7 then subtracts 128 mod 256.
template <uint32_t M>
__device__ __forceinline__ uint32_t bytes_minus(uint32_t q) {
  static_assert(M == 8 || M == 16 || M == 32, "the ggml offsets");
  return (q + (128u - M) * 0x01010101u) ^ 0x80808080u;
}

/// Spreads 4 bits of x onto bit 4 of each byte: the fifth bit of four 5-bit quants. One multiply
/// moves bit i to bit 4 + 8i: the four partial products' bits never overlap (their shifts 4, 11, 18,
/// 25 differ by more than 3), so nothing carries, and the mask keeps just those four bits.
__device__ __forceinline__ uint32_t spread4_to_bit4(uint32_t x) {
  return ((x & 0xfu) * 0x02040810u) & 0x10101010u;
}

/// ggml's 6-bit K-quant scale/min packing (12 bytes for 8 sub-blocks): sub-blocks 0..3 keep their
/// scale and min in the low 6 bits of bytes 0..3 and 4..7; sub-blocks 4..7 take their low 4 bits
/// from bytes 8..11 (scale low nibble, min high nibble) and their top 2 bits from the spare top bits
/// of bytes 0..3 (scale) and 4..7 (min). `scale_byte(j)` returns byte j of the 12.
template <class ScaleByte>
__device__ __forceinline__ void kquant_scale_min(ScaleByte scale_byte, int sub, uint32_t* sc, uint32_t* m) {
  if (sub < 4) {
    *sc = scale_byte(sub) & 63u;
    *m = scale_byte(sub + 4) & 63u;
  } else {
    *sc = (scale_byte(sub + 4) & 0x0fu) | ((scale_byte(sub - 4) >> 6) << 4);
    *m = (scale_byte(sub + 4) >> 4) | ((scale_byte(sub) >> 6) << 4);
  }
}

}  // namespace qgate::cuda::blocks
