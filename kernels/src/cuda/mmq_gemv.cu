// The MMQ GEMV: 1..8 tokens, the decode steps, where the decode kernel's n8 mma (mmq_decode.cu)
// multiplies zero columns below 8 tokens and spends its issue slots on fragment bookkeeping. Here one
// thread computes one 32-k chunk of a row against every token with dp4a, so a warp instruction does
// useful work on 32 chunks at once and the kernel is left bound by one read of the weights. The
// math per chunk is the tile kernel's (out += da * (ds * dot + dm * sum(q_a)); q6_K two k16 dots),
// with its f32 operations in its order; only the order of adding chunks differs.
//  - A CTA works on 8 weight rows at a time (a row block). For NT tokens its 8 warps form row groups
//    of R rows (4, and per type at 1 token), and the R warps of a row group split k into contiguous
//    ranges (a lane's activations serve R rows). The grid is as many CTAs as the device holds at
//    once, each taking row blocks blockIdx.x, + gridDim.x, ... in turn, so there is no second wave.
//  - A warp streams its rows' raw ggml bytes through a private ring of 2..4 shared-memory windows, one
//    ring across all its row blocks (the next row block's first stages are in flight while this
//    one's last are added up),
//    with 16-byte cp.async: each lane copies fixed 16-byte lines of each row, from the 16-byte
//    boundary at or below the stage's first byte (the bytes before and after are in the same line of
//    the same allocation).
//  - Lane l decodes chunks l and l + 32 of a stage whole (legacy types with aligned word loads and
//    funnel shifts, q4_0's and q5_0's offset folded into the activation sum; q4_K and q5_K from
//    16-byte aligned weights with 16-byte loads; otherwise K-quants through weight_fragments.cuh's
//    quarters) and takes every token's 32 quants as two 16-byte loads of the decode layout
//    (launchers.h).
//  - Partial sums meet in a fixed order (a lane butterfly, then the k-split warps in order, at a named
//    barrier of the row group), so runs are bit-identical.
//  - On sm_90 the kernel is a programmatic dependent of the activation quantizer: its first weight
//    stages are in flight while the quantizer runs, and once its inputs are in, the next call's
//    quantizer may launch (it waits for this grid before it touches anything).
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
using namespace ptx;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kRowsCta = 8;              // weight rows per CTA, whatever NT
constexpr int kWarpRingBudget = 9 * 1024;  // bytes of ring per warp: three CTAs per SM at worst

// The shape of the work for NT tokens (1, 2, 4 or 8): R rows per warp, so that a lane's activation
// loads serve R rows, and R warps splitting k, so that every CTA has 8 rows; a lane takes one or two
// chunks per stage. From 2 tokens, R = 4, and one chunk per lane from 4 tokens on (registers). At 1
// token, measured per type on the H200 (bench/RESULTS.md, mmq-v7): 4 rows and two chunks for the
// legacy types, 4 rows and one chunk for q4_K and q5_K, 2 rows and two chunks for q6_K.
#if defined(QGATE_GEMV_R1) && defined(QGATE_GEMV_LC1)  // an experiment's override of the 1-token shape
__host__ __device__ constexpr int rows_one_token(int) { return QGATE_GEMV_R1; }
__host__ __device__ constexpr int chunks_one_token(int) { return QGATE_GEMV_LC1; }
#else
__host__ __device__ constexpr int rows_one_token(int type) { return type == kQ6_K ? 2 : 4; }
__host__ __device__ constexpr int chunks_one_token(int type) { return type == kQ4_K || type == kQ5_K ? 1 : 2; }
#endif
__host__ __device__ constexpr int rows_per_warp(int type, int nt) { return nt == 1 ? rows_one_token(type) : 4; }
__host__ __device__ constexpr int ksplit(int type, int nt) { return rows_per_warp(type, nt); }
__host__ __device__ constexpr int lane_chunks(int type, int nt) {
  return nt == 1 ? chunks_one_token(type) : nt >= 4 ? 1 : 2;
}
__host__ __device__ constexpr int stage_chunks(int type, int nt) { return 32 * lane_chunks(type, nt); }
// A row's bytes per stage (the K-quants' chunks come in super-blocks of 8).
__host__ __device__ constexpr int gemv_stage_bytes(int type, int nt) {
  return is_kquant(type) ? stage_chunks(type, nt) / 8 * block_bytes(type) : stage_chunks(type, nt) * block_bytes(type);
}
// Room for a stage, a start up to 15 bytes into its first 16-byte line, and the word lds_words
// reads past the stage's last byte.
__host__ __device__ constexpr int row_pitch(int type, int nt) {
  return (gemv_stage_bytes(type, nt) + 15 + 4 + 15) / 16 * 16;
}
__host__ __device__ constexpr int stage_window(int type, int nt) { return rows_per_warp(type, nt) * row_pitch(type, nt); }
__host__ __device__ constexpr int ring_stages(int type, int nt) {
  const int fit = kWarpRingBudget / stage_window(type, nt);
  return fit < 2 ? 2 : fit > 4 ? 4 : fit;
}
__host__ __device__ constexpr int gemv_smem_bytes(int type, int nt) {
  return kWarps * ring_stages(type, nt) * stage_window(type, nt) + 2 * kWarps * rows_per_warp(type, nt) * nt * 4;
}

struct GemvActs {
  const uint8_t* q;    // [nb][nt][32] quants, fragment order
  const uint16_t* d;   // [nb][nt] f16
  const int32_t* sum;  // [nb][nt]
};

// N consecutive 4-byte words from a 2-byte aligned shared-memory address: N + 1 aligned loads and
// N funnel shifts (the word past the last is read and, when the address is 4-byte aligned, unused;
// every window row has room after its stage).
template <int N>
__device__ __forceinline__ void lds_words(const uint8_t* p, uint32_t (&w)[N]) {
  // Stepping the pointer back (not masking its integer value) keeps it a shared-memory pointer, so
  // the loads stay LDS rather than generic loads.
  const uint32_t off = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p)) & 2u;
  const uint32_t* a = reinterpret_cast<const uint32_t*>(p - off);
  const uint32_t shift = off * 8u;
  uint32_t prev = a[0];
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const uint32_t next = a[i + 1];
    w[i] = __funnelshift_r(prev, next, shift);
    prev = next;
  }
}

// The quants' offset a legacy type's dot leaves to the activation sum: dot(q - m, a) = dot(q, a) -
// m * sum(a), exact in int32, so the GEMV reads q4_0's and q5_0's quants unsigned.
__host__ __device__ constexpr int quant_offset(int type) { return type == kQ4_0 ? 8 : type == kQ5_0 ? 16 : 0; }

// One 32-k chunk, whole, as the GEMV wants it (weight_fragments.cuh reads a quarter of one per
// lane): lo[t] = elements 4t..4t+3 and hi[t] = 16+4t.., four s8 each (q4_0 and q5_0 unsigned, see
// quant_offset), the scales ds (k 0..15) and ds1 (k 16..31; they differ only for q6_K) and the min
// term's dm. Same numbers as decode_frag. Legacy types read the chunk as aligned words; the
// K-quants, whose chunks are sub-blocks of a super-block (`c` = 8 * super-block + sub-block), take
// decode_frag's four quarters, or (q4_K and q5_K from 16-byte aligned weights, `aligned`) their
// runs of quants as 16-byte words.
struct ChunkWords {
  uint32_t lo[4], hi[4];
  float ds, ds1, dm;
};
template <int TYPE>
__device__ __forceinline__ ChunkWords chunk_words(const uint8_t* s, int c, bool aligned) {
  ChunkWords q;
  if constexpr (TYPE == kQ4_K || TYPE == kQ5_K) {
    if (aligned) {
      // A 16-byte aligned super-block: the chunk's quants (and q5_K's fifth bits) are 16-byte
      // aligned runs of 32 bytes, read as two 16-byte loads each instead of decode_frag's eight
      // 2-byte loads per run; the same words, so the same numbers.
      const uint8_t* sb = s + (c >> 3) * block_bytes(TYPE);
      const int sub = c & 7, shift = (sub & 1) * 4;
      const uint8_t* qs = sb + (TYPE == kQ4_K ? 16 : 48) + 32 * (sub >> 1);
      // Elements 0..15 (lo) from the first 16 bytes, 16..31 (hi) from the next; q5_K's fifth bits
      // (bit `sub` of qh[l] for element l) the same way from qh.
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const uint4 v = *reinterpret_cast<const uint4*>(qs + 16 * half);
        const uint32_t w[4] = {v.x, v.y, v.z, v.w};
        uint32_t* out = half == 0 ? q.lo : q.hi;
#pragma unroll
        for (int t = 0; t < 4; ++t) out[t] = (w[t] >> shift) & 0x0f0f0f0fu;
        if constexpr (TYPE == kQ5_K) {
          const uint4 hv = *reinterpret_cast<const uint4*>(sb + 16 + 16 * half);
          const uint32_t h[4] = {hv.x, hv.y, hv.z, hv.w};
#pragma unroll
          for (int t = 0; t < 4; ++t) out[t] |= ((h[t] >> sub) & 0x01010101u) << 4;
        }
      }
      kquant_chunk_scales<TYPE>(sb, sub, &q.ds, &q.dm);
      q.ds1 = q.ds;
      return q;
    }
  }
  if constexpr (is_kquant(TYPE)) {
    const uint8_t* sb = s + (c >> 3) * block_bytes(TYPE);
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const Frag f = decode_frag<TYPE>(sb, c & 7, t);
      q.lo[t] = static_cast<uint32_t>(f.lo);
      q.hi[t] = static_cast<uint32_t>(f.hi);
      q.ds = f.ds0;
      q.ds1 = f.ds1;
      q.dm = f.dm;
    }
    return q;
  }
  q.dm = 0.0f;
  const uint8_t* b = s + c * block_bytes(TYPE);
  q.ds = q.ds1 = f16_bits_to_f32(lds_u16(b));
  if constexpr (TYPE == kQ8_0) {  // {f16 d; i8 qs[32]}
    uint32_t w[8];
    lds_words<8>(b + 2, w);
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      q.lo[t] = w[t];
      q.hi[t] = w[4 + t];
    }
  } else {
    // q4_0 {d; qs[16]}, q4_1 {d, m; qs[16]}, q5_0 {d; qh[4]; qs[16]}, q5_1 {d, m; qh[4]; qs[16]}
    constexpr bool kHigh = TYPE == kQ5_0 || TYPE == kQ5_1;
    constexpr int kAt = (TYPE == kQ4_1 || TYPE == kQ5_1) ? 4 : 2;
    if constexpr (TYPE == kQ4_1 || TYPE == kQ5_1) q.dm = f16_bits_to_f32(lds_u16(b + 2));
    uint32_t w[kHigh ? 5 : 4];
    lds_words(b + kAt, w);
    const uint32_t qh = kHigh ? w[0] : 0u;
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const uint32_t qs = w[t + (kHigh ? 1 : 0)];
      q.lo[t] = qs & 0x0f0f0f0fu;
      q.hi[t] = (qs >> 4) & 0x0f0f0f0fu;
      if constexpr (kHigh) {
        q.lo[t] |= spread4_to_bit4(qh >> (4 * t));
        q.hi[t] |= spread4_to_bit4(qh >> (16 + 4 * t));
      }
    }
  }
  return q;
}

// The named barrier 1 + group (0 is __syncthreads') for the THREADS threads of a row group; the ids
// are immediates, so ptxas reserves only the barriers used.
template <int GROUPS, int THREADS>
__device__ __forceinline__ void group_barrier(int group) {
  static_assert(GROUPS >= 1 && GROUPS <= 4, "row groups of a CTA");
  if (group == 0) asm volatile("bar.sync 1, %0;\n" ::"n"(THREADS) : "memory");
  if constexpr (GROUPS > 1) if (group == 1) asm volatile("bar.sync 2, %0;\n" ::"n"(THREADS) : "memory");
  if constexpr (GROUPS > 2) if (group == 2) asm volatile("bar.sync 3, %0;\n" ::"n"(THREADS) : "memory");
  if constexpr (GROUPS > 3) if (group == 3) asm volatile("bar.sync 4, %0;\n" ::"n"(THREADS) : "memory");
}

// At 1 token, registers for 3 CTAs an SM (80), as the persistent grid wants. q5_K's kernel then spills
// 8 bytes; on the H200 that was within 3% of 96 registers at 2 CTAs an SM, and 4-9% faster than
// reading its aligned quants word by word to avoid the spill (bench/RESULTS.md, mmq-v11).
template <int TYPE, int NT>
__global__ void __launch_bounds__(kThreads, NT == 1 ? 3 : 1)
    mmq_gemv_kernel(const uint8_t* __restrict__ w, size_t row_bytes, GemvActs act, float* __restrict__ y, int nt,
                    int od, int nchunks, int row_blocks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kRpw = rows_per_warp(TYPE, NT);
  constexpr int kSplit = ksplit(TYPE, NT);
  constexpr int kLaneChunks = lane_chunks(TYPE, NT);
  constexpr int kStageChunksG = stage_chunks(TYPE, NT);
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
  uint8_t* ring = smem + warp * kStages * kWindow;
  // The k-split warps' partial sums, two row blocks' worth so that one barrier per row block suffices.
  float* part_sums = reinterpret_cast<float*>(smem + kWarps * kStages * kWindow);  // [2][warp][kRpw][NT]

  // This warp's chunks [c_begin, c_end), whose stage st = 0.. starts at chunk c_begin + st *
  // stage_chunks: a contiguous share of the row's ceil(nchunks / stage_chunks) stages, unless that
  // leaves a warp of the row group without one (k = 4096 at 2 chunks a lane: 2 stages for 4 warps);
  // then an even share in whole super-blocks (8 chunks), the last stage of each short. Measured on
  // the H200 at 1 token: the stage shares win at k = 14336 (q4_0 12.5 against 12.8 us), the even
  // shares where stages would be left idle (k = 4096: 8.0 against 8.7).
  const int nstages = (nchunks + kStageChunksG - 1) / kStageChunksG;
  const int per_stages = (nstages + kSplit - 1) / kSplit;
  const bool even = (kSplit - 1) * per_stages >= nstages;
  const int per = even ? (nchunks + 8 * kSplit - 1) / (8 * kSplit) * 8 : per_stages * kStageChunksG;
  const int c_begin = min(nchunks, part * per);
  const int c_end = min(nchunks, c_begin + per);
  const int st_end = (c_end - c_begin + kStageChunksG - 1) / kStageChunksG;
  const size_t base_bytes = static_cast<size_t>(is_kquant(TYPE) ? c_begin / 8 : c_begin) * block_bytes(TYPE);

  // The CTA's row blocks are blockIdx.x, + gridDim.x, ...; the warp's work is their stages in turn, one
  // ring across all of them, so the next row block's weights are in flight while this one finishes.
  const int my_blocks = blockIdx.x < row_blocks ? (row_blocks - 1 - blockIdx.x) / gridDim.x + 1 : 0;
  const int items = my_blocks * st_end;
  // Row r of row block rb: its first byte of this warp's share (rows past od read row od-1; they are
  // never stored).
  const auto row_start = [&](int rb, int r) -> const uint8_t* {
    return w + static_cast<size_t>(min(rb * kRowsCta + group * kRpw + r, od - 1)) * row_bytes + base_bytes;
  };
  const uint32_t ring_s = smem_addr(ring) + 16u * lane;  // this lane's first line in the ring
  // K-quant rows are whole 144- or 176-byte super-blocks, multiples of 16 bytes, and so is every
  // share's start: with 16-byte aligned weights, every super-block in the ring is 16-byte aligned.
  const bool aligned = (reinterpret_cast<uintptr_t>(w) & 15u) == 0;
  // Where a stage that starts at `p` begins inside its first 16-byte line.
  const auto lead_of = [](const uint8_t* p) -> int {
    return static_cast<int>(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(p)) & 15u);
  };
  // Each row's first byte of the next item to issue: a stage further per issue, and the next row
  // block's rows once a row block's stages are all issued (worked out once per row block, not per
  // stage: in SASS, the per-stage address arithmetic was about a sixth of a stage's instructions).
  const uint8_t* issue_row[kRpw];
  const auto point_rows = [&](int rb) {
#pragma unroll
    for (int r = 0; r < kRpw; ++r) issue_row[r] = row_start(rb, r);
  };
  // Stage st of the rows at issue_row into ring buffer buf: lane l copies the 16-byte lines l + 32 j
  // of each row's stage, counted from the 16-byte boundary at or below the stage's first byte.
  const auto issue = [&](int st, int buf) {
    // The last stage may be short (K-quant rows are whole super-blocks, 8 chunks each).
    const int chunks = min(kStageChunksG, c_end - c_begin - st * kStageChunksG);
    const int bytes = (is_kquant(TYPE) ? chunks / 8 : chunks) * block_bytes(TYPE);
#pragma unroll
    for (int r = 0; r < kRpw; ++r) {
      const uint8_t* first = issue_row[r];
      const int lead = lead_of(first);
      const uint8_t* src = first - lead + 16 * lane;
      const uint32_t dst = ring_s + static_cast<uint32_t>(buf * kWindow + r * kPitch);
      const int lines = (lead + bytes + 15) >> 4;
#pragma unroll
      for (int j = 0; j < kLaneLines; ++j)
        if (lane + 32 * j < lines) cp_async16(dst + 512u * j, src + 512 * j);
    }
    cp_async_commit();
  };
  // The next item to issue, as (row block, stage).
  int issue_rb = blockIdx.x, issue_st = 0, issued = 0;
  point_rows(issue_rb);
  const auto issue_next = [&](int buf) {
    if (issued < items) {
      issue(issue_st, buf);
#pragma unroll
      for (int r = 0; r < kRpw; ++r) issue_row[r] += kSB;
      if (++issue_st == st_end) {
        issue_st = 0;
        issue_rb += gridDim.x;
        point_rows(issue_rb);
      }
      ++issued;
    } else {
      cp_async_commit();  // empty group: the wait count below stays uniform
    }
  };
  // This lane's activations: chunk lane + 32 i of a stage, token n, at entry (chunk * nt + n) of the
  // decode layout's three regions, from this warp's first stage; a stage is stage_entries further.
  const size_t first = (static_cast<size_t>(c_begin) + lane) * nt;
  const size_t stage_entries = static_cast<size_t>(kStageChunksG) * nt;
  const uint32_t chunk_entries = 32u * static_cast<uint32_t>(nt);  // from chunk lane to lane + 32

  // Weights do not depend on the activation quantizer that runs just before this kernel.
#pragma unroll
  for (int p = 0; p < kStages - 1; ++p) issue_next(p);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  // The next call's quantizer may launch now: it waits for this grid to complete before it touches
  // anything, so its launch overlaps this kernel's work instead of following it.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
  int item = 0;  // items consumed, for the ring buffer index
  for (int j = 0; j < my_blocks; ++j) {
    const int rb = blockIdx.x + j * gridDim.x;
    // The low word of each row's first address: where a stage begins inside its 16-byte line.
    uint32_t row_lo[kRpw];
#pragma unroll
    for (int r = 0; r < kRpw; ++r) row_lo[r] = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(row_start(rb, r)));
    float acc[kRpw][NT];
#pragma unroll
    for (int r = 0; r < kRpw; ++r)
#pragma unroll
      for (int n = 0; n < NT; ++n) acc[r][n] = 0.0f;
    const uint4* lane_q = reinterpret_cast<const uint4*>(act.q) + 2 * first;  // 32 bytes an entry
    const uint16_t* lane_d = act.d + first;
    const int32_t* lane_sum = act.sum + first;
    for (int st = 0; st < st_end; ++st, ++item) {
      const int buf = item % kStages;
      // Every token's quants, scale and sum for this lane's chunks (L1/L2), requested before the
      // weights' wait and next copy, and kept raw: converting them here would wait for them.
      uint4 aq[kLaneChunks][NT][2];
      uint32_t dbits[kLaneChunks][NT];
      int isum[kLaneChunks][NT];
#pragma unroll
      for (int i = 0; i < kLaneChunks; ++i) {
        const bool chunk_live = c_begin + st * kStageChunksG + lane + 32 * i < c_end;
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          const bool live = chunk_live && n < nt;
          const uint32_t at = i * chunk_entries + n;
          aq[i][n][0] = live ? lane_q[2 * at] : make_uint4(0u, 0u, 0u, 0u);
          aq[i][n][1] = live ? lane_q[2 * at + 1] : make_uint4(0u, 0u, 0u, 0u);
          dbits[i][n] = live ? lane_d[at] : 0u;
          isum[i][n] = 0;
          if constexpr (has_min(TYPE) || quant_offset(TYPE) != 0) isum[i][n] = live ? lane_sum[at] : 0;
        }
      }
      lane_q += 2 * stage_entries;
      lane_d += stage_entries;
      lane_sum += stage_entries;
      issue_next((item + kStages - 1) % kStages);
      cp_async_wait<kStages - 1>();  // this item's group is complete
      __syncwarp();
      int lead[kRpw];
#pragma unroll
      for (int r = 0; r < kRpw; ++r) lead[r] = static_cast<int>((row_lo[r] + static_cast<uint32_t>(st) * kSB) & 15u);

#pragma unroll
      for (int i = 0; i < kLaneChunks; ++i) {
        const int c = lane + 32 * i;  // chunk of the stage
        if (c_begin + st * kStageChunksG + c >= c_end) continue;
#pragma unroll
        for (int r = 0; r < kRpw; ++r) {
          const uint8_t* s = ring + buf * kWindow + r * kPitch + lead[r];
          const ChunkWords q = chunk_words<TYPE>(s, c, aligned);
#pragma unroll
          for (int n = 0; n < NT; ++n) {
            const uint4& a0 = aq[i][n][0];
            const uint4& a1 = aq[i][n][1];
            // Fragment order: the words of quarter t are lo = a[2t], hi = a[2t + 1]. The k 0..15 and
            // k 16..31 dots are two independent chains (q6_K scales them apart).
            int lo = __dp4a(static_cast<int>(q.lo[0]), static_cast<int>(a0.x), 0);
            int hi = __dp4a(static_cast<int>(q.hi[0]), static_cast<int>(a0.y), 0);
            lo = __dp4a(static_cast<int>(q.lo[1]), static_cast<int>(a0.z), lo);
            hi = __dp4a(static_cast<int>(q.hi[1]), static_cast<int>(a0.w), hi);
            lo = __dp4a(static_cast<int>(q.lo[2]), static_cast<int>(a1.x), lo);
            hi = __dp4a(static_cast<int>(q.hi[2]), static_cast<int>(a1.y), hi);
            lo = __dp4a(static_cast<int>(q.lo[3]), static_cast<int>(a1.z), lo);
            hi = __dp4a(static_cast<int>(q.hi[3]), static_cast<int>(a1.w), hi);
            float v;
            if constexpr (TYPE == kQ6_K) {
              v = q.ds * static_cast<float>(lo);  // k 0..15: scales[2s]
              v = fmaf(q.ds1, static_cast<float>(hi), v);
            } else {
              int dot = lo + hi;
              if constexpr (quant_offset(TYPE) != 0) dot -= quant_offset(TYPE) * isum[i][n];
              v = q.ds * static_cast<float>(dot);
            }
            if constexpr (has_min(TYPE)) v = fmaf(q.dm, static_cast<float>(isum[i][n]), v);
            acc[r][n] = fmaf(f16_bits_to_f32(dbits[i][n]), v, acc[r][n]);
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

    // Then the row group's k-split warps, in order, through shared memory. The group's warps meet at
    // a named barrier (1 + group; 0 is __syncthreads'); the sums of row block j go to half j & 1, which
    // no warp writes again before passing the next row block's barrier, after part 0 has read them.
    float* sums = part_sums + (j & 1) * (kWarps * kRpw * NT);
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < kRpw; ++r)
#pragma unroll
        for (int n = 0; n < NT; ++n) sums[(warp * kRpw + r) * NT + n] = acc[r][n];
    }
    group_barrier<kRowsCta / kRpw, 32 * kSplit>(group);
    if (part == 0 && lane < kRpw * NT) {
      const int r = lane / NT, n = lane - r * NT;
      const int row = rb * kRowsCta + group * kRpw + r;
      float sum = sums[(warp * kRpw + r) * NT + n];
#pragma unroll
      for (int p = 1; p < kSplit; ++p) sum += sums[((warp + p) * kRpw + r) * NT + n];
      if (row < od && n < nt) y[static_cast<size_t>(n) * od + row] = sum;
    }
  }
  cp_async_wait<0>();
#endif
}

template <int TYPE, int NT>
int launch_typed(const void* weights, int64_t od, int64_t k, const void* q8, int64_t nt, float* y,
                 cudaStream_t stream) {
  constexpr int kSmem = gemv_smem_bytes(TYPE, NT);
  bool pdl = false;
  if (const cudaError_t e = launch::prepare<mmq_gemv_kernel<TYPE, NT>>(kSmem, &pdl); e != cudaSuccess)
    return static_cast<int>(e);
  int resident = 0;
  if (const cudaError_t e = launch::resident_ctas<mmq_gemv_kernel<TYPE, NT>>(kThreads, kSmem, &resident);
      e != cudaSuccess)
    return static_cast<int>(e);
  const int64_t row_blocks = (od + kRowsCta - 1) / kRowsCta;
  // Measured on the H200 (bench/RESULTS.md, mmq-v8): a grid of the resident CTAs, row blocks dealt out
  // in turn, beats a CTA per row block and beats grids that even out the row blocks per CTA.
  const int64_t grid = row_blocks < resident ? row_blocks : resident;
  const uint8_t* base = static_cast<const uint8_t*>(q8);
  GemvActs act;
  act.q = base;
  act.d = reinterpret_cast<const uint16_t*>(base + q8_decode_scales_offset(nt, k));
  act.sum = reinterpret_cast<const int32_t*>(base + q8_decode_sums_offset(nt, k));
  const size_t row_bytes = static_cast<size_t>(k / (is_kquant(TYPE) ? 256 : 32)) * block_bytes(TYPE);
  return launch::dependent(mmq_gemv_kernel<TYPE, NT>, dim3(static_cast<unsigned>(grid)), dim3(kThreads), kSmem, stream,
                           pdl, static_cast<const uint8_t*>(weights), row_bytes, act, y, static_cast<int>(nt),
                           static_cast<int>(od), static_cast<int>(k / 32), static_cast<int>(row_blocks));
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
  return launch::with_weight_type(type, [&](auto t) {
    return launch_for_tokens<decltype(t)::value>(weights, od, k, q8, nt, y, s);
  });
}

}  // namespace qgate::cuda
