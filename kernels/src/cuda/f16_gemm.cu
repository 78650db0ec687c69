// The f16 path's GEMM: y[nt][od] (f32) = x_f16[nt][k] * w_f16[od][k]^T on the f16 tensor cores
// with f32 accumulation (mma.sync m16n8k16), the weights being the resident f16 copy made at
// prepare. A plain, well-understood tile: 128 tokens x 128 rows x 32 k per CTA, 8 warps of 64x32,
// a 3-stage cp.async pipeline and ldmatrix fragment loads from rows padded to 40 halves (80 B),
// which puts the 8 row addresses of every ldmatrix phase on distinct 16-byte bank groups.
// Edges: rows beyond nt/od and k beyond k are zero-filled by cp.async (src-size 0) and stores are
// guarded. k must be a multiple of 8 so every 16-byte copy is wholly inside or outside a row.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <mutex>

#include "cuda/launchers.h"

namespace qgate::cuda {
namespace {

constexpr int kBM = 128;      // tokens per CTA
constexpr int kBN = 128;      // weight rows per CTA
constexpr int kBK = 32;       // k per stage
constexpr int kStages = 3;
constexpr int kPitch = 40;    // halves per staged row: 32 data + 8 pad
constexpr int kThreads = 256;
constexpr int kStageHalves = (kBM + kBN) * kPitch;
constexpr size_t kSmemBytes = static_cast<size_t>(kStages) * kStageHalves * sizeof(__half);  // 61,440 B

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}

// One stage: A = x rows [m0, m0+128) x k [k0, k0+32), B = w rows [n0, n0+128) x the same k.
// 4 copies of 16 B per row and operand; 1024 copies over 256 threads.
__device__ __forceinline__ void load_stage(const __half* __restrict__ x, const __half* __restrict__ w,
                                           int nt, int od, int k, int m0, int n0, int k0,
                                           __half* sa, __half* sb, int tid) {
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    const int u = tid + p * kThreads;
    const int row = u >> 2, ch = u & 3;
    const int gk = k0 + ch * 8;
    {
      const int gm = m0 + row;
      const bool ok = gm < nt && gk < k;
      const __half* src = ok ? x + static_cast<size_t>(gm) * k + gk : x;
      cp_async16(smem_addr(sa + row * kPitch + ch * 8), src, ok ? 16 : 0);
    }
    {
      const int gn = n0 + row;
      const bool ok = gn < od && gk < k;
      const __half* src = ok ? w + static_cast<size_t>(gn) * k + gk : w;
      cp_async16(smem_addr(sb + row * kPitch + ch * 8), src, ok ? 16 : 0);
    }
  }
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t* r, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// D(16x8 f32) += A(16x16 f16, row) * B(16x8 f16, col). g = lane/4, t = lane%4, two halves per reg:
//   a0 = A[g][2t..], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..]
//   b0 = B[2t..][g], b1 = B[2t+8..][g];  c0,c1 = C[g][2t, 2t+1], c2,c3 = C[g+8][2t, 2t+1]
__device__ __forceinline__ void mma_f16(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__global__ void __launch_bounds__(kThreads, 2)
    f16_gemm_kernel(const __half* __restrict__ x, const __half* __restrict__ w, float* __restrict__ y,
                    int nt, int od, int k) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(16) __half fsm[];
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int m0 = blockIdx.x * kBM, n0 = blockIdx.y * kBN;
  const int wm = (warp >> 2) * 64;  // warp's first token in the tile
  const int wn = (warp & 3) * 32;   // warp's first weight row in the tile
  const int nkt = (k + kBK - 1) / kBK;

  auto stage_a = [&](int s) { return fsm + s * kStageHalves; };
  auto stage_b = [&](int s) { return fsm + s * kStageHalves + kBM * kPitch; };

  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nkt) load_stage(x, w, nt, od, k, m0, n0, s * kBK, stage_a(s), stage_b(s), tid);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }

  // ldmatrix lane addressing: A (x4 = a0..a3): row lane%16, k half (lane/16)*8.
  // B (x4 = b0,b1 of rows n..n+7, then b0,b1 of rows n+8..n+15): row (lane%8) + (lane/16)*8,
  // k half ((lane/8)%2)*8.
  const int a_row = lane & 15, a_col = (lane >> 4) * 8;
  const int b_row = (lane & 7) + ((lane >> 4) << 3), b_col = ((lane >> 3) & 1) * 8;

  for (int kt = 0; kt < nkt; ++kt) {
    // Groups committed so far: kt + 2; waiting for all but the newest leaves tile kt complete.
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    __syncthreads();  // tile kt visible to all; everyone is done with the stage refilled below
    const int nxt = kt + kStages - 1;
    if (nxt < nkt) load_stage(x, w, nt, od, k, m0, n0, nxt * kBK, stage_a(nxt % kStages), stage_b(nxt % kStages), tid);
    asm volatile("cp.async.commit_group;\n" ::: "memory");

    const __half* sa = stage_a(kt % kStages);
    const __half* sb = stage_b(kt % kStages);
#pragma unroll
    for (int ks = 0; ks < kBK; ks += 16) {
      uint32_t a[4][4], b[4][2];
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
        ldmatrix_x4(a[mi], smem_addr(sa + (wm + mi * 16 + a_row) * kPitch + ks + a_col));
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        uint32_t r[4];
        ldmatrix_x4(r, smem_addr(sb + (wn + np * 16 + b_row) * kPitch + ks + b_col));
        b[2 * np][0] = r[0];
        b[2 * np][1] = r[1];
        b[2 * np + 1][0] = r[2];
        b[2 * np + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < 4; ++mi)
#pragma unroll
        for (int nj = 0; nj < 4; ++nj) mma_f16(acc[mi][nj], a[mi], b[nj][0], b[nj][1]);
    }
  }
  asm volatile("cp.async.wait_all;\n" ::: "memory");  // no copy outlives the CTA (only empty groups remain)

  const bool pair_ok = (od & 1) == 0 && (reinterpret_cast<uintptr_t>(y) & 7) == 0;
#pragma unroll
  for (int mi = 0; mi < 4; ++mi)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int tok = m0 + wm + mi * 16 + hr * 8 + g;
      if (tok >= nt) continue;
      float* yrow = y + static_cast<size_t>(tok) * od;
#pragma unroll
      for (int nj = 0; nj < 4; ++nj) {
        const int col = n0 + wn + nj * 8 + 2 * t;
        const float v0 = acc[mi][nj][2 * hr], v1 = acc[mi][nj][2 * hr + 1];
        if (pair_ok && col < od) {
          *reinterpret_cast<float2*>(yrow + col) = make_float2(v0, v1);
        } else {
          if (col < od) yrow[col] = v0;
          if (col + 1 < od) yrow[col + 1] = v1;
        }
      }
    }
#endif
}

}  // namespace

int launch_f16_gemm(const void* x_f16, const void* w_f16, int64_t nt, int64_t od, int64_t k, float* y,
                    void* stream) {
  if (x_f16 == nullptr || w_f16 == nullptr || y == nullptr || nt <= 0 || od <= 0 || k <= 0 || k % 8 != 0)
    return static_cast<int>(cudaErrorInvalidValue);
  if (nt > INT_MAX || od > INT_MAX || k > INT_MAX || (od + kBN - 1) / kBN > 65535)
    return static_cast<int>(cudaErrorInvalidValue);
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return static_cast<int>(e);
  static std::mutex mu;
  static uint64_t done_mask = 0;  // devices whose 60 KB dynamic shared memory opt-in is done
  {
    std::lock_guard<std::mutex> lock(mu);
    const uint64_t bit = dev < 64 ? (uint64_t{1} << dev) : 0;
    if (bit == 0 || (done_mask & bit) == 0) {
      e = cudaFuncSetAttribute(f16_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(kSmemBytes));
      if (e != cudaSuccess) return static_cast<int>(e);
      done_mask |= bit;
    }
  }
  const dim3 grid(static_cast<unsigned>((nt + kBM - 1) / kBM), static_cast<unsigned>((od + kBN - 1) / kBN));
  f16_gemm_kernel<<<grid, kThreads, kSmemBytes, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const __half*>(x_f16), static_cast<const __half*>(w_f16), y, static_cast<int>(nt),
      static_cast<int>(od), static_cast<int>(k));
  return static_cast<int>(cudaGetLastError());
}

}  // namespace qgate::cuda
