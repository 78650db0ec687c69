// The decode path of the MMQ GEMM: nt <= 8 tokens, where the 64-token tile of mmq_gemm.cu would
// multiply 56+ rows of zeros and read the weights as slowly as a 64-row job. Same math as the tile
// kernel (the rescale out += da * (ds * dot + dm * sum(q_a)) per 32-k block, int32 dots on the
// tensor cores), with the operands swapped so that nothing is wasted at 8 tokens:
//   A (m16 x k32, s8) = 16 WEIGHT rows, decoded from raw ggml blocks in registers;
//   B (k32 x n8,  s8) = the (up to) 8 tokens' q8 quants, in the decode layout of launchers.h.
// The kernel is bound by reading the weights once, so everything is arranged around that read:
//  - a CTA owns 16 weight rows; its 8 warps split k into 8 contiguous ranges;
//  - each warp streams its rows' bytes through a private ring of 2..4 shared-memory windows with
//    16-byte cp.async, 256 k per stage (a row's window starts at the 16-byte boundary at or below
//    its first byte, so every copy is aligned whatever the block size; the bytes read before the
//    first and after the last needed one are in the same 16-byte line of the same allocation);
//  - a lane reads the 4 bytes of its A fragment straight from the window (no re-layout) and its B
//    fragment as one 8-byte load (the decode layout stores each token's quants in fragment order);
//  - the 8 warps' partial sums are added in a fixed order in shared memory: runs are bit-identical;
//  - on sm_90 the kernel is launched as a programmatic dependent of the activation quantizer, so
//    its first weight stages are in flight while the quantizer still runs.
// Fragment facts (PTX ISA, m16n8k32 .s8; g = lane/4, t = lane%4): the A words are those of
// weight_fragments.cuh; b0/b1 = token g, k 4t.. / 16+4t..; c0,c1 = row g, tokens 2t,2t+1; c2,c3 =
// row g+8.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "cuda/block_formats.cuh"
#include "cuda/kernel_launch.cuh"
#include "cuda/launchers.h"
#include "cuda/mma_s8.cuh"
#include "cuda/weight_fragments.cuh"

namespace qgate::cuda {
namespace {

using namespace blocks;
using namespace weights;

constexpr int kRows = 16;          // weight rows per CTA (one m16 A tile)
constexpr int kWarps = 8;          // k ranges per CTA
constexpr int kThreads = 32 * kWarps;
constexpr int kCtaSmemBudget = 112 * 1024;  // two CTAs per SM on sm_90 (228 KB)

__host__ __device__ constexpr int window_bytes(int type) { return kRows * window_pitch(type) * 16; }
// Stages in flight per warp: as deep as the budget allows (2..4), since the kernel waits on DRAM.
__host__ __device__ constexpr int stages(int type) {
  const int fit = kCtaSmemBudget / (kWarps * window_bytes(type));
  return fit < 2 ? 2 : fit > 4 ? 4 : fit;
}
__host__ __device__ constexpr int smem_bytes(int type) { return kWarps * stages(type) * window_bytes(type); }

using namespace ptx;

// The decode layout's three regions for nt tokens and nb 32-k blocks (launchers.h).
struct DecodeActs {
  const uint8_t* q;    // [nb][nt][32] quants, fragment order
  const uint16_t* d;   // [nb][nt] f16
  const int32_t* sum;  // [nb][nt]
};

template <int TYPE>
__global__ void __launch_bounds__(kThreads, 2)
    mmq_decode_kernel(const uint8_t* __restrict__ w, size_t row_bytes, DecodeActs act, float* __restrict__ y,
                      int nt, int od, int nchunks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kPitch = window_pitch(TYPE) * 16;  // bytes per row of a window
  constexpr int kWindow = window_bytes(TYPE);      // bytes of one stage's window
  constexpr int kStages = stages(TYPE);
  constexpr int kSB = stage_bytes(TYPE);
  extern __shared__ __align__(16) uint8_t smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int row0 = blockIdx.x * kRows;
  uint8_t* win = smem + warp * kStages * kWindow;

  // This warp's stages: a contiguous share of the row's ceil(nchunks / 8).
  const int nstages = (nchunks + kStageChunks - 1) / kStageChunks;
  const int per = (nstages + kWarps - 1) / kWarps;
  const int st_begin = min(nstages, warp * per);
  const int st_end = min(nstages, st_begin + per);

  // Stage st of the 16 rows into window buffer `buf`: each row's bytes from its 16-byte boundary.
  // Rows past od copy row od-1 (their results are never stored). When the weights, their rows and
  // a stage are all 16-byte aligned (every type but q6_K, on rows of whole 16-byte lines), each
  // lane's copies have fixed rows and columns, so their addresses are worked out once here.
  constexpr int kVecs = kSB / 16;
  constexpr int kFastSlots = (kRows * kVecs + 31) / 32;
  const bool fast = kSB % 16 == 0 && row_bytes % 16 == 0 && (reinterpret_cast<uintptr_t>(w) & 15u) == 0;
  const uint8_t* slot_src[kFastSlots];
  int slot_dst[kFastSlots];
#pragma unroll
  for (int j = 0; j < kFastSlots; ++j) {
    const int i = lane + 32 * j;
    const int r = min(i / kVecs, kRows - 1), v = i - (i / kVecs) * kVecs;
    slot_src[j] = w + static_cast<size_t>(min(row0 + r, od - 1)) * row_bytes + 16 * v;
    slot_dst[j] = i < kRows * kVecs ? r * kPitch + 16 * v : -1;
  }
  const auto issue = [&](int st, int buf) {
    const int bytes = is_kquant(TYPE) ? kSB : min(kStageChunks, nchunks - st * kStageChunks) * block_bytes(TYPE);
    uint8_t* dst = win + buf * kWindow;
    if (fast) {
#pragma unroll
      for (int j = 0; j < kFastSlots; ++j) {
        const int v16 = slot_dst[j] % kPitch;  // 16 * the slot's column
        if (slot_dst[j] >= 0 && v16 < bytes)
          cp_async16(smem_addr(dst + slot_dst[j]), slot_src[j] + static_cast<size_t>(st) * kSB);
      }
    } else {
#pragma unroll 2
      for (int i = lane; i < kRows * window_pitch(TYPE); i += 32) {
        const int r = i / window_pitch(TYPE), v = i - r * window_pitch(TYPE);
        const uintptr_t start = reinterpret_cast<uintptr_t>(w) +
                                static_cast<size_t>(min(row0 + r, od - 1)) * row_bytes + static_cast<size_t>(st) * kSB;
        const uintptr_t base = start & ~uintptr_t{15};
        if (base + 16u * v < start + bytes)
          cp_async16(smem_addr(dst + r * kPitch + 16 * v), reinterpret_cast<const void*>(base + 16u * v));
      }
    }
    cp_async_commit();
  };
  // Where row r's stage st begins inside its window row.
  const auto lead = [&](int r, int st) -> int {
    if (fast) return 0;
    return static_cast<int>((reinterpret_cast<uintptr_t>(w) + static_cast<size_t>(min(row0 + r, od - 1)) * row_bytes +
                             static_cast<size_t>(st) * kSB) & 15u);
  };

  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const bool tok_b = g < nt;                        // this lane's B column holds a real token
  const bool tok_c0 = 2 * t < nt, tok_c1 = 2 * t + 1 < nt;  // its C columns
  const uint8_t* lane_q = act.q + g * 32 + 8 * t;  // + 32 * (block * nt): its B fragment
  const uint16_t* lane_d = act.d + 2 * t;          // + block * nt: its C columns' scales
  const int32_t* lane_sum = act.sum + 2 * t;       // and sums

  // Weights do not depend on the activation quantizer that runs just before this kernel: the first
  // stages are requested before waiting for it (programmatic dependent launch on sm_90).
#pragma unroll
  for (int p = 0; p < kStages - 1; ++p) {
    if (st_begin + p < st_end) issue(st_begin + p, p);
    else cp_async_commit();  // empty group: the wait count below stays uniform
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  // The next call's quantizer may launch now: it waits for this grid to complete before it touches
  // anything, so its launch overlaps this kernel's work instead of following it.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  for (int st = st_begin; st < st_end; ++st) {
    const int buf = (st - st_begin) % kStages;
    // The B fragments and activation scales of this stage come from L1/L2; start them first.
    uint2 bq[kStageChunks];
    float da[kStageChunks][2], sa[kStageChunks][2];
#pragma unroll
    for (int c = 0; c < kStageChunks; ++c) {
      const size_t tb = static_cast<size_t>(min(st * kStageChunks + c, nchunks - 1)) * nt;
      bq[c] = tok_b ? *reinterpret_cast<const uint2*>(lane_q + tb * 32) : make_uint2(0u, 0u);
      da[c][0] = tok_c0 ? f16_bits_to_f32(lane_d[tb]) : 0.0f;
      da[c][1] = tok_c1 ? f16_bits_to_f32(lane_d[tb + 1]) : 0.0f;
      if constexpr (has_min(TYPE)) {
        sa[c][0] = tok_c0 ? static_cast<float>(lane_sum[tb]) : 0.0f;
        sa[c][1] = tok_c1 ? static_cast<float>(lane_sum[tb + 1]) : 0.0f;
      }
    }
    // Stage st + kStages - 1 goes into the buffer that stage st - 1 used (every lane is done with it).
    const int next = st + kStages - 1;
    if (next < st_end) issue(next, (next - st_begin) % kStages);
    else cp_async_commit();
    cp_async_wait<kStages - 1>();  // stage st's group is complete
    __syncwarp();

    const uint8_t* s0 = win + buf * kWindow + g * kPitch + lead(g, st);
    const uint8_t* s1 = win + buf * kWindow + (g + 8) * kPitch + lead(g + 8, st);
#pragma unroll
    for (int c = 0; c < kStageChunks; ++c) {
      if (st * kStageChunks + c >= nchunks) break;
      const Frag f0 = decode_frag<TYPE>(s0, c, t);
      const Frag f1 = decode_frag<TYPE>(s1, c, t);
      int c0[4] = {0, 0, 0, 0};
      int c1[4] = {0, 0, 0, 0};
      if constexpr (TYPE == kQ6_K) {
        mma_k16(c0, f0.lo, f1.lo, static_cast<int>(bq[c].x));  // k 0..15: scales[2s]
        mma_k16(c1, f0.hi, f1.hi, static_cast<int>(bq[c].y));  // k 16..31: scales[2s+1]
      } else {
        mma_k32(c0, f0.lo, f1.lo, f0.hi, f1.hi, static_cast<int>(bq[c].x), static_cast<int>(bq[c].y));
      }
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const Frag& f = r < 2 ? f0 : f1;
        const int e = r & 1;
        float v = f.ds0 * static_cast<float>(c0[r]);
        if constexpr (TYPE == kQ6_K) v = fmaf(f.ds1, static_cast<float>(c1[r]), v);
        if constexpr (has_min(TYPE)) v = fmaf(f.dm, sa[c][e], v);
        acc[r] = fmaf(da[c][e], v, acc[r]);
      }
    }
    __syncwarp();  // every lane is done with this buffer before the next issue overwrites it
  }

  // Fixed-order reduction of the 8 k ranges: warp 0 adds warps 0..7 lane by lane.
  cp_async_wait<0>();
  __syncthreads();  // the windows are free now; reuse them for the partial sums
  float4* part = reinterpret_cast<float4*>(smem);
  part[warp * 32 + lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
  __syncthreads();
  if (warp != 0) return;
  float4 sum = part[lane];
#pragma unroll
  for (int v = 1; v < kWarps; ++v) {
    const float4 p = part[v * 32 + lane];
    sum.x += p.x;
    sum.y += p.y;
    sum.z += p.z;
    sum.w += p.w;
  }
  const float out[4] = {sum.x, sum.y, sum.z, sum.w};
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = row0 + g + (r >> 1) * 8;
    const int tok = 2 * t + (r & 1);
    if (row < od && tok < nt) y[static_cast<size_t>(tok) * od + row] = out[r];
  }
#endif
}

template <int TYPE>
int launch_typed(const void* weights, int64_t od, int64_t k, const void* q8, int64_t nt, float* y,
                 cudaStream_t stream) {
  constexpr int kSmem = smem_bytes(TYPE);
  static_assert(kSmem >= kThreads * 16, "the reduction reuses the windows");
  bool pdl = false;
  if (const cudaError_t e = launch::prepare<mmq_decode_kernel<TYPE>>(kSmem, &pdl); e != cudaSuccess)
    return static_cast<int>(e);
  const uint8_t* base = static_cast<const uint8_t*>(q8);
  DecodeActs act;
  act.q = base;
  act.d = reinterpret_cast<const uint16_t*>(base + q8_decode_scales_offset(nt, k));
  act.sum = reinterpret_cast<const int32_t*>(base + q8_decode_sums_offset(nt, k));
  const size_t row_bytes = static_cast<size_t>(k / (is_kquant(TYPE) ? 256 : 32)) * block_bytes(TYPE);
  return launch::dependent(mmq_decode_kernel<TYPE>, dim3(static_cast<unsigned>((od + kRows - 1) / kRows)),
                           dim3(kThreads), kSmem, stream, pdl, static_cast<const uint8_t*>(weights), row_bytes, act, y,
                           static_cast<int>(nt), static_cast<int>(od), static_cast<int>(k / 32));
}

}  // namespace

int launch_mmq_decode(int32_t type, const void* weights, int64_t od, int64_t k, const void* q8, int64_t nt,
                      float* y, void* stream) {
  const int bb = block_bytes(type);
  if (bb == 0 || weights == nullptr || q8 == nullptr || y == nullptr || nt <= 0 || nt > kDecodeMaxTokens ||
      od <= 0 || k <= 0)
    return static_cast<int>(cudaErrorInvalidValue);
  if (k % (is_kquant(type) ? 256 : 32) != 0) return static_cast<int>(cudaErrorInvalidValue);
  if (od > INT_MAX || k / 32 > INT_MAX || (od + kRows - 1) / kRows > INT_MAX)
    return static_cast<int>(cudaErrorInvalidValue);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  return launch::with_weight_type(
      type, [&](auto t) { return launch_typed<decltype(t)::value>(weights, od, k, q8, nt, y, s); });
}

}  // namespace qgate::cuda
