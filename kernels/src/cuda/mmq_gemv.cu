// The MMQ GEMV: 1..8 tokens, the decode steps, where the decode kernel's n8 mma (mmq_decode.cu)
// multiplies zero columns below 8 tokens and spends its issue slots on fragment bookkeeping. Here one
// thread computes one 32-k chunk of a row against every token with dp4a, so a warp instruction does
// useful work on 32 chunks at once and the kernel is left bound by one read of the weights. The
// math per chunk is the tile kernel's (out += da * (ds * dot + dm * sum(q_a)); q6_K two k16 dots),
// with its f32 operations in its order; only the order of adding chunks differs.
//  - A CTA owns 8 weight rows. For NT tokens its 8 warps form row groups of R = min(NT, 4) rows, and
//    the R warps of a row group split k into contiguous ranges of stages (a lane's activations serve
//    R rows).
//  - A warp streams its rows' raw ggml bytes through a private ring of 2..4 shared-memory windows
//    with 16-byte cp.async: each lane copies fixed 16-byte lines of each row, from the 16-byte
//    boundary at or below the stage's first byte (the bytes before and after are in the same line of
//    the same allocation).
//  - Lane l decodes chunks l and l + 32 of a stage (weight_fragments.cuh, all four quarter words) and
//    takes every token's 32 quants as two 16-byte loads of the decode layout (launchers.h).
//  - Partial sums meet in a fixed order (a lane butterfly, then the k-split warps in order), so runs
//    are bit-identical.
//  - On sm_90 the kernel is a programmatic dependent of the activation quantizer: its first weight
//    stages are in flight while the quantizer runs.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <mutex>

#include "cuda/block_formats.cuh"
#include "cuda/launchers.h"
#include "cuda/mma_s8.cuh"
#include "cuda/weight_fragments.cuh"

namespace qgate::cuda {
namespace {

using namespace blocks;
using namespace weights;
using namespace ptx;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kRowsCta = 8;              // weight rows per CTA, whatever NT
constexpr int kWarpRingBudget = 9 * 1024;  // bytes of ring per warp: three CTAs per SM at worst

// The shape of the work for NT tokens (1, 2, 4 or 8): min(NT, 4) rows per warp, so that a lane's
// activation loads serve that many rows, and as many warps splitting k, so that every CTA has 8
// rows; from 4 tokens on a lane takes one chunk per stage (registers), else two.
__host__ __device__ constexpr int rows_per_warp(int nt) { return nt < 4 ? nt : 4; }
__host__ __device__ constexpr int ksplit(int nt) { return rows_per_warp(nt); }
__host__ __device__ constexpr int lane_chunks(int nt) { return nt >= 4 ? 1 : 2; }
__host__ __device__ constexpr int stage_chunks(int nt) { return 32 * lane_chunks(nt); }
// A row's bytes per stage (the K-quants' chunks come in super-blocks of 8).
__host__ __device__ constexpr int gemv_stage_bytes(int type, int nt) {
  return is_kquant(type) ? stage_chunks(nt) / 8 * block_bytes(type) : stage_chunks(nt) * block_bytes(type);
}
// Room for a stage plus a start up to 15 bytes into its first 16-byte line.
__host__ __device__ constexpr int row_pitch(int type, int nt) { return (gemv_stage_bytes(type, nt) + 15 + 15) / 16 * 16; }
__host__ __device__ constexpr int stage_window(int type, int nt) { return rows_per_warp(nt) * row_pitch(type, nt); }
__host__ __device__ constexpr int ring_stages(int type, int nt) {
  const int fit = kWarpRingBudget / stage_window(type, nt);
  return fit < 2 ? 2 : fit > 4 ? 4 : fit;
}
__host__ __device__ constexpr int gemv_smem_bytes(int type, int nt) { return kWarps * ring_stages(type, nt) * stage_window(type, nt); }

struct GemvActs {
  const uint8_t* q;    // [nb][nt][32] quants, fragment order
  const uint16_t* d;   // [nb][nt] f16
  const int32_t* sum;  // [nb][nt]
};

template <int TYPE, int NT>
__global__ void __launch_bounds__(kThreads)
    mmq_gemv_kernel(const uint8_t* __restrict__ w, size_t row_bytes, GemvActs act, float* __restrict__ y, int nt,
                    int od, int nchunks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kRpw = rows_per_warp(NT);
  constexpr int kSplit = ksplit(NT);
  constexpr int kLaneChunks = lane_chunks(NT);
  constexpr int kStageChunksG = stage_chunks(NT);
  constexpr int kSB = gemv_stage_bytes(TYPE, NT);
  constexpr int kPitch = row_pitch(TYPE, NT);
  constexpr int kWindow = stage_window(TYPE, NT);
  constexpr int kStages = ring_stages(TYPE, NT);
  constexpr int kLines = kPitch / 16;                      // 16-byte lines a row's stage can span
  constexpr int kLaneLines = (kLines + 31) / 32;           // of which each lane copies up to this many
  static_assert(kSplit * (kRowsCta / kRpw) == kWarps, "8 / NT row groups of NT warps");
  extern __shared__ __align__(16) uint8_t smem[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int group = warp / kSplit, part = warp - group * kSplit;
  const int row0 = blockIdx.x * kRowsCta + group * kRpw;
  uint8_t* ring = smem + warp * kStages * kWindow;

  // This warp's stages: a contiguous share of the rows' ceil(nchunks / stage_chunks).
  const int nstages = (nchunks + kStageChunksG - 1) / kStageChunksG;
  const int per = (nstages + kSplit - 1) / kSplit;
  const int st_begin = min(nstages, part * per);
  const int st_end = min(nstages, st_begin + per);

  // Row r's first byte (rows past od read row od-1; they are never stored), and the 16-byte lines
  // of its stages this lane copies: line lane + 32 j of the stage, counted from the 16-byte boundary
  // at or below the stage's first byte. Addresses are worked out once; a stage adds kSB.
  const uint8_t* row_start[kRpw];
#pragma unroll
  for (int r = 0; r < kRpw; ++r) row_start[r] = w + static_cast<size_t>(min(row0 + r, od - 1)) * row_bytes;
  const uint32_t ring_s = smem_addr(ring) + 16u * lane;  // this lane's first line in the ring
  // Where row r's stage st begins inside its first 16-byte line.
  const auto stage_lead = [&](int r, int st) -> int {
    return static_cast<int>((static_cast<uint32_t>(reinterpret_cast<uintptr_t>(row_start[r])) +
                             static_cast<uint32_t>(st) * kSB) & 15u);
  };
  const auto issue = [&](int st, int buf) {
    // The last stage may be short (K-quant rows are whole super-blocks, 8 chunks each).
    const int chunks = min(kStageChunksG, nchunks - st * kStageChunksG);
    const int bytes = (is_kquant(TYPE) ? chunks / 8 : chunks) * block_bytes(TYPE);
#pragma unroll
    for (int r = 0; r < kRpw; ++r) {
      const int lead = stage_lead(r, st);
      const uint8_t* src = row_start[r] + static_cast<size_t>(st) * kSB - lead + 16 * lane;
      const uint32_t dst = ring_s + static_cast<uint32_t>(buf * kWindow + r * kPitch);
      const int lines = (lead + bytes + 15) >> 4;
#pragma unroll
      for (int j = 0; j < kLaneLines; ++j)
        if (lane + 32 * j < lines) cp_async16(dst + 512u * j, src + 512 * j);
    }
    cp_async_commit();
  };
  // This lane's activations: chunk lane + 32 i of a stage, token n, at (chunk * nt + n) in the
  // decode layout's three regions; a stage moves every pointer on by stage_chunks * nt entries.
  const int stage_entries = kStageChunksG * nt;
  const uint4* lane_q = reinterpret_cast<const uint4*>(act.q) + 2 * lane * nt;  // 32 bytes an entry
  const uint16_t* lane_d = act.d + lane * nt;
  const int32_t* lane_sum = act.sum + lane * nt;

  float acc[kRpw][NT];
#pragma unroll
  for (int r = 0; r < kRpw; ++r)
#pragma unroll
    for (int n = 0; n < NT; ++n) acc[r][n] = 0.0f;

  // Weights do not depend on the activation quantizer that runs just before this kernel.
#pragma unroll
  for (int p = 0; p < kStages - 1; ++p) {
    if (st_begin + p < st_end) issue(st_begin + p, p);
    else cp_async_commit();  // empty group: the wait count below stays uniform
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  for (int st = st_begin; st < st_end; ++st) {
    const int buf = (st - st_begin) % kStages;
    // Every token's quants, scale and sum for this lane's chunks (L1/L2), before the weights' wait.
    uint4 aq[kLaneChunks][NT][2];
    float da[kLaneChunks][NT], sa[kLaneChunks][NT];
    const int st_entry = st * stage_entries;
#pragma unroll
    for (int i = 0; i < kLaneChunks; ++i) {
      const bool chunk_live = st * kStageChunksG + lane + 32 * i < nchunks;
      const int at = st_entry + 32 * i * nt;  // entries past this lane's first
#pragma unroll
      for (int n = 0; n < NT; ++n) {
        const bool live = chunk_live && n < nt;
        aq[i][n][0] = live ? lane_q[2 * (at + n)] : make_uint4(0u, 0u, 0u, 0u);
        aq[i][n][1] = live ? lane_q[2 * (at + n) + 1] : make_uint4(0u, 0u, 0u, 0u);
        da[i][n] = live ? f16_bits_to_f32(lane_d[at + n]) : 0.0f;
        sa[i][n] = 0.0f;
        if constexpr (has_min(TYPE)) sa[i][n] = live ? static_cast<float>(lane_sum[at + n]) : 0.0f;
      }
    }
    const int next = st + kStages - 1;
    if (next < st_end) issue(next, (next - st_begin) % kStages);
    else cp_async_commit();
    cp_async_wait<kStages - 1>();  // stage st's group is complete
    __syncwarp();
    int lead[kRpw];
#pragma unroll
    for (int r = 0; r < kRpw; ++r) lead[r] = stage_lead(r, st);

#pragma unroll
    for (int i = 0; i < kLaneChunks; ++i) {
      const int c = lane + 32 * i;  // chunk of the stage
      if (st * kStageChunksG + c >= nchunks) continue;
#pragma unroll
      for (int r = 0; r < kRpw; ++r) {
        const uint8_t* s = ring + buf * kWindow + r * kPitch + lead[r];
        Frag f[4];
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          if constexpr (is_kquant(TYPE)) f[t] = decode_frag<TYPE>(s + (c >> 3) * block_bytes(TYPE), c & 7, t);
          else f[t] = decode_frag<TYPE>(s, c, t);
        }
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          const uint4& a0 = aq[i][n][0];
          const uint4& a1 = aq[i][n][1];
          // Fragment order: the words of quarter t are lo = a[2t], hi = a[2t + 1].
          int lo = __dp4a(f[0].lo, static_cast<int>(a0.x), 0);
          lo = __dp4a(f[1].lo, static_cast<int>(a0.z), lo);
          lo = __dp4a(f[2].lo, static_cast<int>(a1.x), lo);
          lo = __dp4a(f[3].lo, static_cast<int>(a1.z), lo);
          int hi = __dp4a(f[0].hi, static_cast<int>(a0.y), 0);
          hi = __dp4a(f[1].hi, static_cast<int>(a0.w), hi);
          hi = __dp4a(f[2].hi, static_cast<int>(a1.y), hi);
          hi = __dp4a(f[3].hi, static_cast<int>(a1.w), hi);
          float v;
          if constexpr (TYPE == kQ6_K) {
            v = f[0].ds0 * static_cast<float>(lo);  // k 0..15: scales[2s]
            v = fmaf(f[0].ds1, static_cast<float>(hi), v);
          } else {
            v = f[0].ds0 * static_cast<float>(lo + hi);
          }
          if constexpr (has_min(TYPE)) v = fmaf(f[0].dm, sa[i][n], v);
          acc[r][n] = fmaf(da[i][n], v, acc[r][n]);
        }
      }
    }
    __syncwarp();  // every lane is done with this buffer before the next issue overwrites it
  }

  // The 32 lanes' sums, by a butterfly (the same order on every run).
#pragma unroll
  for (int r = 0; r < kRpw; ++r)
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int m = 16; m >= 1; m >>= 1) acc[r][n] += __shfl_xor_sync(0xffffffffu, acc[r][n], m);

  // Then the row group's k-split warps, in order, through shared memory (the rings are free by then).
  cp_async_wait<0>();
  __syncthreads();
  float* part_sums = reinterpret_cast<float*>(smem);  // [warp][kRpw][NT]
  if (lane == 0) {
#pragma unroll
    for (int r = 0; r < kRpw; ++r)
#pragma unroll
      for (int n = 0; n < NT; ++n) part_sums[(warp * kRpw + r) * NT + n] = acc[r][n];
  }
  __syncthreads();
  if (part != 0 || lane >= kRpw * NT) return;
  const int r = lane / NT, n = lane - r * NT;
  float sum = part_sums[(warp * kRpw + r) * NT + n];
#pragma unroll
  for (int p = 1; p < kSplit; ++p) sum += part_sums[((warp + p) * kRpw + r) * NT + n];
  if (row0 + r < od && n < nt) y[static_cast<size_t>(n) * od + row0 + r] = sum;
#endif
}

template <int TYPE, int NT>
int launch_typed(const void* weights, int64_t od, int64_t k, const void* q8, int64_t nt, float* y,
                 cudaStream_t stream) {
  auto kernel = mmq_gemv_kernel<TYPE, NT>;
  constexpr int kSmem = gemv_smem_bytes(TYPE, NT);
  static_assert(kSmem >= kWarps * rows_per_warp(NT) * NT * 4, "the reduction reuses the rings");
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return static_cast<int>(e);
  static std::mutex mu;
  static uint64_t done_mask = 0;  // devices that have the shared-memory opt-in for this kernel
  static uint64_t pdl_mask = 0;   // devices of sm_90 or newer: programmatic dependent launch
  bool pdl = false;
  {
    std::lock_guard<std::mutex> lock(mu);
    const uint64_t bit = dev < 64 ? (uint64_t{1} << dev) : 0;
    if (bit == 0 || (done_mask & bit) == 0) {
      e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
      if (e != cudaSuccess) return static_cast<int>(e);
      int major = 0;
      e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
      if (e != cudaSuccess) return static_cast<int>(e);
      if (major >= 9) pdl_mask |= bit;
      done_mask |= bit;
    }
    pdl = (pdl_mask & bit) != 0;
  }
  const uint8_t* base = static_cast<const uint8_t*>(q8);
  GemvActs act;
  act.q = base;
  act.d = reinterpret_cast<const uint16_t*>(base + q8_decode_scales_offset(nt, k));
  act.sum = reinterpret_cast<const int32_t*>(base + q8_decode_sums_offset(nt, k));
  const size_t row_bytes = static_cast<size_t>(k / (is_kquant(TYPE) ? 256 : 32)) * block_bytes(TYPE);
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>((od + kRowsCta - 1) / kRowsCta));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kSmem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = pdl ? 1 : 0;
  e = cudaLaunchKernelEx(&config, kernel, static_cast<const uint8_t*>(weights), row_bytes, act, y,
                         static_cast<int>(nt), static_cast<int>(od), static_cast<int>(k / 32));
  if (e != cudaSuccess) return static_cast<int>(e);
  return static_cast<int>(cudaGetLastError());
}

template <int TYPE>
int launch_for_tokens(const void* weights, int64_t od, int64_t k, const void* q8, int64_t nt, float* y,
                      cudaStream_t stream) {
  if (nt == 1) return launch_typed<TYPE, 1>(weights, od, k, q8, nt, y, stream);
  if (nt == 2) return launch_typed<TYPE, 2>(weights, od, k, q8, nt, y, stream);
  if (nt <= 4) return launch_typed<TYPE, 4>(weights, od, k, q8, nt, y, stream);
  return launch_typed<TYPE, 8>(weights, od, k, q8, nt, y, stream);
}

}  // namespace

int launch_mmq_gemv(int32_t type, const void* weights, int64_t od, int64_t k, const void* q8, int64_t nt,
                    float* y, void* stream) {
  const int bb = block_bytes(type);
  if (bb == 0 || weights == nullptr || q8 == nullptr || y == nullptr || nt <= 0 || nt > kGemvMaxTokens ||
      od <= 0 || k <= 0)
    return static_cast<int>(cudaErrorInvalidValue);
  if (k % (is_kquant(type) ? 256 : 32) != 0) return static_cast<int>(cudaErrorInvalidValue);
  if (od > INT_MAX || k / 32 > INT_MAX || (od + kRowsCta - 1) / kRowsCta > INT_MAX)
    return static_cast<int>(cudaErrorInvalidValue);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case kQ4_0: return launch_for_tokens<kQ4_0>(weights, od, k, q8, nt, y, s);
    case kQ4_1: return launch_for_tokens<kQ4_1>(weights, od, k, q8, nt, y, s);
    case kQ5_0: return launch_for_tokens<kQ5_0>(weights, od, k, q8, nt, y, s);
    case kQ5_1: return launch_for_tokens<kQ5_1>(weights, od, k, q8, nt, y, s);
    case kQ8_0: return launch_for_tokens<kQ8_0>(weights, od, k, q8, nt, y, s);
    case kQ4_K: return launch_for_tokens<kQ4_K>(weights, od, k, q8, nt, y, s);
    case kQ5_K: return launch_for_tokens<kQ5_K>(weights, od, k, q8, nt, y, s);
    case kQ6_K: return launch_for_tokens<kQ6_K>(weights, od, k, q8, nt, y, s);
    default: return static_cast<int>(cudaErrorInvalidValue);
  }
}

}  // namespace qgate::cuda
