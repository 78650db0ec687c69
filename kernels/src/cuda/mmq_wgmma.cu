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
// A CTA is 2 warpgroups = 128 weight rows x 128 tokens. All 256 threads stage 256 k per stage into a
// 3-deep cp.async ring: the tokens' quants as 16 runs of 2 KB in the k-major layout of launchers.h
// (so the copy is a straight line), their scales (and sums), and each weight row's raw bytes in a
// window that starts at its 16-byte boundary (weight_fragments.cuh). On sm_90 the kernel is a
// programmatic dependent of the activation quantizer: the first weight stages are requested before
// it waits for the quantizer's results.
// Edges: rows past od stage row od-1 and tokens past nt stage zeros; neither is ever stored.
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

constexpr int kRowsCta = 128;  // weight rows per CTA: 2 warpgroups x m64
constexpr int kTokCta = 128;   // tokens per CTA: the wgmma's n
constexpr int kThreads = 256;
constexpr int kStages = 3;
constexpr int kQuantBytes = kStageChunks * 2 * kTokCta * 16;  // a stage's B: [chunk][half][token][16]
constexpr int kScaleBytes = kStageChunks * kTokCta * 4;       // [chunk][token] f32
constexpr int kHalfStride = kTokCta * 16;                     // between a chunk's two 16-k halves

__host__ __device__ constexpr int window_row_bytes(int type) { return window_pitch(type) * 16; }
__host__ __device__ constexpr int windows_at(int type) { return kQuantBytes + kScaleBytes * (has_min(type) ? 2 : 1); }
__host__ __device__ constexpr int stage_smem(int type) { return windows_at(type) + kRowsCta * window_row_bytes(type); }
__host__ __device__ constexpr int smem_bytes(int type) { return kStages * stage_smem(type); }

#if defined(__CUDA_ARCH__)  // the device pass only: the host pass never sees the kernel body
// Matrix descriptor of one chunk's B (PTX ISA, wgmma shared memory descriptor): start address,
// leading byte offset = between the core matrices along k, stride byte offset = between the
// 8-token groups, all in 16-byte units; layout type 0 (no swizzle).
__device__ __forceinline__ uint64_t kmajor_desc(uint32_t smem_byte_addr) {
  return static_cast<uint64_t>((smem_byte_addr & 0x3ffffu) >> 4) | (static_cast<uint64_t>(kHalfStride >> 4) << 16) |
         (static_cast<uint64_t>(128 >> 4) << 32);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
/// Waits until at most N of this warpgroup's wgmma groups are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
/// Generic-proxy writes to shared memory (cp.async) made visible to the async proxy (wgmma).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
/// Orders every later use of d after the wgmma.wait_group before it (the registers are written
/// asynchronously; without this the compiler may read them early).
__device__ __forceinline__ void fence_operands(int (&d)[32]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

/// D (64 rows x 64 tokens, s32) = A (64 x 32 s8) * B (32 x 64 s8): this warp's 16 rows of A in
/// registers (the m16n8k32 A fragment a0..a3), B K-major in shared memory, described by `desc`. D's
/// previous contents are ignored (scale-d = 0). Register 4i + j of d holds row g + 8(j >> 1) of the
/// warp's 16, token 8i + 2t + (j & 1).
__device__ __forceinline__ void wgmma_m64n64k32(int (&d)[32], int a0, int a1, int a2, int a3, uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {"
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
      "}, {%32,%33,%34,%35}, %36, p;\n}\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]),
        "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]),
        "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]),
        "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(0));
}
#endif

// The k-major layout's three regions (launchers.h).
struct KMajorActs {
  const uint8_t* q;    // [nb][2][nt][16]
  const float* d;      // [nb][ntp]
  const float* sum;    // [nb][ntp]
  int ntp;
};

template <int TYPE>
__global__ void __launch_bounds__(kThreads, 1)
    mmq_wgmma_kernel(const uint8_t* __restrict__ w, size_t row_bytes, KMajorActs act, float* __restrict__ y,
                     int nt, int od, int nchunks) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kPitch = window_row_bytes(TYPE);
  constexpr int kStage = stage_smem(TYPE);
  constexpr int kSB = stage_bytes(TYPE);
  constexpr bool kMin = has_min(TYPE);
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int row0 = blockIdx.x * kRowsCta;
  const int tok0 = blockIdx.y * kTokCta;
  const int nst = nchunks / kStageChunks;  // k % 256 == 0 (launch_mmq_wgmma)
  const bool fast = kSB % 16 == 0 && row_bytes % 16 == 0 && (reinterpret_cast<uintptr_t>(w) & 15u) == 0;

  const auto stage = [&](int buf) -> uint8_t* { return smem + buf * kStage; };
  const auto row_src = [&](int r) -> const uint8_t* {
    return w + static_cast<size_t>(min(row0 + r, od - 1)) * row_bytes;
  };
  // Every thread copies the same things at every stage, so its addresses are worked out once here:
  // weight row (tid / 2), 16-byte columns (tid % 2) + 2j of its window; token (tid % 128) of quant
  // runs (tid / 128) + 2j; and one 16-byte line of the scales (and sums).
  const int w_row = tid >> 1, w_col = tid & 1;
  const uint8_t* w_src = row_src(w_row);
  const int a_tok = tid & (kTokCta - 1), a_run = tid >> 7;
  const int a_bytes = tok0 + a_tok < nt ? 16 : 0;
  const uint8_t* a_src = act.q + (static_cast<size_t>(a_run) * nt + (a_bytes != 0 ? tok0 + a_tok : 0)) * 16;
  const size_t a_run_stride = static_cast<size_t>(2) * nt * 16;  // two runs on
  const int s_chunk = tid / (kTokCta / 4), s_tok = (tid % (kTokCta / 4)) * 4;
  const int s_bytes = 4 * max(0, min(4, nt - (tok0 + s_tok)));
  const size_t s_src = static_cast<size_t>(s_chunk) * act.ntp + (s_bytes > 0 ? tok0 + s_tok : 0);
  static_assert(kStageChunks * kTokCta / 4 == kThreads, "one 16-byte line of scales per thread");

  // Stage st's raw weight bytes: each row's kSB bytes into its window.
  const auto issue_weights = [&](int st, int buf) {
    const uint32_t dst = smem_addr(stage(buf) + windows_at(TYPE) + w_row * kPitch);
    if (fast) {
      constexpr int kVecs = kSB / 16;
      const uint8_t* src = w_src + static_cast<size_t>(st) * kSB;
#pragma unroll
      for (int j = 0; j < (kVecs + 1) / 2; ++j) {
        const int v = w_col + 2 * j;
        if (v < kVecs) cp_async16(dst + 16 * v, src + 16 * v);
      }
    } else {
      constexpr int kP16 = window_pitch(TYPE);
      const uintptr_t start = reinterpret_cast<uintptr_t>(w_src) + static_cast<size_t>(st) * kSB;
      const uintptr_t base = start & ~uintptr_t{15};
#pragma unroll
      for (int j = 0; j < (kP16 + 1) / 2; ++j) {
        const int v = w_col + 2 * j;
        if (v < kP16 && base + 16u * v < start + kSB)
          cp_async16(dst + 16 * v, reinterpret_cast<const void*>(base + 16u * v));
      }
    }
  };
  // Stage st's activations: 16 runs of 128 tokens x 16 bytes, and 8 rows of 128 scales (and sums).
  const auto issue_acts = [&](int st, int buf) {
    const uint8_t* src = a_src + static_cast<size_t>(st) * kStageChunks * a_run_stride;
    const uint32_t dst = smem_addr(stage(buf) + a_run * kHalfStride + a_tok * 16);
#pragma unroll
    for (int j = 0; j < kStageChunks; ++j)
      cp_async16_zfill(dst + j * 2 * kHalfStride, src + j * a_run_stride, a_bytes);
    const size_t off = static_cast<size_t>(st) * kStageChunks * act.ntp + s_src;
    const uint32_t s_dst = smem_addr(stage(buf) + kQuantBytes + (s_chunk * kTokCta + s_tok) * 4);
    cp_async16_zfill(s_dst, act.d + off, s_bytes);
    if constexpr (kMin) cp_async16_zfill(s_dst + kScaleBytes, act.sum + off, s_bytes);
  };
  // Where CTA row r's stage st begins inside its window row.
  const auto lead = [&](int r, int st) -> int {
    if (fast) return 0;
    return static_cast<int>((reinterpret_cast<uintptr_t>(row_src(r)) + static_cast<size_t>(st) * kSB) & 15u);
  };

  // This thread's fragment rows (CTA-relative): r_lo and r_lo + 8 of its warp's 16.
  const int r_lo = (warp >> 2) * 64 + (warp & 3) * 16 + g;

  float acc[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
  // Integer dots of the two 64-token halves (A: tokens 0..63, B: 64..127), used in turn so that one
  // half's wgmma runs on the tensor cores while the other half is promoted; q6_K has a second pair
  // for its k16..31 halves.
  constexpr int kHiDots = TYPE == kQ6_K ? 32 : 1;
  int dot_a[32], dot_b[32], hi_a[kHiDots], hi_b[kHiDots];
#pragma unroll
  for (int i = 0; i < 32; ++i) dot_a[i] = dot_b[i] = 0;
#pragma unroll
  for (int i = 0; i < kHiDots; ++i) hi_a[i] = hi_b[i] = 0;

  // Weights do not depend on the activation quantizer: request them before waiting for it.
#pragma unroll
  for (int p = 0; p < kStages - 1; ++p)
    if (p < nst) issue_weights(p, p);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
#pragma unroll
  for (int p = 0; p < kStages - 1; ++p) {
    if (p < nst) issue_acts(p, p);
    cp_async_commit();  // possibly empty: the wait count below stays uniform
  }

  for (int st = 0; st < nst; ++st) {
    cp_async_wait<kStages - 2>();  // this thread's copies of stage st are in
    fence_proxy_async();
    __syncthreads();  // everyone's are; and every warpgroup is done with the buffer refilled next
    const int next = st + kStages - 1;
    if (next < nst) {
      issue_weights(next, next % kStages);
      issue_acts(next, next % kStages);
    }
    cp_async_commit();

    const int buf = st % kStages;
    const uint8_t* win = stage(buf) + windows_at(TYPE);
    const uint8_t* s0 = win + r_lo * kPitch + lead(r_lo, st);
    const uint8_t* s1 = win + (r_lo + 8) * kPitch + lead(r_lo + 8, st);
    const uint32_t b_addr = smem_addr(stage(buf));
    const float* scales = reinterpret_cast<const float*>(stage(buf) + kQuantBytes);
    const float* sums = reinterpret_cast<const float*>(stage(buf) + kQuantBytes + kScaleBytes);
    // Chunk c's wgmma(s) for one 64-token half, as one commit group.
    const auto mma_issue = [&](int c, int half, int (&d)[32], int (&d_hi)[kHiDots], const Frag& f0, const Frag& f1) {
      const uint64_t desc = kmajor_desc(b_addr + c * 2 * kHalfStride + half * 64 * 16);
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
    const auto promote = [&](int c, int half, int (&d)[32], int (&d_hi)[kHiDots], const Frag& f0, const Frag& f1) {
      fence_operands(d);
      if constexpr (TYPE == kQ6_K) fence_operands(d_hi);
      const float* sc = scales + c * kTokCta + half * 64 + 2 * t;
      const float* sm = sums + c * kTokCta + half * 64 + 2 * t;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        const float2 da = *reinterpret_cast<const float2*>(sc + 8 * i);
        float2 sa = make_float2(0.0f, 0.0f);
        if constexpr (kMin) sa = *reinterpret_cast<const float2*>(sm + 8 * i);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const Frag& f = j < 2 ? f0 : f1;
          const bool odd = (j & 1) != 0;
          float v = f.ds0 * static_cast<float>(d[4 * i + j]);
          if constexpr (TYPE == kQ6_K) v = fmaf(f.ds1, static_cast<float>(d_hi[4 * i + j]), v);
          if constexpr (kMin) v = fmaf(f.dm, odd ? sa.y : sa.x, v);
          float& a = acc[half * 32 + 4 * i + j];
          a = fmaf(odd ? da.y : da.x, v, a);
        }
      }
    };
    if constexpr (TYPE == kQ6_K) {
      // Four dot sets per chunk already (two halves x two k16 halves): chunk by chunk, the second
      // half's wgmmas running while the first half is promoted.
#pragma unroll 1
      for (int c = 0; c < kStageChunks; ++c) {
        const Frag f0 = decode_frag<TYPE>(s0, c, t), f1 = decode_frag<TYPE>(s1, c, t);
        mma_issue(c, 0, dot_a, hi_a, f0, f1);
        mma_issue(c, 1, dot_b, hi_b, f0, f1);
        wgmma_wait<1>();
        promote(c, 0, dot_a, hi_a, f0, f1);
        wgmma_wait<0>();
        promote(c, 1, dot_b, hi_b, f0, f1);
      }
      continue;
    }
    // Chunks in pairs, fragments of even chunks in x, odd in y: a register holding a wgmma's A
    // input is never written while that wgmma may still read it.
    Frag x0 = decode_frag<TYPE>(s0, 0, t), x1 = decode_frag<TYPE>(s1, 0, t);
    mma_issue(0, 0, dot_a, hi_a, x0, x1);
    mma_issue(0, 1, dot_b, hi_b, x0, x1);
    static_assert(kStageChunks % 2 == 0, "chunks go in pairs");
#pragma unroll 1
    for (int c = 0; c < kStageChunks; c += 2) {
      wgmma_wait<1>();  // (c, half 0) is done; (c, half 1) may still run
      promote(c, 0, dot_a, hi_a, x0, x1);
      const Frag y0 = decode_frag<TYPE>(s0, c + 1, t), y1 = decode_frag<TYPE>(s1, c + 1, t);
      mma_issue(c + 1, 0, dot_a, hi_a, y0, y1);
      wgmma_wait<1>();  // (c, half 1) is done
      promote(c, 1, dot_b, hi_b, x0, x1);
      mma_issue(c + 1, 1, dot_b, hi_b, y0, y1);
      wgmma_wait<1>();  // (c + 1, half 0) is done
      promote(c + 1, 0, dot_a, hi_a, y0, y1);
      const bool more = c + 2 < kStageChunks;
      if (more) {
        x0 = decode_frag<TYPE>(s0, c + 2, t);
        x1 = decode_frag<TYPE>(s1, c + 2, t);
        mma_issue(c + 2, 0, dot_a, hi_a, x0, x1);
        wgmma_wait<1>();  // (c + 1, half 1) is done
      } else {
        wgmma_wait<0>();
      }
      promote(c + 1, 1, dot_b, hi_b, y0, y1);
      if (more) mma_issue(c + 2, 1, dot_b, hi_b, x0, x1);
    }
  }

  // Accumulator 4i + j (i = 0..15; 8..15 are the second half's): row r_lo + 8(j >> 1), token 8i + 2t + (j & 1).
#pragma unroll
  for (int i = 0; i < 16; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int tok = tok0 + 8 * i + 2 * t + (j & 1);
      const int row = row0 + r_lo + 8 * (j >> 1);
      if (tok < nt && row < od) y[static_cast<size_t>(tok) * od + row] = acc[4 * i + j];
    }
#endif
}

template <int TYPE>
int launch_typed(const void* weights, int64_t od, int64_t k, const void* q8, int64_t nt, float* y,
                 cudaStream_t stream) {
  auto kernel = mmq_wgmma_kernel<TYPE>;
  constexpr int kSmem = smem_bytes(TYPE);
  static_assert(kSmem <= 227 * 1024, "sm_90's shared memory per CTA");
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return static_cast<int>(e);
  static std::mutex mu;
  static uint64_t done_mask = 0;  // devices that have the shared-memory opt-in for this kernel
  {
    std::lock_guard<std::mutex> lock(mu);
    const uint64_t bit = dev < 64 ? (uint64_t{1} << dev) : 0;
    if (bit == 0 || (done_mask & bit) == 0) {
      e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
      if (e != cudaSuccess) return static_cast<int>(e);
      done_mask |= bit;
    }
  }
  const uint8_t* base = static_cast<const uint8_t*>(q8);
  KMajorActs act;
  act.q = base;
  act.d = reinterpret_cast<const float*>(base + q8_kmajor_scales_offset(nt, k));
  act.sum = reinterpret_cast<const float*>(base + q8_kmajor_sums_offset(nt, k));
  act.ntp = static_cast<int>(q8_kmajor_padded_tokens(nt));
  const size_t row_bytes = static_cast<size_t>(k / (is_kquant(TYPE) ? 256 : 32)) * block_bytes(TYPE);
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>((od + kRowsCta - 1) / kRowsCta),
                        static_cast<unsigned>((nt + kTokCta - 1) / kTokCta));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kSmem;
  config.stream = stream;
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attribute;
  config.numAttrs = 1;
  e = cudaLaunchKernelEx(&config, kernel, static_cast<const uint8_t*>(weights), row_bytes, act, y,
                         static_cast<int>(nt), static_cast<int>(od), static_cast<int>(k / 32));
  if (e != cudaSuccess) return static_cast<int>(e);
  return static_cast<int>(cudaGetLastError());
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

int launch_mmq_wgmma(int32_t type, const void* weights, int64_t od, int64_t k, const void* q8, int64_t nt,
                     float* y, void* stream) {
  const int bb = block_bytes(type);
  if (bb == 0 || weights == nullptr || q8 == nullptr || y == nullptr || nt <= 0 || od <= 0 || k <= 0 ||
      k % 256 != 0)
    return static_cast<int>(cudaErrorInvalidValue);
  if (nt > INT_MAX || od > INT_MAX || (nt + kTokCta - 1) / kTokCta > 65535 || k / 32 > INT_MAX)
    return static_cast<int>(cudaErrorInvalidValue);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case kQ4_0: return launch_typed<kQ4_0>(weights, od, k, q8, nt, y, s);
    case kQ4_1: return launch_typed<kQ4_1>(weights, od, k, q8, nt, y, s);
    case kQ5_0: return launch_typed<kQ5_0>(weights, od, k, q8, nt, y, s);
    case kQ5_1: return launch_typed<kQ5_1>(weights, od, k, q8, nt, y, s);
    case kQ8_0: return launch_typed<kQ8_0>(weights, od, k, q8, nt, y, s);
    case kQ4_K: return launch_typed<kQ4_K>(weights, od, k, q8, nt, y, s);
    case kQ5_K: return launch_typed<kQ5_K>(weights, od, k, q8, nt, y, s);
    case kQ6_K: return launch_typed<kQ6_K>(weights, od, k, q8, nt, y, s);
    default: return static_cast<int>(cudaErrorInvalidValue);
  }
}

}  // namespace qgate::cuda
