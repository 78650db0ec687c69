// The MMQ GEMM on Hopper's warpgroup mma (wgmma, sm_90a), for more than 8 tokens: the same math as
// the tile kernel (mmq_gemm.cu) and the same f32 operations in the same order, so its results are
// bit-identical to that kernel's; only the integer dots move to the wgmma tensor-core path.
//   A (m64 x k32, s8) = 64 WEIGHT rows per warpgroup, decoded from raw ggml blocks straight into the
//                       registers of the wgmma's A fragment (weight_fragments.cuh), never back to
//                       shared memory;
//   B (k32 x n128, s8) = 128 tokens' q8 quants, K-major in shared memory, read by the tensor cores
//                       through a matrix descriptor (no swizzle: 8-token x 16-byte core matrices,
//                       128 bytes apart along the tokens, the two 16-k halves 2048 bytes apart);
//   D (m64 x n128, s32) = one 32-k block's integer dots, folded into the f32 accumulators per block
//                       as out += da * (ds * dot + dm * sum(q_a)) (q6_K: two k16 halves, two dots).
// A CTA is 3 warpgroups: two consumers of 64 weight rows x 128 tokens each, and a producer whose
// first thread issues the copies. The producer fills a 3-deep ring of 256-k stages with tensor copies
// (TMA, completing on the stage's "full" mbarrier), one per region and stage: the 128 weight rows'
// raw bytes as a [128][window] box of the weights viewed as [od][row_bytes] (rows and windows as in
// weight_fragments.cuh), the tokens' quants as a [16][128][16] box of the k-major layout of
// launchers.h, their scales (and sums) as [8][128] boxes. When the rows are not 16-byte aligned (a
// tensor map needs 16-byte row strides: q6_K's 210-byte blocks at k = 11008, say) the producer's 128
// threads copy a row each with cp.async, 16-byte lines from the row's 16-byte boundary, and arrive
// on "full" when their copies land (per-row bulk copies were tried there: the copy engine spends
// about as long on a 210-byte copy as on a large one; q6_K 4096 x 11008 took 415 us that way, 300
// this way). The consumers never copy or meet at a CTA barrier: they wait on "full", and each warp
// frees a stage on its "empty" mbarrier once its last wgmma on it has completed. Within a stage
// their chunk loop keeps one wgmma in flight while the previous dots are promoted; a stage ends
// with none in flight (see consume). setmaxnreg moves the producer's
// registers to the consumers. On sm_90 the kernel is a programmatic dependent of the activation
// quantizer: the producer requests the first weight stages before it waits for the quantizer.
// Edges: rows past od and tokens past nt are zeros from the tensor copies (the cp.async path stages
// row od-1 instead); neither is ever stored.
#include <cuda.h>  // CUtensorMap; the encoder comes through the runtime's driver entry point
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <mutex>

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

constexpr int kRowsCta = 128;    // weight rows per CTA: 2 consumer warpgroups x m64
constexpr int kTokCta = 128;     // tokens per CTA: the wgmma's n
constexpr int kConsumers = 256;  // threads of the two consumer warpgroups (warps 0..7)
constexpr int kConsumerWarps = kConsumers / 32;
constexpr int kThreads = kConsumers + 128;              // and the producer warpgroup (warps 8..11)
constexpr int kProducerRegs = 40, kConsumerRegs = 232;  // setmaxnreg: 128 x 40 + 256 x 232 <= 64K
constexpr int kStages = 3;
constexpr int kQuantBytes = kStageChunks * 2 * kTokCta * 16;  // a stage's B: [chunk][half][token][16]
constexpr int kScaleBytes = kStageChunks * kTokCta * 4;       // [chunk][token] f32
constexpr int kHalfStride = kTokCta * 16;                     // between a chunk's two 16-k halves
constexpr int kProducers = kThreads - kConsumers;             // the producer warpgroup's threads
static_assert(kProducers == kRowsCta, "on the cp.async path each producer thread copies one weight row");

__host__ __device__ constexpr int window_row_bytes(int type) { return window_pitch(type) * 16; }
__host__ __device__ constexpr int windows_at(int type) { return kQuantBytes + kScaleBytes * (has_min(type) ? 2 : 1); }
__host__ __device__ constexpr int stage_smem(int type) { return windows_at(type) + kRowsCta * window_row_bytes(type); }
__host__ __device__ constexpr int barriers_at(int type) { return kStages * stage_smem(type); }
__host__ __device__ constexpr int smem_bytes(int type) { return barriers_at(type) + 2 * kStages * 8; }

#if defined(__CUDA_ARCH__)  // the device pass only: the host pass never sees the kernel body
// Matrix descriptor of one chunk's B (PTX ISA, wgmma shared memory descriptor): start address,
// leading byte offset = between the core matrices along k, stride byte offset = between the
// 8-token groups, all in 16-byte units; layout type 0 (no swizzle). The start address is the low
// 14 bits, so a later chunk's descriptor is this one plus its offset / 16 (shared memory < 256 KB).
__device__ __forceinline__ uint64_t kmajor_desc(uint32_t smem_byte_addr) {
  return static_cast<uint64_t>((smem_byte_addr & 0x3ffffu) >> 4) | (static_cast<uint64_t>(kHalfStride >> 4) << 16) |
         (static_cast<uint64_t>(128 >> 4) << 32);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
/// Waits until at most N of this warpgroup's wgmma groups are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/// Orders every later use of d after the wgmma.wait_group before it (the registers are written
/// asynchronously; without this the compiler may read them early).
__device__ __forceinline__ void fence_operands(int (&d)[32]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

// mbarriers (PTX ISA, mbarrier): a stage's "full" barrier counts the producer's arrival with the
// bytes its tensor copies will bring, and on the cp.async path one arrival per producer thread when
// its copies have landed; its "empty" barrier one arrival per consumer warp.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/// Waits until the barrier's phase with this parity has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (done == 0);
}
/// An arrival on `bar` once this thread's earlier cp.async copies have landed; it is one of the
/// arrivals the barrier was initialised to expect (.noinc).
__device__ __forceinline__ void cp_async_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
/// Tensor copies of one box at element coordinates {x, y(, z)} of `map` into this CTA's shared memory.
__device__ __forceinline__ void tensor_copy_2d(uint32_t dst, const CUtensorMap& map, int x, int y, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], "
      "[%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
}
__device__ __forceinline__ void tensor_copy_3d(uint32_t dst, const CUtensorMap& map, int x, int y, int z,
                                               uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(x), "r"(y), "r"(z), "r"(bar)
      : "memory");
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

/// D (64 rows x 64 tokens, s32) = A (64 x 32 s8) * B (32 x 64 s8): this warp's 16 rows of A in
/// registers (the m16n8k32 A fragment a0..a3), B K-major in shared memory, described by `desc`. D is
/// written only (scale-d = 0, an immediate): inputs to d, or a register for scale-d, would be values
/// the compiler moves into the accumulators, and ptxas serializes every wgmma when a non-wgmma
/// instruction touches the accumulators of one in flight. Register 4i + j of d holds row g + 8(j >> 1) of the
/// warp's 16, token 8i + 2t + (j & 1).
__device__ __forceinline__ void wgmma_m64n64k32(int (&d)[32], int a0, int a1, int a2, int a3, uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
      "}, {%32,%33,%34,%35}, %36, p;\n}\n"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]), "=r"(d[4]), "=r"(d[5]), "=r"(d[6]), "=r"(d[7]), "=r"(d[8]),
        "=r"(d[9]), "=r"(d[10]), "=r"(d[11]), "=r"(d[12]), "=r"(d[13]), "=r"(d[14]), "=r"(d[15]), "=r"(d[16]),
        "=r"(d[17]), "=r"(d[18]), "=r"(d[19]), "=r"(d[20]), "=r"(d[21]), "=r"(d[22]), "=r"(d[23]), "=r"(d[24]),
        "=r"(d[25]), "=r"(d[26]), "=r"(d[27]), "=r"(d[28]), "=r"(d[29]), "=r"(d[30]), "=r"(d[31])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "n"(0));
}
#endif

// The tensor maps of one launch (launch_typed encodes them); the activations reach the kernel
// through them alone.
struct TensorMaps {
  CUtensorMap w;    // weights as uint16 [od][row_bytes / 2], box [128][window / 2]; valid when tiled_weights
  CUtensorMap q;    // quants as uint8 [k/32 * 2][nt][16] (launchers.h's k-major layout), box [16][128][16]
  CUtensorMap d;    // scales as f32 [k/32][ntp], box [8][128]
  CUtensorMap sum;  // sums, the same
};

// What both roles know of one CTA's problem.
struct CtaProblem {
  const uint8_t* w;
  size_t row_bytes;
  int nt, od, row0, tok0, nst;
  bool tiled_weights;  // the weights come as one tensor copy per stage, from a 16-byte line of each row
  const TensorMaps* maps;
  uint8_t* smem;
};

#if defined(__CUDA_ARCH__)
/// The first byte of CTA row r's stage st in global memory (rows past od read row od-1).
__device__ __forceinline__ uintptr_t stage_start(const CtaProblem& p, int r, int st, int stage_bytes) {
  const uint8_t* row = p.w + static_cast<size_t>(min(p.row0 + r, p.od - 1)) * p.row_bytes;
  return reinterpret_cast<uintptr_t>(row) + static_cast<size_t>(st) * stage_bytes;
}
__device__ __forceinline__ uint32_t full_bar(const CtaProblem& p, int type_barriers_at, int buf) {
  return smem_addr(p.smem + type_barriers_at) + 8 * buf;
}
__device__ __forceinline__ uint32_t empty_bar(const CtaProblem& p, int type_barriers_at, int buf) {
  return smem_addr(p.smem + type_barriers_at) + 8 * (kStages + buf);
}

// The producer warpgroup (threads 256..383). Its first thread registers each stage's tensor-copy
// bytes on the stage's "full" barrier and issues the tensor copies; on the cp.async path thread
// 256 + r also copies weight row r and arrives when its copies land.
template <int TYPE>
__device__ void produce(const CtaProblem& p) {
  constexpr int kStage = stage_smem(TYPE);
  constexpr int kSB = stage_bytes(TYPE);
  constexpr int kPitch = window_row_bytes(TYPE);
  constexpr int kBars = barriers_at(TYPE);
  constexpr uint32_t kActBytes = kQuantBytes + kScaleBytes * (has_min(TYPE) ? 2 : 1);
  const int me = static_cast<int>(threadIdx.x) - kConsumers;  // 0..127
  const bool leader = me == 0;

  const auto issue_weights = [&](int st, int buf) {
    uint8_t* win = p.smem + buf * kStage + windows_at(TYPE);
    const uint32_t bar = full_bar(p, kBars, buf);
    if (p.tiled_weights) {
      // From the 16-byte line that holds the stage's first byte (a box starts at a 16-byte
      // boundary; q6_K's 210-byte stages do not), the same line in every row.
      if (leader) tensor_copy_2d(smem_addr(win), p.maps->w, ((st * kSB) & ~15) / 2, p.row0, bar);
      return;
    }
    // This thread's row: the 16-byte lines that hold its stage, [first, end).
    const uintptr_t start = stage_start(p, me, st, kSB);
    const uintptr_t first = start & ~uintptr_t{15}, end = (start + kSB + 15) & ~uintptr_t{15};
    const uint32_t dst = smem_addr(win + me * kPitch);
#pragma unroll
    for (int v = 0; v < kPitch / 16; ++v)
      if (first + 16u * v < end) cp_async16(dst + 16 * v, reinterpret_cast<const void*>(first + 16u * v));
    cp_async_arrive(bar);
  };
  const auto expect = [&](int buf) {
    if (leader)
      mbar_arrive_expect_tx(full_bar(p, kBars, buf), kActBytes + (p.tiled_weights ? kRowsCta * kPitch : 0));
  };
  const auto issue_acts = [&](int st, int buf) {
    if (!leader) return;
    uint8_t* base = p.smem + buf * kStage;
    const uint32_t bar = full_bar(p, kBars, buf);
    tensor_copy_3d(smem_addr(base), p.maps->q, 0, p.tok0, st * kStageChunks * 2, bar);
    tensor_copy_2d(smem_addr(base + kQuantBytes), p.maps->d, p.tok0, st * kStageChunks, bar);
    if constexpr (has_min(TYPE))
      tensor_copy_2d(smem_addr(base + kQuantBytes + kScaleBytes), p.maps->sum, p.tok0, st * kStageChunks, bar);
  };

  const int pre = min(kStages, p.nst);
  for (int st = 0; st < pre; ++st) {  // weights do not depend on the activation quantizer
    expect(st);
    issue_weights(st, st);
  }
  if (leader) {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
    for (int st = 0; st < pre; ++st) issue_acts(st, st);
  }
  for (int st = kStages; st < p.nst; ++st) {
    const int buf = st % kStages;
    mbar_wait(empty_bar(p, kBars, buf), ((st / kStages) - 1) & 1);
    expect(buf);
    issue_weights(st, buf);
    issue_acts(st, buf);
  }
}

// Where one stage lives for this consumer thread: its two fragment rows' first bytes in their
// windows, the stage's scales (and sums), and chunk 0's B descriptor.
struct StageView {
  const uint8_t* s0;
  const uint8_t* s1;
  const float* scales;
  const float* sums;
  uint64_t desc;
  int buf;
};

template <int TYPE>
__device__ __forceinline__ StageView stage_view(const CtaProblem& p, int st, int r_lo) {
  constexpr int kStage = stage_smem(TYPE);
  constexpr int kPitch = window_row_bytes(TYPE);
  constexpr int kSB = stage_bytes(TYPE);
  StageView v;
  v.buf = st % kStages;
  const uint8_t* base = p.smem + v.buf * kStage;
  const uint8_t* win = base + windows_at(TYPE);
  int lead0 = 0, lead1 = 0;  // where the stage begins inside each window row
  if (p.tiled_weights) {
    lead0 = lead1 = (st * kSB) & 15;
  } else {
    lead0 = static_cast<int>(stage_start(p, r_lo, st, kSB) & 15u);
    lead1 = static_cast<int>(stage_start(p, r_lo + 8, st, kSB) & 15u);
  }
  v.s0 = win + r_lo * kPitch + lead0;
  v.s1 = win + (r_lo + 8) * kPitch + lead1;
  v.scales = reinterpret_cast<const float*>(base + kQuantBytes);
  v.sums = reinterpret_cast<const float*>(base + kQuantBytes + kScaleBytes);
  v.desc = kmajor_desc(smem_addr(base));
  return v;
}

template <int TYPE>
__device__ void consume(const CtaProblem& p, float* __restrict__ y) {
  constexpr int kBars = barriers_at(TYPE);
  constexpr bool kMin = has_min(TYPE);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  // This thread's fragment rows (CTA-relative): r_lo and r_lo + 8 of its warp's 16.
  const int r_lo = (warp >> 2) * 64 + (warp & 3) * 16 + g;

  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  // Integer dots of the two 64-token halves (A: tokens 0..63, B: 64..127), used in turn so that one
  // half's wgmma runs on the tensor cores while the other half is promoted; q6_K has a second pair
  // for its k16..31 halves.
  constexpr int kHiDots = TYPE == kQ6_K ? 32 : 1;
  int dot_a[32], dot_b[32], hi_a[kHiDots], hi_b[kHiDots];  // written by the wgmmas only

  // Chunk c's wgmma(s) of stage view v for one 64-token half, as one commit group.
  const auto mma_issue = [&](const StageView& v, int c, int half, int(&d)[32], int(&d_hi)[kHiDots], const Frag& f0,
                             const Frag& f1) {
    const uint64_t desc = v.desc + static_cast<uint64_t>((c * 2 * kHalfStride + half * 64 * 16) >> 4);
    wgmma_fence();
    if constexpr (TYPE == kQ6_K) {
      wgmma_m64n64k32(d, f0.lo, f1.lo, 0, 0, desc);     // k 0..15: scales[2s]
      wgmma_m64n64k32(d_hi, 0, 0, f0.hi, f1.hi, desc);  // k 16..31: scales[2s+1]
    } else {
      wgmma_m64n64k32(d, f0.lo, f1.lo, f0.hi, f1.hi, desc);
    }
    wgmma_commit();
  };
  // Chunk c's dots of one half folded into the accumulators, once its group has completed.
  const auto promote = [&](const StageView& v, int c, int half, int(&d)[32], int(&d_hi)[kHiDots], const Frag& f0,
                           const Frag& f1) {
    fence_operands(d);
    if constexpr (TYPE == kQ6_K) fence_operands(d_hi);
    // Tokens 8i + 2t and 8i + 2t + 1 of the half for i = 2m, 2m + 1: one 16-byte load at slot
    // 16m + 4t (q8_kmajor_token_slot), for the scales and for the sums.
    const float* sc = v.scales + c * kTokCta + half * 64 + 4 * t;
    const float* sm = v.sums + c * kTokCta + half * 64 + 4 * t;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const float4 d4 = *reinterpret_cast<const float4*>(sc + 16 * (i >> 1));
      const float2 da = (i & 1) != 0 ? make_float2(d4.z, d4.w) : make_float2(d4.x, d4.y);
      float2 sa = make_float2(0.0f, 0.0f);
      if constexpr (kMin) {
        const float4 s4 = *reinterpret_cast<const float4*>(sm + 16 * (i >> 1));
        sa = (i & 1) != 0 ? make_float2(s4.z, s4.w) : make_float2(s4.x, s4.y);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const Frag& f = j < 2 ? f0 : f1;
        const bool odd = (j & 1) != 0;
        float v2 = f.ds0 * static_cast<float>(d[4 * i + j]);
        if constexpr (TYPE == kQ6_K) v2 = fmaf(f.ds1, static_cast<float>(d_hi[4 * i + j]), v2);
        if constexpr (kMin) v2 = fmaf(f.dm, odd ? sa.y : sa.x, v2);
        float& a = acc[half * 32 + 4 * i + j];
        a = fmaf(odd ? da.y : da.x, v2, a);
      }
    }
  };
  // The wgmma instructions are .aligned: a warp reaches them converged, so each of these ends with
  // __syncwarp (the lanes can leave the wait loop in different rounds).
  const auto release = [&](int buf) {
    __syncwarp();
    if (lane == 0) mbar_arrive(empty_bar(p, kBars, buf));
    __syncwarp();
  };
  const auto await = [&](int st, int buf) {
    mbar_wait(full_bar(p, kBars, buf), (st / kStages) & 1);
    __syncwarp();
  };

  if constexpr (TYPE == kQ6_K) {
    // Four dot sets per chunk already (two halves x two k16 halves): chunk by chunk, the second
    // half's wgmmas running while the first half is promoted.
    for (int st = 0; st < p.nst; ++st) {
      const StageView v = stage_view<TYPE>(p, st, r_lo);
      await(st, v.buf);
#pragma unroll 1
      for (int c = 0; c < kStageChunks; ++c) {
        const Frag f0 = decode_frag<TYPE>(v.s0, c, t), f1 = decode_frag<TYPE>(v.s1, c, t);
        mma_issue(v, c, 0, dot_a, hi_a, f0, f1);
        mma_issue(v, c, 1, dot_b, hi_b, f0, f1);
        wgmma_wait<1>();
        promote(v, c, 0, dot_a, hi_a, f0, f1);
        wgmma_wait<0>();
        promote(v, c, 1, dot_b, hi_b, f0, f1);
      }
      release(v.buf);
    }
  } else {
    // A stage's 8 chunks in pairs, fragments of even chunks in x, odd in y: a register holding a
    // wgmma's A input is never written while that wgmma may still read it. The chunks are unrolled
    // and the stage ends with no wgmma in flight: ptxas serializes every wgmma of a loop whose
    // back-edge carries accumulators still being written (C7514).
    static_assert(kStageChunks % 2 == 0, "chunks go in pairs inside a stage");
#pragma unroll 1
    for (int st = 0; st < p.nst; ++st) {
      const StageView v = stage_view<TYPE>(p, st, r_lo);
      await(st, v.buf);
      Frag x0 = decode_frag<TYPE>(v.s0, 0, t), x1 = decode_frag<TYPE>(v.s1, 0, t);
      mma_issue(v, 0, 0, dot_a, hi_a, x0, x1);
      mma_issue(v, 0, 1, dot_b, hi_b, x0, x1);
#pragma unroll
      for (int c = 0; c < kStageChunks; c += 2) {
        wgmma_wait<1>();  // (c, half 0) is done; (c, half 1) may still run
        promote(v, c, 0, dot_a, hi_a, x0, x1);
        const Frag y0 = decode_frag<TYPE>(v.s0, c + 1, t), y1 = decode_frag<TYPE>(v.s1, c + 1, t);
        mma_issue(v, c + 1, 0, dot_a, hi_a, y0, y1);
        wgmma_wait<1>();  // (c, half 1) is done
        promote(v, c, 1, dot_b, hi_b, x0, x1);
        mma_issue(v, c + 1, 1, dot_b, hi_b, y0, y1);
        wgmma_wait<1>();  // (c + 1, half 0) is done
        promote(v, c + 1, 0, dot_a, hi_a, y0, y1);
        if (c + 2 < kStageChunks) {
          x0 = decode_frag<TYPE>(v.s0, c + 2, t);
          x1 = decode_frag<TYPE>(v.s1, c + 2, t);
          mma_issue(v, c + 2, 0, dot_a, hi_a, x0, x1);
          wgmma_wait<1>();  // (c + 1, half 1) is done
        } else {
          wgmma_wait<0>();
        }
        promote(v, c + 1, 1, dot_b, hi_b, y0, y1);
        if (c + 2 < kStageChunks) mma_issue(v, c + 2, 1, dot_b, hi_b, x0, x1);
      }
      release(v.buf);  // every wgmma and load of this warp on the stage is done
    }
  }

  // Accumulator 4i + j (i = 0..15; 8..15 are the second half's): row r_lo + 8(j >> 1), token 8i + 2t + (j & 1).
#pragma unroll
  for (int i = 0; i < 16; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int tok = p.tok0 + 8 * i + 2 * t + (j & 1);
      const int row = p.row0 + r_lo + 8 * (j >> 1);
      if (tok < p.nt && row < p.od) y[static_cast<size_t>(tok) * p.od + row] = acc[4 * i + j];
    }
}
#endif

template <int TYPE>
__global__ void __launch_bounds__(kThreads, 1)
    mmq_wgmma_kernel(const __grid_constant__ TensorMaps maps, bool tiled_weights, const uint8_t* __restrict__ w,
                     size_t row_bytes, float* __restrict__ y, int nt, int od, int nchunks) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(128) uint8_t smem[];
  CtaProblem p;
  p.w = w;
  p.row_bytes = row_bytes;
  p.nt = nt;
  p.od = od;
  p.row0 = blockIdx.x * kRowsCta;
  p.tok0 = blockIdx.y * kTokCta;
  p.nst = nchunks / kStageChunks;  // k % 256 == 0 (launch_mmq_wgmma)
  p.tiled_weights = tiled_weights;
  p.maps = &maps;
  p.smem = smem;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full_bar(p, barriers_at(TYPE), s), tiled_weights ? 1 : 1 + kProducers);
      mbar_init(empty_bar(p, barriers_at(TYPE), s), kConsumerWarps);
    }
    mbar_init_fence();
  }
  __syncthreads();
  if (threadIdx.x >= kConsumers) {
    setmaxnreg_dec<kProducerRegs>();
    produce<TYPE>(p);
  } else {
    setmaxnreg_inc<kConsumerRegs>();
    consume<TYPE>(p, y);
  }
#endif
}

// cuTensorMapEncodeTiled, found once through the runtime (no link to the driver library).
using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
EncodeTiledFn tiled_encoder() {
  static const EncodeTiledFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return static_cast<EncodeTiledFn>(nullptr);
    }
    return reinterpret_cast<EncodeTiledFn>(p);
  }();
  return fn;
}

// A tiled, unswizzled tensor map of `rank` dimensions (innermost first): dims, the byte strides of
// dimensions 1.., and the box. Out-of-bounds elements of a box read as zeros. 0, or a cudaError_t.
template <size_t kRank>
int encode_tiled(CUtensorMap* map, CUtensorMapDataType type, const void* base, const uint64_t (&dims)[kRank],
                 const uint64_t (&strides)[kRank - 1], const uint32_t (&box)[kRank]) {
  const EncodeTiledFn encode = tiled_encoder();
  if (encode == nullptr) return static_cast<int>(cudaErrorNotSupported);
  cuuint64_t d[kRank], st[kRank];
  cuuint32_t b[kRank], one[kRank];
  for (size_t i = 0; i < kRank; ++i) {
    d[i] = dims[i];
    b[i] = box[i];
    one[i] = 1;
    if (i + 1 < kRank) st[i] = strides[i];
  }
  const CUresult r = encode(map, type, static_cast<cuuint32_t>(kRank), const_cast<void*>(base), d, st, b, one,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? 0 : static_cast<int>(cudaErrorInvalidValue);
}

template <int TYPE>
int launch_typed(const void* weights, int64_t od, int64_t k, const void* q8, int64_t nt, float* y,
                 cudaStream_t stream) {
  constexpr int kSmem = smem_bytes(TYPE);
  static_assert(kSmem <= 227 * 1024, "sm_90's shared memory per CTA");
  bool pdl = false;  // always, on the compute capability 9.0 devices this kernel runs on
  if (const cudaError_t e = launch::prepare<mmq_wgmma_kernel<TYPE>>(kSmem, &pdl); e != cudaSuccess)
    return static_cast<int>(e);
  // The k-major layout's three regions (launchers.h).
  const uint8_t* quants = static_cast<const uint8_t*>(q8);
  const uint8_t* scales = quants + q8_kmajor_scales_offset(nt, k);
  const uint8_t* sums = quants + q8_kmajor_sums_offset(nt, k);
  const size_t row_bytes = static_cast<size_t>(k / (is_kquant(TYPE) ? 256 : 32)) * block_bytes(TYPE);
  const uint64_t nb = static_cast<uint64_t>(k / 32), ntp = static_cast<uint64_t>(q8_kmajor_padded_tokens(nt));
  TensorMaps maps{};
  // The weights as 2-byte elements: a box is 128 rows of one window (a stage and the start of the
  // next, or the misaligned head of a q6_K stage), read past a row's end as zeros.
  const bool tiled_weights =
      (reinterpret_cast<uintptr_t>(weights) & 15u) == 0 && row_bytes % 16 == 0 &&
      encode_tiled(&maps.w, CU_TENSOR_MAP_DATA_TYPE_UINT16, weights, {row_bytes / 2, static_cast<uint64_t>(od)},
                   {row_bytes}, {static_cast<uint32_t>(window_row_bytes(TYPE) / 2), kRowsCta}) == 0;
  if (int rc = encode_tiled(&maps.q, CU_TENSOR_MAP_DATA_TYPE_UINT8, quants, {16, static_cast<uint64_t>(nt), nb * 2},
                            {16, static_cast<uint64_t>(nt) * 16}, {16, kTokCta, 2 * kStageChunks}))
    return rc;
  if (int rc =
          encode_tiled(&maps.d, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, scales, {ntp, nb}, {ntp * 4}, {kTokCta, kStageChunks}))
    return rc;
  if (int rc = encode_tiled(&maps.sum, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, sums, {ntp, nb}, {ntp * 4},
                            {kTokCta, kStageChunks}))
    return rc;
  const dim3 grid(static_cast<unsigned>((od + kRowsCta - 1) / kRowsCta), static_cast<unsigned>((nt + kTokCta - 1) / kTokCta));
  return launch::dependent(mmq_wgmma_kernel<TYPE>, grid, dim3(kThreads), kSmem, stream, pdl, maps, tiled_weights,
                           static_cast<const uint8_t*>(weights), row_bytes, y, static_cast<int>(nt),
                           static_cast<int>(od), static_cast<int>(k / 32));
}

// Whether device `dev` runs the sm_90a image: compute capability 9.0 and a kernel that loads.
bool device_runs_sm90a(int dev) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (major != 9 || minor != 0) return false;
  cudaFuncAttributes attributes{};
  const bool loads = cudaFuncGetAttributes(&attributes, mmq_wgmma_kernel<kQ4_0>) == cudaSuccess;
  (void)cudaGetLastError();
  return loads;
}

}  // namespace

bool mmq_wgmma_usable(int64_t nt, int64_t k) {
  if (nt <= kDecodeMaxTokens || k <= 0 || k % 256 != 0) return false;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    (void)cudaGetLastError();
    return false;
  }
  static std::mutex mu;
  static uint64_t known = 0, usable = 0;
  std::lock_guard<std::mutex> lock(mu);
  const uint64_t bit = uint64_t{1} << dev;
  if ((known & bit) == 0) {
    if (device_runs_sm90a(dev)) usable |= bit;
    known |= bit;
  }
  return (usable & bit) != 0;
}

int launch_mmq_wgmma(int32_t type, const void* weights, int64_t od, int64_t k, const void* q8, int64_t nt, float* y,
                     void* stream) {
  const int bb = block_bytes(type);
  if (bb == 0 || weights == nullptr || q8 == nullptr || y == nullptr || nt <= 0 || od <= 0 || k <= 0 || k % 256 != 0)
    return static_cast<int>(cudaErrorInvalidValue);
  if (nt > INT_MAX || od > INT_MAX || (nt + kTokCta - 1) / kTokCta > 65535 || k / 32 > INT_MAX)
    return static_cast<int>(cudaErrorInvalidValue);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  return launch::with_weight_type(
      type, [&](auto t) { return launch_typed<decltype(t)::value>(weights, od, k, q8, nt, y, s); });
}

}  // namespace qgate::cuda
