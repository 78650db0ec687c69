// Activation kernels run once per GEMM launch: the q8 quantizer of the MMQ path (f32 -> pad40
// blocks carrying their int sum, or the decode path's layout; both documented in launchers.h) and
// the f32 -> f16 conversion of the f16 path. The quantizer must round exactly as the CPU reference (quantize_block_q8) does, so
// this file is built without fast-math and spells every rounding step out.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernel_launch.cuh"
#include "cuda/launchers.h"

namespace qgate::cuda {
namespace {

// A lane's quants: N words of elements E*j.. of its block (E = 4N, j = the lane), element 4i + e in
// byte e of word i.
template <int N>
struct LaneQuants {
  uint32_t w[N];
};

// Where the quantizer writes one block: the MMQ tile kernel's pad40 blocks [nt][k/32], the decode
// kernel's three regions [k/32][nt], or the wgmma kernel's k-major regions (launchers.h).
// store() writes one lane's quants; scale_and_sum() the block's d and int sum.
// kLanes, kThreads: lanes per block and threads per CTA. Two lanes (16 elements a lane, d and 1/d
// computed once a lane pair) in CTAs of 128 where the token count is large; for the decode layout's
// 1..8 tokens, eight lanes in CTAs of 256, which measured 4-16% faster at 1 token (bench/RESULTS.md,
// mmq-v12): the GEMV waits for this kernel.
// kTokensFastest: the order in which consecutive lane groups take blocks. Pad40 is [token][block],
// so they take consecutive blocks of one token; the other two layouts are [block][token], so they
// take one block of consecutive tokens, and a warp's stores land on consecutive bytes (its loads are
// whole runs of a row either way).
struct Pad40Layout {
  static constexpr int kLanes = 2, kThreads = 128;
  static constexpr bool kTokensFastest = false;
  __device__ void store(uint8_t* out, int64_t, int64_t, int64_t blk, int h, const LaneQuants<4>& q) const {
    // A block is 40 bytes, so its halves are 8-byte aligned only.
    uint2* b = reinterpret_cast<uint2*>(out + blk * kQ8BlockBytes + 16 * h);
    b[0] = make_uint2(q.w[0], q.w[1]);
    b[1] = make_uint2(q.w[2], q.w[3]);
  }
  __device__ void scale_and_sum(uint8_t* out, int64_t, int64_t, int64_t blk, uint16_t d, int32_t sum) const {
    uint8_t* b = out + blk * kQ8BlockBytes;
    // bytes 32..35: f16 d in the low half, zero padding above; bytes 36..39: the int sum.
    *reinterpret_cast<uint32_t*>(b + 32) = static_cast<uint32_t>(d);
    *reinterpret_cast<int32_t*>(b + 36) = sum;
  }
};
struct DecodeLayout {
  static constexpr int kLanes = 8, kThreads = 256;
  static constexpr bool kTokensFastest = true;
  int64_t nt, scales_at, sums_at;
  __device__ void store(uint8_t* out, int64_t row, int64_t col, int64_t, int j, const LaneQuants<1>& q) const {
    // Fragment order: elements 4i..4i+3 go to bytes 8i.., elements 16+4i.. to bytes 8i+4.. (i < 4).
    *reinterpret_cast<uint32_t*>(out + (col * nt + row) * 32 + (j & 3) * 8 + (j >> 2) * 4) = q.w[0];
  }
  __device__ void scale_and_sum(uint8_t* out, int64_t row, int64_t col, int64_t, uint16_t d, int32_t sum) const {
    reinterpret_cast<uint16_t*>(out + scales_at)[col * nt + row] = d;
    reinterpret_cast<int32_t*>(out + sums_at)[col * nt + row] = sum;
  }
};
struct KMajorLayout {
  static constexpr int kLanes = 2, kThreads = 128;
  static constexpr bool kTokensFastest = true;
  int64_t nt, ntp, scales_at, sums_at;
  __device__ void store(uint8_t* out, int64_t row, int64_t col, int64_t, int h, const LaneQuants<4>& q) const {
    *reinterpret_cast<uint4*>(out + ((col * 2 + h) * nt + row) * 16) = make_uint4(q.w[0], q.w[1], q.w[2], q.w[3]);
  }
  __device__ void scale_and_sum(uint8_t* out, int64_t row, int64_t col, int64_t, uint16_t d, int32_t sum) const {
    const int64_t slot = col * ntp + q8_kmajor_token_slot(row);
    reinterpret_cast<float*>(out + scales_at)[slot] = __half2float(__ushort_as_half(d));
    reinterpret_cast<float*>(out + sums_at)[slot] = static_cast<float>(sum);
  }
};

// The blocks one CTA of Layout's quantizer takes.
template <class Layout>
constexpr int blocks_per_cta() {
  return Layout::kThreads / Layout::kLanes;
}

// Layout::kLanes lanes per 32-element block, E = 32 / kLanes consecutive elements per lane (16-byte
// loads, issued together, when x allows it): the max and the sum are reductions over the block's
// lanes, which are exact (max is order-free; the sum is of small ints). Every element is rounded on
// its own, exactly as the CPU does.
template <class Layout>
__global__ void __launch_bounds__(Layout::kThreads)
    quantize_q8_kernel(const float* __restrict__ x, int64_t total_blocks, int64_t blocks_per_row, int64_t nt,
                       int64_t k, bool vec_loads, uint8_t* __restrict__ out, Layout layout) {
  constexpr int kLanes = Layout::kLanes, kElems = kQ8BlockElems / kLanes, kWords = kElems / 4;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // A GEMM launched as this kernel's programmatic dependent may start now: it waits for this grid's
  // results (griddepcontrol.wait) before it reads any, and streams its weights meanwhile.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  // This kernel is itself a programmatic dependent of the work before it (the last GEMM, or what
  // wrote x): nothing is read or written before that work is complete.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  const int j = threadIdx.x & (kLanes - 1);
  const int64_t blk = static_cast<int64_t>(blockIdx.x) * blocks_per_cta<Layout>() + (threadIdx.x / kLanes);
  // Lanes past the last block stay for the shuffles (their group's mask is the whole warp) but
  // neither load nor store.
  const bool live = blk < total_blocks;
  int64_t row = 0, col = 0;  // token, block
  if (live) {
    // blk = major * minor_count + minor: minor is the token when the layout wants tokens fastest.
    const int64_t minor_count = Layout::kTokensFastest ? nt : blocks_per_row;
    int64_t major = 0, minor = 0;
    if (total_blocks <= 0xffffffffLL) {  // 32-bit division where it suffices
      const uint32_t q = static_cast<uint32_t>(blk) / static_cast<uint32_t>(minor_count);
      major = q;
      minor = static_cast<uint32_t>(blk) - q * static_cast<uint32_t>(minor_count);
    } else {
      major = blk / minor_count;
      minor = blk - major * minor_count;
    }
    row = Layout::kTokensFastest ? minor : major;
    col = Layout::kTokensFastest ? major : minor;
  }
  float v[kElems];
#pragma unroll
  for (int e = 0; e < kElems; ++e) v[e] = 0.0f;
  if (live) {
    const float* p = x + row * k + col * kQ8BlockElems + kElems * j;
    if (vec_loads) {
      float4 f[kWords];
#pragma unroll
      for (int i = 0; i < kWords; ++i) f[i] = reinterpret_cast<const float4*>(p)[i];
#pragma unroll
      for (int i = 0; i < kWords; ++i) {
        v[4 * i] = f[i].x;
        v[4 * i + 1] = f[i].y;
        v[4 * i + 2] = f[i].z;
        v[4 * i + 3] = f[i].w;
      }
    } else {
#pragma unroll
      for (int e = 0; e < kElems; ++e) v[e] = p[e];
    }
  }

  float amax = 0.0f;
#pragma unroll
  for (int e = 0; e < kElems; ++e) amax = fmaxf(amax, fabsf(v[e]));
#pragma unroll
  for (int off = kLanes / 2; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));

  // IEEE division and reciprocal (the build has no fast-math), 1/d from the unrounded d.
  const float d = amax / 127.0f;
  const float di = d != 0.0f ? 1.0f / d : 0.0f;
  int sum = 0;
  LaneQuants<kWords> q;
#pragma unroll
  for (int i = 0; i < kWords; ++i) {
    uint32_t packed = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float r = rintf(v[4 * i + e] * di);  // round half to even, as the CPU does
      r = fminf(fmaxf(r, -128.0f), 127.0f);
      const int qe = static_cast<int>(r);
      sum += qe;
      packed |= static_cast<uint32_t>(static_cast<uint8_t>(static_cast<int8_t>(qe))) << (8 * e);
    }
    q.w[i] = packed;
  }
#pragma unroll
  for (int off = kLanes / 2; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);

  if (!live) return;
  layout.store(out, row, col, blk, j, q);
  if (j == 0) layout.scale_and_sum(out, row, col, blk, __half_as_ushort(__float2half_rn(d)), sum);
}

template <class Layout>
int launch_quantize(const float* x, int64_t nt, int64_t k, void* q8_out, void* stream, Layout layout) {
  if (x == nullptr || q8_out == nullptr || nt <= 0 || k <= 0 || k % kQ8BlockElems != 0)
    return static_cast<int>(cudaErrorInvalidValue);
  const int64_t blocks_per_row = k / kQ8BlockElems;
  const int64_t total = nt * blocks_per_row;
  const int64_t grid = (total + blocks_per_cta<Layout>() - 1) / blocks_per_cta<Layout>();
  if (grid > 0x7fffffffLL) return static_cast<int>(cudaErrorInvalidValue);
  const bool vec_loads = (reinterpret_cast<uintptr_t>(x) & 15u) == 0;  // rows are 128-byte multiples
  bool pdl = false;
  if (const cudaError_t e = launch::prepare<quantize_q8_kernel<Layout>>(0, &pdl); e != cudaSuccess)
    return static_cast<int>(e);
  return launch::dependent(quantize_q8_kernel<Layout>, dim3(static_cast<unsigned>(grid)), dim3(Layout::kThreads), 0,
                           static_cast<cudaStream_t>(stream), pdl, x, total, blocks_per_row, nt, k, vec_loads,
                           static_cast<uint8_t*>(q8_out), layout);
}

__global__ void f32_to_f16_kernel(const float* __restrict__ x, __half* __restrict__ y, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = __float2half_rn(x[i]);
}

// Four values per thread and step (16-byte loads, 8-byte stores) when both buffers are 16- and
// 8-byte aligned and n % 4 == 0: the conversion is a pure stream, bound by its bytes.
__global__ void f32x4_to_f16x4_kernel(const float4* __restrict__ x, uint2* __restrict__ y, int64_t n4) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += stride) {
    const float4 v = x[i];
    const __half2 lo = __floats2half2_rn(v.x, v.y);
    const __half2 hi = __floats2half2_rn(v.z, v.w);
    y[i] = make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
  }
}

}  // namespace

int launch_quantize_q8(const float* x, int64_t nt, int64_t k, void* q8_out, void* stream) {
  return launch_quantize(x, nt, k, q8_out, stream, Pad40Layout{});
}

int launch_quantize_q8_decode(const float* x, int64_t nt, int64_t k, void* q8_out, void* stream) {
  if (nt > kDecodeMaxTokens) return static_cast<int>(cudaErrorInvalidValue);
  const DecodeLayout layout{nt, static_cast<int64_t>(q8_decode_scales_offset(nt, k)),
                            static_cast<int64_t>(q8_decode_sums_offset(nt, k))};
  return launch_quantize(x, nt, k, q8_out, stream, layout);
}

int launch_quantize_q8_kmajor(const float* x, int64_t nt, int64_t k, void* q8_out, void* stream) {
  const KMajorLayout layout{nt, q8_kmajor_padded_tokens(nt), static_cast<int64_t>(q8_kmajor_scales_offset(nt, k)),
                            static_cast<int64_t>(q8_kmajor_sums_offset(nt, k))};
  return launch_quantize(x, nt, k, q8_out, stream, layout);
}

int launch_f32_to_f16(const float* x, void* y_f16, int64_t n, void* stream) {
  if (x == nullptr || y_f16 == nullptr || n <= 0) return static_cast<int>(cudaErrorInvalidValue);
  const int threads = 256;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const bool vec = n % 4 == 0 && (reinterpret_cast<uintptr_t>(x) & 15u) == 0 &&
                   (reinterpret_cast<uintptr_t>(y_f16) & 7u) == 0;
  const int64_t items = vec ? n / 4 : n;
  int64_t grid = (items + threads - 1) / threads;
  if (grid > 65536) grid = 65536;  // grid-stride loop covers the rest
  if (vec) {
    f32x4_to_f16x4_kernel<<<static_cast<unsigned>(grid), threads, 0, s>>>(reinterpret_cast<const float4*>(x),
                                                                          static_cast<uint2*>(y_f16), items);
  } else {
    f32_to_f16_kernel<<<static_cast<unsigned>(grid), threads, 0, s>>>(x, static_cast<__half*>(y_f16), n);
  }
  return static_cast<int>(cudaGetLastError());
}

}  // namespace qgate::cuda
