// Device-side PTX wrappers both MMQ kernels use: the int8 mma.sync shapes (sm_80+) with their
// fragment layouts, and the cp.async copies and groups that stage their shared memory.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace qgate::cuda::ptx {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// 8-byte async copy; src_bytes == 0 fills the destination with zeros.
__device__ __forceinline__ void cp_async8(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}
/// 16-byte async copy bypassing L1 (src and dst 16-byte aligned).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src) : "memory");
}
/// 16-byte async copy bypassing L1 of src_bytes (0..16) bytes; the rest of the 16 is zero-filled.
__device__ __forceinline__ void cp_async16_zfill(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/// Waits until at most N of this thread's groups are pending.
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

/// D = A(16x32 s8, row) * B(32x8 s8, col) + D. Fragments (PTX ISA, m16n8k32 .s8), g = lane/4,
/// t = lane%4, one register = 4 consecutive k:
///   a0 = A[g][4t..], a1 = A[g+8][4t..], a2 = A[g][16+4t..], a3 = A[g+8][16+4t..]
///   b0 = B[4t..][g], b1 = B[16+4t..][g]
///   c0,c1 = C[g][2t, 2t+1], c2,c3 = C[g+8][2t, 2t+1]
__device__ __forceinline__ void mma_k32(int* c, int a0, int a1, int a2, int a3, int b0, int b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

/// D = A(16x16 s8) * B(16x8 s8) + D: a0 = A[g][4t..], a1 = A[g+8][4t..], b0 = B[4t..][g]; C as
/// above. The k16 halves of a k32 fragment are therefore {a0, a1, b0} (k 0..15) and {a2, a3, b1}.
__device__ __forceinline__ void mma_k16(int* c, int a0, int a1, int b0) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 "
      "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(b0));
#endif
}

}  // namespace qgate::cuda::ptx
