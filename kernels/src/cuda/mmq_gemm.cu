// The MMQ GEMM: y[nt][od] = x * W^T with the weights read as RAW ggml blocks and the activations
// as the q8 blocks of activation_quant.cu, multiplied on the int8 tensor cores (sm_80+).
//
// Math (mmq_math.h): per 32-element k block, every weight row splits into small ints q_w and
// scales so that w_i = ds * q_w + dm; the integer dot sum(q_w * q_a) is exact in the mma's int32
// accumulator, and the block is folded into the f32 output as
//     out += da * (ds * acc + dm * sum(q_a))
// dm (the rank-1 term) exists only for the min-carrying types (q4_1, q5_1, q4_K, q5_K). K-quant
// nibbles stay UNSIGNED (0..15, 0..31) with dm = -dmin*m; q4_0/q5_0 subtract 8/16; q8_0 is used
// as is; q6_K subtracts 32 and, because its scales cover 16 elements, runs each 32-k chunk as two
// m16n8k16 mmas with separate accumulators scaled by d*sc[2s] and d*sc[2s+1].
//
// Tile (the seed's 64x64x256): a CTA computes 64 tokens x 64 weight rows and walks k in tiles of
// 8 chunks of 32. 8 warps, each 32 tokens x 16 rows = 2 A fragments x 2 B fragments. Shared
// memory is double-buffered: while warps multiply tile kt, the activations of tile kt+1 arrive by
// cp.async and the raw weight bytes of tile kt+1 sit in registers, decoded into shared memory
// after the multiply, so global latency hides behind the mmas. Rows of the int tiles are padded
// from 64 to 68 words, which makes every fragment load conflict-free (row r starts at bank 4r).
//
// Edges: tokens >= nt, rows >= od and chunks >= k/32 are staged as zeros with zero scales, so they
// add exactly 0; stores are guarded, every y element in range is written exactly once.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "cuda/block_formats.cuh"
#include "cuda/kernel_launch.cuh"
#include "cuda/mma_s8.cuh"
#include "cuda/launchers.h"

namespace qgate::cuda {
namespace {

constexpr int kBM = 64;        // tokens per CTA
constexpr int kBN = 64;        // weight rows per CTA
constexpr int kKD = 8;         // 32-k chunks per k tile (256 k)
constexpr int kPitch = 68;     // words per staged row: 64 data (256 int8) + 4 pad
constexpr int kThreads = 256;  // 8 warps

// Shared memory of one buffer, in 32-bit words.
constexpr int kTileWords = kBM * kPitch;                  // int8 x4 rows (A or B)
constexpr int kAxWords = 2 * kKD * kBM;                   // uint2 {f16 d, sum} per (chunk, token)
constexpr int kScaleWords = kKD * kBN;                    // one f32 per (chunk, row)
constexpr int kBufWords = 2 * kTileWords + kAxWords + 3 * kScaleWords;
constexpr size_t kSmemBytes = 2 * kBufWords * sizeof(int);  // double-buffered: 90,112 B

static_assert(kBM == kBN, "staging maps 512 (row, chunk) units onto 256 threads for both sides");
static_assert(kBM * kKD == 2 * kThreads, "two staging units per thread");

using namespace blocks;

__device__ __forceinline__ uint32_t ld_u16(const uint8_t* p) {
  return *reinterpret_cast<const uint16_t*>(p);
}
__device__ __forceinline__ uint32_t pack16(uint32_t lo, uint32_t hi) { return lo | (hi << 16); }

// Scale and min of K-quant sub-block `sub`, from the block header (bytes 0..15) held in registers.
__device__ __forceinline__ void kquant_scale_min(const uint4& h, int sub, float* ds, float* dm) {
  const auto scale_byte = [&h](int j) -> uint32_t {
    const uint32_t w = j < 4 ? h.y : j < 8 ? h.z : h.w;  // bytes 4..15 of the block header
    return (w >> (8 * (j & 3))) & 0xffu;
  };
  uint32_t sc, m;
  blocks::kquant_scale_min(scale_byte, sub, &sc, &m);
  const float d = f16_bits_to_f32(h.x);
  const float dmin = f16_bits_to_f32(h.x >> 16);
  *ds = d * static_cast<float>(sc);
  *dm = -(dmin * static_cast<float>(m));
}

// ---------------------------------------------------------------------------------------------
// Raw weight bytes of one staging unit (one weight row x one 32-k chunk), held in registers
// between load() (issued before the multiply) and decode() (after it). decode() writes the 32
// int8 the B fragment wants (8 words, k order) and the chunk's scales. Loads use the widest access
// the block's alignment allows: q4_0/q5_0/q8_0/q6_K blocks are only 2-byte aligned.
template <int TYPE>
struct RawUnit;

template <>
struct RawUnit<kQ4_0> {  // {f16 d; u8 qs[16]}: element j = low nibble of qs[j], j+16 = high
  uint32_t h[9];
  __device__ __forceinline__ void load(const uint8_t* p, int) {
#pragma unroll
    for (int i = 0; i < 9; ++i) h[i] = ld_u16(p + 2 * i);
  }
  __device__ __forceinline__ void decode(int, int* q, float* ds0, float* ds1, float* dm) const {
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t qs = pack16(h[1 + 2 * w], h[2 + 2 * w]);
      q[w] = static_cast<int>(bytes_minus<8>(qs & 0x0f0f0f0fu));
      q[w + 4] = static_cast<int>(bytes_minus<8>((qs >> 4) & 0x0f0f0f0fu));
    }
    *ds0 = *ds1 = f16_bits_to_f32(h[0]);
    *dm = 0.0f;
  }
};

template <>
struct RawUnit<kQ4_1> {  // {f16 d, m; u8 qs[16]}: w = d*q + m, q unsigned
  uint32_t r[5];
  __device__ __forceinline__ void load(const uint8_t* p, int) {
    const uint32_t* p4 = reinterpret_cast<const uint32_t*>(p);
#pragma unroll
    for (int i = 0; i < 5; ++i) r[i] = p4[i];
  }
  __device__ __forceinline__ void decode(int, int* q, float* ds0, float* ds1, float* dm) const {
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      q[w] = static_cast<int>(r[1 + w] & 0x0f0f0f0fu);
      q[w + 4] = static_cast<int>((r[1 + w] >> 4) & 0x0f0f0f0fu);
    }
    *ds0 = *ds1 = f16_bits_to_f32(r[0]);
    *dm = f16_bits_to_f32(r[0] >> 16);
  }
};

template <>
struct RawUnit<kQ5_0> {  // {f16 d; u8 qh[4]; u8 qs[16]}: bit j of qh is element j's fifth bit
  uint32_t h[11];
  __device__ __forceinline__ void load(const uint8_t* p, int) {
#pragma unroll
    for (int i = 0; i < 11; ++i) h[i] = ld_u16(p + 2 * i);
  }
  __device__ __forceinline__ void decode(int, int* q, float* ds0, float* ds1, float* dm) const {
    const uint32_t qh = pack16(h[1], h[2]);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t qs = pack16(h[3 + 2 * w], h[4 + 2 * w]);
      const uint32_t lo = (qs & 0x0f0f0f0fu) | spread4_to_bit4(qh >> (4 * w));
      const uint32_t hi = ((qs >> 4) & 0x0f0f0f0fu) | spread4_to_bit4(qh >> (16 + 4 * w));
      q[w] = static_cast<int>(bytes_minus<16>(lo));
      q[w + 4] = static_cast<int>(bytes_minus<16>(hi));
    }
    *ds0 = *ds1 = f16_bits_to_f32(h[0]);
    *dm = 0.0f;
  }
};

template <>
struct RawUnit<kQ5_1> {  // {f16 d, m; u8 qh[4]; u8 qs[16]}: unsigned 5-bit q, w = d*q + m
  uint32_t r[6];
  __device__ __forceinline__ void load(const uint8_t* p, int) {
    const uint2* p8 = reinterpret_cast<const uint2*>(p);  // 24-byte blocks: 8-byte aligned
#pragma unroll
    for (int i = 0; i < 3; ++i) {
      const uint2 v = p8[i];
      r[2 * i] = v.x;
      r[2 * i + 1] = v.y;
    }
  }
  __device__ __forceinline__ void decode(int, int* q, float* ds0, float* ds1, float* dm) const {
    const uint32_t qh = r[1];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const uint32_t qs = r[2 + w];
      q[w] = static_cast<int>((qs & 0x0f0f0f0fu) | spread4_to_bit4(qh >> (4 * w)));
      q[w + 4] = static_cast<int>(((qs >> 4) & 0x0f0f0f0fu) | spread4_to_bit4(qh >> (16 + 4 * w)));
    }
    *ds0 = *ds1 = f16_bits_to_f32(r[0]);
    *dm = f16_bits_to_f32(r[0] >> 16);
  }
};

template <>
struct RawUnit<kQ8_0> {  // {f16 d; i8 qs[32]}
  uint32_t h[17];
  __device__ __forceinline__ void load(const uint8_t* p, int) {
#pragma unroll
    for (int i = 0; i < 17; ++i) h[i] = ld_u16(p + 2 * i);
  }
  __device__ __forceinline__ void decode(int, int* q, float* ds0, float* ds1, float* dm) const {
#pragma unroll
    for (int w = 0; w < 8; ++w) q[w] = static_cast<int>(pack16(h[1 + 2 * w], h[2 + 2 * w]));
    *ds0 = *ds1 = f16_bits_to_f32(h[0]);
    *dm = 0.0f;
  }
};

// q4_K: {f16 d, dmin; u8 scales[12]; u8 qs[128]}. Sub-block s (32 elements) is the low (s even)
// or high (s odd) nibbles of qs[32*(s/2) .. +32].
template <>
struct RawUnit<kQ4_K> {
  uint4 hdr, qs0, qs1;
  __device__ __forceinline__ void load(const uint8_t* p, int sub) {
    const uint4* p16 = reinterpret_cast<const uint4*>(p);  // 144-byte blocks: 16-byte aligned
    hdr = p16[0];
    qs0 = p16[1 + 2 * (sub >> 1)];
    qs1 = p16[2 + 2 * (sub >> 1)];
  }
  __device__ __forceinline__ void decode(int sub, int* q, float* ds0, float* ds1, float* dm) const {
    const uint32_t w8[8] = {qs0.x, qs0.y, qs0.z, qs0.w, qs1.x, qs1.y, qs1.z, qs1.w};
    const int shift = (sub & 1) * 4;
#pragma unroll
    for (int w = 0; w < 8; ++w) q[w] = static_cast<int>((w8[w] >> shift) & 0x0f0f0f0fu);
    kquant_scale_min(hdr, sub, ds0, dm);
    *ds1 = *ds0;
  }
};

// q5_K: {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}: as q4_K plus bit s of qh[l] as the
// fifth bit of element l of sub-block s.
template <>
struct RawUnit<kQ5_K> {
  uint4 hdr, qh0, qh1, qs0, qs1;
  __device__ __forceinline__ void load(const uint8_t* p, int sub) {
    const uint4* p16 = reinterpret_cast<const uint4*>(p);  // 176-byte blocks: 16-byte aligned
    hdr = p16[0];
    qh0 = p16[1];
    qh1 = p16[2];
    qs0 = p16[3 + 2 * (sub >> 1)];
    qs1 = p16[4 + 2 * (sub >> 1)];
  }
  __device__ __forceinline__ void decode(int sub, int* q, float* ds0, float* ds1, float* dm) const {
    const uint32_t s8[8] = {qs0.x, qs0.y, qs0.z, qs0.w, qs1.x, qs1.y, qs1.z, qs1.w};
    const uint32_t h8[8] = {qh0.x, qh0.y, qh0.z, qh0.w, qh1.x, qh1.y, qh1.z, qh1.w};
    const int shift = (sub & 1) * 4;
#pragma unroll
    for (int w = 0; w < 8; ++w)
      q[w] = static_cast<int>(((s8[w] >> shift) & 0x0f0f0f0fu) | (((h8[w] >> sub) & 0x01010101u) << 4));
    kquant_scale_min(hdr, sub, ds0, dm);
    *ds1 = *ds0;
  }
};

// q6_K: {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}. Sub-block s = 4*n + g (n: 128-element
// half, g: 32-element group in it): element l takes ql[64n + 32(g&1) + l] (low nibble for g < 2,
// high for g >= 2) and bits 2g..2g+1 of qh[32n + l] as its top 2 bits, minus 32; elements 0..15
// of the sub-block use scales[2s], elements 16..31 scales[2s+1].
// 210-byte blocks are only 2-byte aligned; 16 u16 loads per 32 bytes would cost 34 registers per
// unit and spill, so each 32-byte run is read as 9 aligned words from its address rounded down to
// 4 and realigned with a funnel shift at decode. The extra bytes read stay inside the block or the
// block before it (a run that is 2 mod 4 never starts at the allocation base, which is aligned).
template <>
struct RawUnit<kQ6_K> {
  uint32_t ql[9], qh[9], sc, d, shift;
  __device__ __forceinline__ static void load_run(const uint8_t* p, uint32_t* r) {
    const uint32_t* a = reinterpret_cast<const uint32_t*>(reinterpret_cast<uintptr_t>(p) & ~uintptr_t{3});
#pragma unroll
    for (int i = 0; i < 9; ++i) r[i] = a[i];
  }
  __device__ __forceinline__ void load(const uint8_t* p, int sub) {
    const int n = sub >> 2, g = sub & 3;
    load_run(p + 64 * n + 32 * (g & 1), ql);  // both runs share p's alignment (offsets are x32)
    load_run(p + 128 + 32 * n, qh);
    sc = ld_u16(p + 192 + 2 * sub);
    d = ld_u16(p + 208);
    shift = (reinterpret_cast<uintptr_t>(p) & 2u) * 8;  // 0 or 16 bits
  }
  __device__ __forceinline__ void decode(int sub, int* q, float* ds0, float* ds1, float* dm) const {
    const int g = sub & 3;
    const int lshift = (g >> 1) * 4;
#pragma unroll
    for (int w = 0; w < 8; ++w) {
      const uint32_t lw = __funnelshift_r(ql[w], ql[w + 1], shift);
      const uint32_t hw = __funnelshift_r(qh[w], qh[w + 1], shift);
      const uint32_t l = (lw >> lshift) & 0x0f0f0f0fu;
      const uint32_t h = ((hw >> (2 * g)) & 0x03030303u) << 4;
      q[w] = static_cast<int>(bytes_minus<32>(l | h));
    }
    const float df = f16_bits_to_f32(d);
    *ds0 = df * static_cast<float>(static_cast<int8_t>(sc & 0xffu));
    *ds1 = df * static_cast<float>(static_cast<int8_t>((sc >> 8) & 0xffu));
    *dm = 0.0f;
  }
};

// ---------------------------------------------------------------------------------------------
using namespace ptx;

struct BufPtrs {
  int* a;       // [kBM][kPitch] activation int8 x4
  int* b;       // [kBN][kPitch] weight int8 x4
  uint2* ax;    // [kKD][kBM] {f16 da | pad, int32 sum}
  float* ds0;   // [kKD][kBN]
  float* ds1;   // [kKD][kBN] q6_K's second 16-element scale (== ds0 otherwise)
  float* dm;    // [kKD][kBN]
};

__device__ __forceinline__ BufPtrs buffer(int* smem, int buf) {
  int* base = smem + buf * kBufWords;
  BufPtrs p;
  p.ax = reinterpret_cast<uint2*>(base);  // first: 8-byte alignment for cp.async
  p.a = base + kAxWords;
  p.b = p.a + kTileWords;
  p.ds0 = reinterpret_cast<float*>(p.b + kTileWords);
  p.ds1 = p.ds0 + kScaleWords;
  p.dm = p.ds1 + kScaleWords;
  return p;
}

// Activations of k tile kt -> shared, asynchronously. Unit u = (token u/8, chunk u%8): 4 copies
// of the 32 quants and one of {d, sum}.
__device__ __forceinline__ void stage_activations(const uint8_t* __restrict__ q8, int nt, int nchunks,
                                                  int tile_i, int kt, const BufPtrs& s, int tid) {
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    const int u = tid + p * kThreads;
    const int tok = u >> 3, c = u & 7;
    const int tg = tile_i + tok, cg = kt * kKD + c;
    const bool ok = tg < nt && cg < nchunks;
    const uint8_t* src = ok ? q8 + (static_cast<size_t>(tg) * nchunks + cg) * kQ8BlockBytes : q8;
    const int n = ok ? 8 : 0;
    const uint32_t dst = smem_addr(s.a + tok * kPitch + c * 8);
#pragma unroll
    for (int i = 0; i < 4; ++i) cp_async8(dst + 8 * i, src + 8 * i, n);
    cp_async8(smem_addr(s.ax + c * kBM + tok), src + 32, n);
  }
}

template <int TYPE>
__device__ __forceinline__ const uint8_t* unit_ptr(const uint8_t* w, size_t row_bytes, int row, int kt,
                                                   int c) {
  const size_t blk = is_kquant(TYPE) ? static_cast<size_t>(kt) : static_cast<size_t>(kt) * kKD + c;
  return w + static_cast<size_t>(row) * row_bytes + blk * block_bytes(TYPE);
}

template <int TYPE>
__device__ __forceinline__ bool unit_valid(int od, int nchunks, int tile_j, int kt, int u) {
  return tile_j + (u >> 3) < od && kt * kKD + (u & 7) < nchunks;
}

template <int TYPE>
__device__ __forceinline__ void load_weights(const uint8_t* __restrict__ w, size_t row_bytes, int od,
                                             int nchunks, int tile_j, int kt, int tid,
                                             RawUnit<TYPE>* raw) {
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    const int u = tid + p * kThreads;
    if (unit_valid<TYPE>(od, nchunks, tile_j, kt, u))
      raw[p].load(unit_ptr<TYPE>(w, row_bytes, tile_j + (u >> 3), kt, u & 7), u & 7);
  }
}

template <int TYPE>
__device__ __forceinline__ void store_weights(const RawUnit<TYPE>* raw, int od, int nchunks, int tile_j,
                                              int kt, int tid, const BufPtrs& s) {
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    const int u = tid + p * kThreads;
    const int row = u >> 3, c = u & 7;
    int q[8];
    float ds0 = 0.0f, ds1 = 0.0f, dm = 0.0f;
    if (unit_valid<TYPE>(od, nchunks, tile_j, kt, u)) {
      raw[p].decode(c, q, &ds0, &ds1, &dm);
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) q[i] = 0;
    }
    int4* dst = reinterpret_cast<int4*>(s.b + row * kPitch + c * 8);
    dst[0] = make_int4(q[0], q[1], q[2], q[3]);
    dst[1] = make_int4(q[4], q[5], q[6], q[7]);
    s.ds0[c * kBN + row] = ds0;
    s.ds1[c * kBN + row] = ds1;
    s.dm[c * kBN + row] = dm;
  }
}

// Two CTAs per SM (<= 128 registers) where two 90 KB tiles fit in shared memory (sm_90+, 228 KB);
// sm_80/86/89 hold one anyway, so the register cap is lifted there rather than risking spills.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define QGATE_MMQ_MIN_BLOCKS 2
#else
#define QGATE_MMQ_MIN_BLOCKS 1
#endif

template <int TYPE, int KSPLIT, bool HAS_MIN>
__global__ void __launch_bounds__(kThreads, QGATE_MMQ_MIN_BLOCKS)
    mmq_gemm_kernel(const uint8_t* __restrict__ w, size_t row_bytes, const uint8_t* __restrict__ q8,
                    float* __restrict__ y, int nt, int od, int nchunks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  extern __shared__ __align__(16) int smem[];
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int tile_i = blockIdx.x * kBM;
  const int tile_j = blockIdx.y * kBN;
  const int wi = (warp & 1) * 32;   // warp's first token in the tile
  const int wj = (warp >> 1) * 16;  // warp's first weight row in the tile
  const int nkt = (nchunks + kKD - 1) / kKD;

  float acc[2][2][4];  // [nh: 8-row B fragment][h: 16-token A fragment][c register]
#pragma unroll
  for (int nh = 0; nh < 2; ++nh)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[nh][h][r] = 0.0f;

  RawUnit<TYPE> raw[2];

  // Prologue: tile 0 into buffer 0.
  {
    const BufPtrs s0 = buffer(smem, 0);
    stage_activations(q8, nt, nchunks, tile_i, 0, s0, tid);
    cp_async_commit();
    load_weights<TYPE>(w, row_bytes, od, nchunks, tile_j, 0, tid, raw);
    store_weights<TYPE>(raw, od, nchunks, tile_j, 0, tid, s0);
    cp_async_wait<0>();
    __syncthreads();
  }

  for (int kt = 0; kt < nkt; ++kt) {
    const int buf = kt & 1;
    const bool more = kt + 1 < nkt;
    // Buffer buf^1 was last read before the barrier that ended the previous iteration.
    if (more) {
      stage_activations(q8, nt, nchunks, tile_i, kt + 1, buffer(smem, buf ^ 1), tid);
      cp_async_commit();
      load_weights<TYPE>(w, row_bytes, od, nchunks, tile_j, kt + 1, tid, raw);
    }

    const BufPtrs s = buffer(smem, buf);
#pragma unroll
    for (int kd = 0; kd < kKD; ++kd) {
      int a[2][4], b[2][2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int* p = s.a + (wi + h * 16 + g) * kPitch + kd * 8 + t;
        a[h][0] = p[0];
        a[h][1] = p[8 * kPitch];
        a[h][2] = p[4];
        a[h][3] = p[8 * kPitch + 4];
      }
#pragma unroll
      for (int nh = 0; nh < 2; ++nh) {
        const int* p = s.b + (wj + nh * 8 + g) * kPitch + kd * 8 + t;
        b[nh][0] = p[0];
        b[nh][1] = p[4];
      }
      // Activation scale and sum of the tokens this lane's C registers hold: [h][g or g+8].
      float da[2][2], sa[2][2];
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          const uint2 v = s.ax[kd * kBM + wi + h * 16 + hr * 8 + g];
          da[h][hr] = f16_bits_to_f32(v.x);
          sa[h][hr] = static_cast<float>(static_cast<int>(v.y));
        }
      // Weight scales of the rows this lane's C registers hold: [nh][2t or 2t+1].
      float ds0[2][2], ds1[2][2], dm[2][2];
#pragma unroll
      for (int nh = 0; nh < 2; ++nh)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = kd * kBN + wj + nh * 8 + 2 * t + e;
          ds0[nh][e] = s.ds0[j];
          ds1[nh][e] = KSPLIT == 2 ? s.ds1[j] : 0.0f;
          dm[nh][e] = HAS_MIN ? s.dm[j] : 0.0f;
        }

#pragma unroll
      for (int nh = 0; nh < 2; ++nh)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          int c0[4] = {0, 0, 0, 0};
          int c1[4] = {0, 0, 0, 0};
          if constexpr (KSPLIT == 1) {
            mma_k32(c0, a[h][0], a[h][1], a[h][2], a[h][3], b[nh][0], b[nh][1]);
          } else {
            mma_k16(c0, a[h][0], a[h][1], b[nh][0]);  // k 0..15 of the chunk: scales[2s]
            mma_k16(c1, a[h][2], a[h][3], b[nh][1]);  // k 16..31: scales[2s+1]
          }
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int hr = r >> 1, e = r & 1;
            float v = ds0[nh][e] * static_cast<float>(c0[r]);
            if constexpr (KSPLIT == 2) v = fmaf(ds1[nh][e], static_cast<float>(c1[r]), v);
            if constexpr (HAS_MIN) v = fmaf(dm[nh][e], sa[h][hr], v);
            acc[nh][h][r] = fmaf(da[h][hr], v, acc[nh][h][r]);
          }
        }
    }

    if (more) {
      store_weights<TYPE>(raw, od, nchunks, tile_j, kt + 1, tid, buffer(smem, buf ^ 1));
      cp_async_wait<0>();
    }
    __syncthreads();
  }

  // Epilogue: C register r of fragment (nh, h) is token wi+16h+g+8(r>>1), row wj+8nh+2t+(r&1).
  // Even od and an 8-byte aligned y: a (row, row+1) pair is aligned and in range together.
  const bool pair_ok = (od & 1) == 0 && (reinterpret_cast<uintptr_t>(y) & 7) == 0;
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      const int tok = tile_i + wi + h * 16 + hr * 8 + g;
      if (tok >= nt) continue;
      float* yrow = y + static_cast<size_t>(tok) * od;
#pragma unroll
      for (int nh = 0; nh < 2; ++nh) {
        const int col = tile_j + wj + nh * 8 + 2 * t;
        const float v0 = acc[nh][h][2 * hr], v1 = acc[nh][h][2 * hr + 1];
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

template <int TYPE, int KSPLIT, bool HAS_MIN>
int launch_typed(const void* weights, int64_t od, int64_t k, const void* q8, int64_t nt, float* y,
                 cudaStream_t stream) {
  auto kernel = mmq_gemm_kernel<TYPE, KSPLIT, HAS_MIN>;
  // The 90 KB of dynamic shared memory needs an opt-in per device (the tile kernel is not launched
  // as a dependent, so the PDL answer is unused).
  bool pdl = false;
  if (const cudaError_t e = launch::prepare<mmq_gemm_kernel<TYPE, KSPLIT, HAS_MIN>>(static_cast<int>(kSmemBytes), &pdl);
      e != cudaSuccess)
    return static_cast<int>(e);
  const size_t row_bytes = static_cast<size_t>(k / (is_kquant(TYPE) ? 256 : 32)) * block_bytes(TYPE);
  const dim3 grid(static_cast<unsigned>((nt + kBM - 1) / kBM), static_cast<unsigned>((od + kBN - 1) / kBN));
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(static_cast<const uint8_t*>(weights), row_bytes,
                                                 static_cast<const uint8_t*>(q8), y, static_cast<int>(nt),
                                                 static_cast<int>(od), static_cast<int>(k / 32));
  return static_cast<int>(cudaGetLastError());
}

}  // namespace

bool mmq_supported_on_current_device() {
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
  return major >= 8;
}

int launch_mmq_gemm(int32_t type, const void* weights, int64_t od, int64_t k, const void* q8, int64_t nt,
                    float* y, void* stream) {
  const int bb = block_bytes(type);
  if (bb == 0 || weights == nullptr || q8 == nullptr || y == nullptr || nt <= 0 || od <= 0 || k <= 0)
    return static_cast<int>(cudaErrorInvalidValue);
  if (k % (is_kquant(type) ? 256 : 32) != 0) return static_cast<int>(cudaErrorInvalidValue);
  // int indexing inside the kernel: tokens, rows and chunks must fit an int; grid.y <= 65535.
  if (nt > INT_MAX || od > INT_MAX || k / 32 > INT_MAX || (od + kBN - 1) / kBN > 65535)
    return static_cast<int>(cudaErrorInvalidValue);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  // q6_K's 16-k sub-blocks take two k16 dots per chunk; the min-carrying types a rank-1 term.
  return launch::with_weight_type(type, [&](auto t) {
    constexpr int kType = decltype(t)::value;
    return launch_typed<kType, kType == kQ6_K ? 2 : 1, has_min(kType)>(weights, od, k, q8, nt, y, s);
  });
}

}  // namespace qgate::cuda
