// Host-callable launchers of qgate's CUDA kernels. Plain C++ on purpose: the backend (built by the
// host compiler) and the tests include this header, so no CUDA type appears here. Every launcher
// enqueues on `stream` (a cudaStream_t, nullptr = default stream), does not wait, and returns a
// cudaError_t value as int (0 = success; cudaErrorInvalidValue = 1 for arguments it refuses).
#pragma once

#include <cstddef>
#include <cstdint>

namespace qgate::cuda {

/// Bytes of one activation block in the q8 layout the MMQ kernel reads ("pad40"):
///   bytes  0..31  int8 q[32]        round-half-even(x / d), clamped to [-128, 127]
///   bytes 32..33  f16  d            amax / 127 rounded to f16 (what the rescale uses)
///   bytes 34..35  zero padding
///   bytes 36..39  int32 sum         sum of the 32 q (the rank-1 term of min-carrying types)
/// Blocks are laid out [nt][k / 32]; a 40-byte block keeps every block 8-byte aligned.
inline constexpr int kQ8BlockBytes = 40;
inline constexpr int kQ8BlockElems = 32;

/// Bytes of q8 scratch for nt tokens of k elements (k a multiple of 32).
inline size_t q8_activation_bytes(int64_t nt, int64_t k) {
  return static_cast<size_t>(nt) * static_cast<size_t>(k / kQ8BlockElems) * kQ8BlockBytes;
}

/// x[nt][k] f32 (device) -> q8 blocks (device, q8_activation_bytes(nt, k)). k % 32 == 0.
/// Rounds bit-identically to qgate::quant::quantize_block_q8.
int launch_quantize_q8(const float* x, int64_t nt, int64_t k, void* q8_out, void* stream);

/// The most tokens the MMQ decode path (launch_mmq_decode) takes: one n8 mma column per token.
inline constexpr int64_t kDecodeMaxTokens = 8;

/// The "decode" layout of the same q8 blocks, for nt <= kDecodeMaxTokens, in three regions:
///   quants  [k/32][nt][32] int8, each token's 32 in fragment order: for i = 0..3, bytes 8i..8i+3
///           are elements 4i..4i+3 and bytes 8i+4..8i+7 elements 16+4i..16+4i+3
///   scales  [k/32][nt] f16 d, at q8_decode_scales_offset
///   sums    [k/32][nt] int32, at q8_decode_sums_offset
/// It never needs more than q8_activation_bytes(nt + 1, k) (the sums' 8-byte alignment can take
/// it past q8_activation_bytes(nt, k) for a single block), within the backend's nt + 3.
inline size_t q8_decode_scales_offset(int64_t nt, int64_t k) {
  return static_cast<size_t>(nt) * static_cast<size_t>(k / kQ8BlockElems) * 32;
}
inline size_t q8_decode_sums_offset(int64_t nt, int64_t k) {
  const size_t end = q8_decode_scales_offset(nt, k) + static_cast<size_t>(nt) * static_cast<size_t>(k / kQ8BlockElems) * 2;
  return (end + 7) & ~size_t{7};
}

/// x[nt][k] f32 (device) -> the decode layout above (same rounding as launch_quantize_q8).
int launch_quantize_q8_decode(const float* x, int64_t nt, int64_t k, void* q8_out, void* stream);

/// The "k-major" layout of the same q8 blocks, read by the wgmma kernel (launch_mmq_wgmma), in three
/// regions; ntp = nt rounded up to a multiple of 16:
///   quants  [k/32][2][nt][16] int8: block b's elements 0..15 of every token, then its 16..31
///   scales  [k/32][ntp] f32, the f16 d as f32 (exact), at q8_kmajor_scales_offset
///   sums    [k/32][ntp] f32, the int sum as f32 (exact), at q8_kmajor_sums_offset
/// In the last two, token tok sits in slot q8_kmajor_token_slot(tok) of its row: within each 16
/// tokens 16m + 8a + 2t + e, slot 16m + 4t + 2a + e, so that the four scales one thread of a wgmma
/// accumulator fragment needs (tokens 2t, 2t + 1, 8 + 2t, 9 + 2t) are one 16-byte load. Slots of
/// tokens nt..ntp-1 are never written and never read for an output that is stored.
inline int64_t q8_kmajor_padded_tokens(int64_t nt) { return (nt + 15) / 16 * 16; }
#if defined(__CUDACC__)
__host__ __device__
#endif
inline int64_t q8_kmajor_token_slot(int64_t tok) {
  return (tok & ~int64_t{15}) | (((tok >> 1) & 3) << 2) | (((tok >> 3) & 1) << 1) | (tok & 1);
}
inline size_t q8_kmajor_scales_offset(int64_t nt, int64_t k) { return static_cast<size_t>(nt) * static_cast<size_t>(k); }
inline size_t q8_kmajor_sums_offset(int64_t nt, int64_t k) {
  return q8_kmajor_scales_offset(nt, k) + static_cast<size_t>(q8_kmajor_padded_tokens(nt)) * static_cast<size_t>(k / kQ8BlockElems) * 4;
}
inline size_t q8_kmajor_bytes(int64_t nt, int64_t k) {
  return q8_kmajor_sums_offset(nt, k) + static_cast<size_t>(q8_kmajor_padded_tokens(nt)) * static_cast<size_t>(k / kQ8BlockElems) * 4;
}

/// x[nt][k] f32 (device) -> the k-major layout above (same rounding as launch_quantize_q8).
int launch_quantize_q8_kmajor(const float* x, int64_t nt, int64_t k, void* q8_out, void* stream);

/// n f32 values -> n f16 values (round-to-nearest-even), both in device memory.
int launch_f32_to_f16(const float* x, void* y_f16, int64_t n, void* stream);

/// True when this binary carries the MMQ kernel for the current device's architecture family
/// (sm_80 or newer); the kernel body is compiled out below sm_80.
bool mmq_supported_on_current_device();

/// y[nt][od] (f32, row-major) = x * W^T in the MMQ math. `weights` are the raw ggml blocks of
/// od rows (row_bytes each, type given by its ggml id), `q8` the output of launch_quantize_q8 for
/// the same nt and k. k must be a multiple of the type's block (32 or 256).
int launch_mmq_gemm(int32_t type, const void* weights, int64_t od, int64_t k, const void* q8,
                    int64_t nt, float* y, void* stream);

/// The same product as launch_mmq_gemm for nt <= kDecodeMaxTokens, with `q8` in the decode layout
/// (launch_quantize_q8_decode). Bound by one read of the weights; results are bit-identical from run
/// to run (they may differ from launch_mmq_gemm's in the f32 summation order only).
int launch_mmq_decode(int32_t type, const void* weights, int64_t od, int64_t k, const void* q8,
                      int64_t nt, float* y, void* stream);

/// The most tokens the MMQ GEMV (launch_mmq_gemv) takes: as many as the decode layout holds.
inline constexpr int64_t kGemvMaxTokens = kDecodeMaxTokens;

/// The same product as launch_mmq_decode for nt <= kGemvMaxTokens (same decode layout of `q8`), one
/// thread per 32-k chunk and row with dp4a: at few tokens it issues a fraction of the decode
/// kernel's instructions per weight byte. Bit-identical from run to run; it may differ from the other
/// MMQ kernels in the f32 summation order only.
int launch_mmq_gemv(int32_t type, const void* weights, int64_t od, int64_t k, const void* q8,
                    int64_t nt, float* y, void* stream);

/// True when launch_mmq_wgmma serves this GEMM on the current device: a device of compute capability
/// 9.0 (the kernel is built for sm_90a only), k a multiple of 256, more than kDecodeMaxTokens tokens.
bool mmq_wgmma_usable(int64_t nt, int64_t k);

/// The same product as launch_mmq_gemm on Hopper's warpgroup mma (wgmma, sm_90a), with `q8` in the
/// k-major layout (launch_quantize_q8_kmajor). Every f32 operation and its order match
/// launch_mmq_gemm's, so the two kernels' results are bit-identical.
int launch_mmq_wgmma(int32_t type, const void* weights, int64_t od, int64_t k, const void* q8, int64_t nt,
                     float* y, void* stream);

/// y[nt][od] (f32, row-major) = x_f16[nt][k] * w_f16[od][k]^T, f32 accumulation on tensor cores.
/// k must be a multiple of 8 (16-byte rows for cp.async).
int launch_f16_gemm(const void* x_f16, const void* w_f16, int64_t nt, int64_t od, int64_t k,
                    float* y, void* stream);

}  // namespace qgate::cuda
