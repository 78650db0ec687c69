// A CPU kernel build for the tests that computes as ggml's CUDA backend dispatches on sm_90 (MMVQ
// at 8 tokens and fewer, the int8 mma MMQ above) and declares it through qgate_build_numerics() =
// "ggml". It is written from the block format specification alone and uses only kernel_abi.h, so it
// is an outside build as the gate sees one: faithful to ggml's arithmetic, but not qgate's code.
//
// MMVQ path (nt <= 8), per 32 activations x: d = amax/127, q = roundf(x/d), (d, Σx) kept as an f16
// pair, Σx reduced over 32 lanes by an xor butterfly. Per call (16 values for the 4- and 5-bit
// legacy types, 8 for q8_0, a pair of 32-value sub-blocks for the K-quants), accumulated in f32:
//   q4_0, q5_0      dw * (Σ u*q * d8 - off * s8)      u unsigned, off = 4 (q4_0), 8 (q5_0) per call
//   q4_1, q5_1      Σ u*q * f16(dw*d8) + f16(m*s8)/2  half products
//   q8_0            (dw * d8) * Σ w*q
//   q4_K, q5_K      d * Σ d8*(Σ u*q * sc) - dmin * Σ d8*(Σ q * m)   (no d*sc is formed)
//   q6_K            d * Σ d8*(Σ w*q * sc) per 16
//
// MMQ path, per 32 activations x: amax, d_inv = 127/amax, q = roundf(x*d_inv), d = 1/d_inv (an
// all-zero block gives q = 0, d = 0); Σx summed as a GPU warp does it (4 values per lane, then an
// xor butterfly over 8 lanes). Types whose ggml kernel reads (d, Σx) get both rounded to f16.
// Per 32-block term (C = exact int dot of weight ints and q), accumulated in f32 in K order:
//   q4_0            fma(C*dw, f16(d), sum)             ints nibble-8
//   q5_0, q8_0      fma(C*dw, d, sum)                  ints (5-bit)-16, int8
//   q4_1, q5_1      fma(dw*f16(d), C, sum); fma(m, f16(Σx), sum)
//   q4_K, q5_K      as q4_1 with dw = f16(d*sc), m = f16(-dmin*m') per 32
//   q6_K            per 128: tmp = Σ fma(C16a*sc_a + C16b*sc_b, d_x, tmp); sum = fma(tmp, d, sum)
// f16 path: weights dequantized in f32 and rounded to f16, activations rounded to f16, f32 sums.
//
// Two variants that change only a rounding (docs/parity.md, "Value and slack"):
//   QGATE_GGML_BUILD_EXACT_K_SCALES=1  rounds less than ggml: q4_K/q5_K keep d*sc and dmin*m in f32
//                                      (ggml rounds both to f16): it must pass the ggml profile;
//   QGATE_GGML_BUILD_F16_ACT_SCALE=1   rounds more: MMQ's q5_0, q8_0 and q6_K read the f16 activation
//                                      scale where ggml keeps it in f32: it must fail.
//
// Compiled with QGATE_GGML_BUILD_SCALE_BUG=1 it has one indexing bug: the last 32-block of every
// 256 values takes its scale (and min) from the block before it; for q6_K the second 16 of that
// block takes the first 16's sub-scale. Both paths see it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "qgate/kernel_abi.h"
#include "qgate/kernel_abi_support.h"

#ifndef QGATE_GGML_BUILD_SCALE_BUG
#define QGATE_GGML_BUILD_SCALE_BUG 0
#endif
#ifndef QGATE_GGML_BUILD_EXACT_K_SCALES
#define QGATE_GGML_BUILD_EXACT_K_SCALES 0
#endif
#ifndef QGATE_GGML_BUILD_F16_ACT_SCALE
#define QGATE_GGML_BUILD_F16_ACT_SCALE 0
#endif

namespace {

constexpr int kBlock = 32;

// ---- binary16 --------------------------------------------------------------------------------

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  float v;
  if (exp == 0) {
    v = std::ldexp(float(man), -24);  // zero or subnormal, exact
  } else if (exp == 31) {
    v = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    v = std::ldexp(float(man | 0x400u), int(exp) - 25);
  }
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  bits |= sign;
  std::memcpy(&v, &bits, 4);
  return v;
}

// Round to nearest, ties to even; subnormals kept; overflow to infinity.
uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 rounds past 65504
  const int e = int(ax >> 23) - 127;
  if (e >= -14) {
    const uint32_t man = ax & 0x7fffffu;
    uint32_t h = (uint32_t(e + 15) << 10) | (man >> 13);
    const uint32_t rest = man & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry moves into the exponent
    return uint16_t(sign | h);
  }
  float a;
  std::memcpy(&a, &ax, 4);
  const float units = std::nearbyint(a * 16777216.0f);  // in units of 2^-24, exact scaling
  return uint16_t(sign | uint16_t(units));
}

float round_f16(float f) { return f16_to_f32(f32_to_f16(f)); }

uint16_t load_u16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
uint32_t load_u32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

// ---- weight types ----------------------------------------------------------------------------

enum class Kind { q4_0, q4_1, q5_0, q5_1, q8_0, q4_K, q5_K, q6_K };

struct TypeInfo {
  Kind kind;
  int block_elems;  // 32 or 256
  int block_bytes;
};

bool type_info(int32_t type, TypeInfo* out) {
  switch (type) {
    case QGATE_TYPE_Q4_0: *out = {Kind::q4_0, 32, 18}; return true;
    case QGATE_TYPE_Q4_1: *out = {Kind::q4_1, 32, 20}; return true;
    case QGATE_TYPE_Q5_0: *out = {Kind::q5_0, 32, 22}; return true;
    case QGATE_TYPE_Q5_1: *out = {Kind::q5_1, 32, 24}; return true;
    case QGATE_TYPE_Q8_0: *out = {Kind::q8_0, 32, 34}; return true;
    case QGATE_TYPE_Q4_K: *out = {Kind::q4_K, 256, 144}; return true;
    case QGATE_TYPE_Q5_K: *out = {Kind::q5_K, 256, 176}; return true;
    case QGATE_TYPE_Q6_K: *out = {Kind::q6_K, 256, 210}; return true;
    default: return false;
  }
}

// One 32-block of weights, unpacked. MMQ uses w with (s1, s2) or, for q6_K, with sc and s1;
// the f16 path dequantizes value i as fa[i/16]*w[i] + fc.
struct Unpacked {
  int8_t w[kBlock];
  float s1 = 0, s2 = 0;     // MMQ scale and min term (see the file comment)
  int8_t sc[2] = {0, 0};    // q6_K: sub-scales of the two 16s
  float fa[2] = {0, 0}, fc = 0;
  // q4_K, q5_K as MMVQ reads them: the super-block's f16 d and dmin, this sub-block's 6-bit scale and min.
  float kd = 0, kdmin = 0;
  int16_t ksc = 0, km = 0;
};

// The 6-bit scale and min of sub-block j of a q4_K/q5_K super-block (12 packed bytes).
void k_scale_min(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Unpacks one raw block (block_elems values) into block_elems/32 entries of out.
void unpack_block(Kind kind, const uint8_t* p, Unpacked* out) {
  switch (kind) {
    case Kind::q4_0: {
      const float d = f16_to_f32(load_u16(p));
      for (int i = 0; i < 16; ++i) {
        out->w[i] = int8_t((p[2 + i] & 0x0f) - 8);
        out->w[i + 16] = int8_t((p[2 + i] >> 4) - 8);
      }
      out->s1 = d;
      out->fa[0] = out->fa[1] = d;
      return;
    }
    case Kind::q4_1: {
      const float d = f16_to_f32(load_u16(p)), m = f16_to_f32(load_u16(p + 2));
      for (int i = 0; i < 16; ++i) {
        out->w[i] = int8_t(p[4 + i] & 0x0f);
        out->w[i + 16] = int8_t(p[4 + i] >> 4);
      }
      out->s1 = d;
      out->s2 = m;
      out->fa[0] = out->fa[1] = d;
      out->fc = m;
      return;
    }
    case Kind::q5_0:
    case Kind::q5_1: {
      const bool has_min = kind == Kind::q5_1;
      const float d = f16_to_f32(load_u16(p));
      const float m = has_min ? f16_to_f32(load_u16(p + 2)) : 0.0f;
      const uint8_t* qhp = p + (has_min ? 4 : 2);
      const uint8_t* qs = qhp + 4;
      const uint32_t qh = load_u32(qhp);
      const int offset = has_min ? 0 : 16;
      for (int i = 0; i < 16; ++i) {
        out->w[i] = int8_t(((qs[i] & 0x0f) | (((qh >> i) & 1u) << 4)) - offset);
        out->w[i + 16] = int8_t(((qs[i] >> 4) | (((qh >> (i + 16)) & 1u) << 4)) - offset);
      }
      out->s1 = d;
      out->s2 = m;
      out->fa[0] = out->fa[1] = d;
      out->fc = m;
      return;
    }
    case Kind::q8_0: {
      const float d = f16_to_f32(load_u16(p));
      for (int i = 0; i < kBlock; ++i) out->w[i] = int8_t(p[2 + i]);
      out->s1 = d;
      out->fa[0] = out->fa[1] = d;
      return;
    }
    case Kind::q4_K:
    case Kind::q5_K: {
      const bool five = kind == Kind::q5_K;
      const float d = f16_to_f32(load_u16(p)), dmin = f16_to_f32(load_u16(p + 2));
      const uint8_t* scales = p + 4;
      const uint8_t* qh = p + 16;
      const uint8_t* qs = p + (five ? 48 : 16);
      for (int j = 0; j < 8; ++j) {
        Unpacked& u = out[j];
        const uint8_t* q = qs + 32 * (j / 2);
        const int shift = (j % 2) * 4;
        for (int i = 0; i < kBlock; ++i) {
          int v = (q[i] >> shift) & 0x0f;
          if (five) v |= ((qh[i] >> j) & 1) << 4;
          u.w[i] = int8_t(v);
        }
        int sc, m;
        k_scale_min(scales, j, &sc, &m);
        // ggml forms d*sc and -dmin*m as f16 products before the dot (the exact variant keeps f32).
        u.s1 = QGATE_GGML_BUILD_EXACT_K_SCALES ? d * float(sc) : round_f16(d * float(sc));
        u.s2 = QGATE_GGML_BUILD_EXACT_K_SCALES ? -dmin * float(m) : round_f16(-dmin * float(m));
        u.kd = d;
        u.kdmin = dmin;
        u.ksc = int16_t(sc);
        u.km = int16_t(m);
        u.fa[0] = u.fa[1] = d * float(sc);
        u.fc = -(dmin * float(m));
      }
      return;
    }
    case Kind::q6_K: {
      const uint8_t* ql = p;
      const uint8_t* qh = p + 128;
      const int8_t* scales = reinterpret_cast<const int8_t*>(p + 192);
      const float d = f16_to_f32(load_u16(p + 208));
      // Half h (128 values) uses ql[64h..], qh[32h..]; its 16-groups g = 0..7 use scale 8h+g.
      for (int h = 0; h < 2; ++h) {
        for (int quarter = 0; quarter < 4; ++quarter) {  // 32 values: quarter*32 .. +31 of the half
          Unpacked& u = out[4 * h + quarter];
          const uint8_t* l = ql + 64 * h + (quarter % 2) * 32;
          const int nib_shift = (quarter / 2) * 4;
          const int hi_shift = quarter * 2;
          for (int i = 0; i < kBlock; ++i) {
            const int lo = (l[i] >> nib_shift) & 0x0f;
            const int hi = (qh[32 * h + i] >> hi_shift) & 3;
            u.w[i] = int8_t((lo | (hi << 4)) - 32);
          }
          u.sc[0] = scales[8 * h + 2 * quarter];
          u.sc[1] = scales[8 * h + 2 * quarter + 1];
          u.s1 = d;
          u.fa[0] = d * float(u.sc[0]);
          u.fa[1] = d * float(u.sc[1]);
        }
      }
      return;
    }
  }
}

// The deliberate defect of the _bad build (see the file comment).
void inject_scale_bug(Kind kind, Unpacked* row, int64_t nb) {
  for (int64_t b = 7; b < nb; b += 8) {
    Unpacked& u = row[b];
    if (kind == Kind::q6_K) {
      u.sc[1] = u.sc[0];
      u.fa[1] = u.fa[0];
    } else {
      const Unpacked& prev = row[b - 1];
      u.s1 = prev.s1;
      u.s2 = prev.s2;
      u.fa[0] = prev.fa[0];
      u.fa[1] = prev.fa[1];
      u.fc = prev.fc;
      u.ksc = prev.ksc;
      u.km = prev.km;
    }
  }
}

// ---- activations -----------------------------------------------------------------------------

struct ActBlock {
  int8_t q[kBlock];
  float d = 0;    // f32 scale
  float d16 = 0;  // f16(d)
  float s16 = 0;  // f16(Σx)
};

int8_t to_int8(float v) {
  if (!(v == v)) return 0;  // NaN converts to 0, as the device conversion does
  return int8_t(std::clamp(v, -128.0f, 127.0f));
}

void quantize_act_block(const float* x, ActBlock* out) {
  float amax = 0.0f;
  for (int i = 0; i < kBlock; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  // Σx the way 8 lanes of 4 values each reduce it: sequential inside a lane, then xor 4, 2, 1.
  float lane[8];
  for (int g = 0; g < 8; ++g) lane[g] = ((x[4 * g] + x[4 * g + 1]) + x[4 * g + 2]) + x[4 * g + 3];
  for (int offset = 4; offset > 0; offset >>= 1) {
    float next[8];
    for (int g = 0; g < 8; ++g) next[g] = lane[g] + lane[g ^ offset];
    std::memcpy(lane, next, sizeof lane);
  }
  const float sum = lane[0];
  if (amax == 0.0f) {  // 127/0 = inf, 0*inf = NaN -> 0, 1/inf = 0
    std::memset(out->q, 0, sizeof out->q);
    out->d = 0.0f;
  } else {
    const float d_inv = 127.0f / amax;
    for (int i = 0; i < kBlock; ++i) out->q[i] = to_int8(std::round(x[i] * d_inv));
    out->d = 1.0f / d_inv;
  }
  out->d16 = round_f16(out->d);
  out->s16 = round_f16(sum);
}

int32_t dot32(const int8_t* a, const int8_t* b) {
  int32_t s = 0;
  for (int i = 0; i < kBlock; ++i) s += int32_t(a[i]) * int32_t(b[i]);
  return s;
}

int32_t dot16(const int8_t* a, const int8_t* b) {
  int32_t s = 0;
  for (int i = 0; i < 16; ++i) s += int32_t(a[i]) * int32_t(b[i]);
  return s;
}

float mmq_dot(Kind kind, const Unpacked* w, const ActBlock* a, int64_t nb) {
  float sum = 0.0f;
  switch (kind) {
    case Kind::q4_0:
      for (int64_t b = 0; b < nb; ++b) {
        const float cd = float(dot32(w[b].w, a[b].q)) * w[b].s1;
        sum = std::fma(cd, a[b].d16, sum);
      }
      break;
    case Kind::q5_0:
    case Kind::q8_0:
      for (int64_t b = 0; b < nb; ++b) {
        const float cd = float(dot32(w[b].w, a[b].q)) * w[b].s1;
        sum = std::fma(cd, QGATE_GGML_BUILD_F16_ACT_SCALE ? a[b].d16 : a[b].d, sum);
      }
      break;
    case Kind::q4_1:
    case Kind::q5_1:
    case Kind::q4_K:
    case Kind::q5_K:
      for (int64_t b = 0; b < nb; ++b) {
        const float dd = w[b].s1 * a[b].d16;
        sum = std::fma(dd, float(dot32(w[b].w, a[b].q)), sum);
        sum = std::fma(w[b].s2, a[b].s16, sum);
      }
      break;
    case Kind::q6_K:
      for (int64_t b0 = 0; b0 < nb; b0 += 4) {  // 128 values per partial
        float tmp = 0.0f;
        for (int64_t b = b0; b < b0 + 4; ++b) {
          const int32_t c = dot16(w[b].w, a[b].q) * w[b].sc[0] + dot16(w[b].w + 16, a[b].q + 16) * w[b].sc[1];
          tmp = std::fma(float(c), QGATE_GGML_BUILD_F16_ACT_SCALE ? a[b].d16 : a[b].d, tmp);
        }
        sum = std::fma(tmp, w[b0].s1, sum);
      }
      break;
  }
  return sum;
}

// ---- MMVQ (nt <= 8) ----------------------------------------------------------------------------

constexpr int64_t kMmvqMaxTokens = 8;

struct VecActBlock {
  int8_t q[kBlock];
  float d8 = 0;  // f16(d), widened
  float s8 = 0;  // f16(Σx), widened
};

void quantize_vec_act_block(const float* x, VecActBlock* out) {
  float amax = 0.0f;
  float lane[kBlock];
  for (int i = 0; i < kBlock; ++i) {
    amax = std::fmax(amax, std::fabs(x[i]));
    lane[i] = x[i];
  }
  for (int offset = 16; offset > 0; offset >>= 1) {  // one value per lane, xor butterfly
    float next[kBlock];
    for (int i = 0; i < kBlock; ++i) next[i] = lane[i] + lane[i ^ offset];
    std::memcpy(lane, next, sizeof lane);
  }
  const float d = amax / 127.0f;
  for (int i = 0; i < kBlock; ++i) out->q[i] = amax == 0.0f ? int8_t(0) : to_int8(std::round(x[i] / d));
  out->d8 = round_f16(d);
  out->s8 = round_f16(lane[0]);
}

// The unsigned weight value MMVQ's legacy dots read (the offset goes through Σx).
int unsigned_weight(Kind kind, int8_t w) { return kind == Kind::q4_0 ? w + 8 : kind == Kind::q5_0 ? w + 16 : w; }

float mmvq_dot(Kind kind, const Unpacked* w, const VecActBlock* a, int64_t nb) {
  float sum = 0.0f;
  switch (kind) {
    case Kind::q4_0:
    case Kind::q5_0:
    case Kind::q4_1:
    case Kind::q5_1:
      for (int64_t b = 0; b < nb; ++b)
        for (int call = 0; call < 2; ++call) {  // values 8c..8c+7 and 16+8c..16+8c+7
          int32_t sumi = 0;
          for (int j = 0; j < 8; ++j)
            for (int i : {8 * call + j, 16 + 8 * call + j}) sumi += unsigned_weight(kind, w[b].w[i]) * a[b].q[i];
          if (kind == Kind::q4_0 || kind == Kind::q5_0) {
            const float offset = kind == Kind::q4_0 ? 4.0f : 8.0f;
            sum += w[b].s1 * (float(sumi) * a[b].d8 - offset * a[b].s8);
          } else {
            sum += float(sumi) * round_f16(w[b].s1 * a[b].d8) + round_f16(w[b].s2 * a[b].s8) / 2.0f;
          }
        }
      break;
    case Kind::q8_0:
      for (int64_t b = 0; b < nb; ++b)
        for (int call = 0; call < 4; ++call) {
          int32_t sumi = 0;
          for (int i = 8 * call; i < 8 * call + 8; ++i) sumi += int32_t(w[b].w[i]) * a[b].q[i];
          sum += (w[b].s1 * a[b].d8) * float(sumi);
        }
      break;
    case Kind::q4_K:
    case Kind::q5_K:
      for (int64_t b = 0; b < nb; b += 2) {  // a pair of sub-blocks per call
        float sumf_d = 0.0f, sumf_m = 0.0f;
        for (int64_t s = b; s < b + 2 && s < nb; ++s) {
          int32_t dot1 = 0, dot2 = 0;
          for (int i = 0; i < kBlock; ++i) {
            dot1 += int32_t(w[s].w[i]) * a[s].q[i];
            dot2 += a[s].q[i];
          }
          sumf_d += a[s].d8 * float(dot1 * w[s].ksc);
          sumf_m += a[s].d8 * float(dot2 * w[s].km);
        }
        sum += w[b].kd * sumf_d - w[b].kdmin * sumf_m;
      }
      break;
    case Kind::q6_K:
      for (int64_t b = 0; b < nb; ++b) {
        const float sumf = a[b].d8 * float(dot16(w[b].w, a[b].q) * w[b].sc[0]) +
                           a[b].d8 * float(dot16(w[b].w + 16, a[b].q + 16) * w[b].sc[1]);
        sum += w[b].s1 * sumf;
      }
      break;
  }
  return sum;
}

// f32 sums over f16-rounded operands, in 8 interleaved lanes (k is a multiple of 32).
float f16_dot(const float* w, const float* x, int64_t k) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < k; i += 8) {
    for (int l = 0; l < 8; ++l) lane[l] = std::fma(w[i + l], x[i + l], lane[l]);
  }
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

template <typename Fn>
void parallel_for(int64_t n, int threads, Fn&& fn) {
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(threads, n));
  if (workers == 1) {
    fn(int64_t(0), n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(size_t(workers));
  for (int64_t t = 0; t < workers; ++t) {
    const int64_t begin = n * t / workers, end = n * (t + 1) / workers;
    pool.emplace_back([&fn, begin, end] { fn(begin, end); });
  }
  for (auto& th : pool) th.join();
}

#if QGATE_GGML_BUILD_SCALE_BUG
constexpr const char* kBuildName = "ggml-cpu-test-bad";
#elif QGATE_GGML_BUILD_EXACT_K_SCALES
constexpr const char* kBuildName = "ggml-cpu-test-exact-k-scales";
#elif QGATE_GGML_BUILD_F16_ACT_SCALE
constexpr const char* kBuildName = "ggml-cpu-test-f16-act-scale";
#else
constexpr const char* kBuildName = "ggml-cpu-test";
#endif

const qgate_build_info kInfo = {QGATE_ABI_VERSION, kBuildName, "1.0", "", "cpu", ""};

using qgate::abi::write_error;

}  // namespace

struct qgate_context {
  int32_t path = QGATE_PATH_F16;
  int threads = 1;
  std::string last_error;
};

struct qgate_gemm {
  qgate_context* ctx = nullptr;
  Kind kind = Kind::q4_0;
  int64_t od = 0, k = 0, nb = 0, max_nt = 0;
  std::vector<Unpacked> blocks;  // od * nb
  std::vector<float> wf16;       // od * k, f16 path only
};

namespace {

qgate_status fail(qgate_context* ctx, qgate_status status, const std::string& message) {
  if (ctx != nullptr) ctx->last_error = message;
  return status;
}

}  // namespace

extern "C" {

QGATE_EXPORT uint32_t qgate_abi_version(void) { return QGATE_ABI_VERSION; }

QGATE_EXPORT const qgate_build_info* qgate_get_build_info(void) { return &kInfo; }

QGATE_EXPORT const char* qgate_build_numerics(void) { return "ggml"; }

QGATE_EXPORT qgate_status qgate_context_create(const qgate_context_options* options, qgate_context** out,
                                               char* error_buf, size_t error_buf_size) {
  if (out == nullptr) {
    write_error(error_buf, error_buf_size, "out is NULL");
    return QGATE_ERR_INVALID_ARGUMENT;
  }
  *out = nullptr;
  if (options == nullptr || options->struct_size < sizeof(qgate_context_options)) {
    write_error(error_buf, error_buf_size, "options are NULL or smaller than qgate_context_options");
    return QGATE_ERR_INVALID_ARGUMENT;
  }
  if (options->backend == QGATE_BACKEND_CUDA) {
    write_error(error_buf, error_buf_size, std::string(kBuildName) + " is a CPU-only build: no CUDA backend");
    return QGATE_ERR_UNSUPPORTED;
  }
  if (options->backend != QGATE_BACKEND_CPU) {
    write_error(error_buf, error_buf_size, "unknown backend " + std::to_string(options->backend));
    return QGATE_ERR_INVALID_ARGUMENT;
  }
  int32_t path = options->path;
  if (path == QGATE_PATH_FROM_ENV) {
    std::string error;
    if (!qgate::abi::path_from_env(&path, &error)) {
      write_error(error_buf, error_buf_size, error);
      return QGATE_ERR_INVALID_ARGUMENT;
    }
  }
  if (path != QGATE_PATH_F16 && path != QGATE_PATH_MMQ) {
    write_error(error_buf, error_buf_size, "unknown path " + std::to_string(path));
    return QGATE_ERR_INVALID_ARGUMENT;
  }
  if (options->cpu_threads < 0) {
    write_error(error_buf, error_buf_size, "cpu_threads must not be negative");
    return QGATE_ERR_INVALID_ARGUMENT;
  }
  auto* ctx = new (std::nothrow) qgate_context;
  if (ctx == nullptr) {
    write_error(error_buf, error_buf_size, "out of memory");
    return QGATE_ERR_OUT_OF_MEMORY;
  }
  ctx->path = path;
  const unsigned hw = std::thread::hardware_concurrency();
  ctx->threads = options->cpu_threads > 0 ? options->cpu_threads : int(hw > 0 ? hw : 1);
  *out = ctx;
  return QGATE_OK;
}

QGATE_EXPORT void qgate_context_destroy(qgate_context* ctx) { delete ctx; }

QGATE_EXPORT int32_t qgate_context_path(const qgate_context* ctx) {
  return ctx != nullptr ? ctx->path : QGATE_PATH_F16;
}

QGATE_EXPORT const char* qgate_context_last_error(const qgate_context* ctx) {
  return ctx != nullptr ? ctx->last_error.c_str() : "no context";
}

QGATE_EXPORT qgate_status qgate_gemm_prepare(qgate_context* ctx, int32_t type, int64_t od, int64_t k,
                                             const void* weight_blocks, int64_t max_nt, qgate_gemm** out) {
  if (ctx == nullptr || out == nullptr) return QGATE_ERR_INVALID_ARGUMENT;
  *out = nullptr;
  TypeInfo info;
  if (!type_info(type, &info)) return fail(ctx, QGATE_ERR_INVALID_ARGUMENT, "unknown weight type " + std::to_string(type));
  if (od <= 0 || k <= 0 || max_nt <= 0 || weight_blocks == nullptr)
    return fail(ctx, QGATE_ERR_INVALID_ARGUMENT, "od, k and max_nt must be positive and weights not NULL");
  if (k % info.block_elems != 0)
    return fail(ctx, QGATE_ERR_INVALID_ARGUMENT,
                "k=" + std::to_string(k) + " is not a multiple of " + std::to_string(info.block_elems));
  try {
    auto* g = new qgate_gemm;
    g->ctx = ctx;
    g->kind = info.kind;
    g->od = od;
    g->k = k;
    g->nb = k / kBlock;
    g->max_nt = max_nt;
    g->blocks.resize(size_t(od * g->nb));
    const auto* raw = static_cast<const uint8_t*>(weight_blocks);
    const int64_t blocks_per_row = k / info.block_elems;
    const int sub = info.block_elems / kBlock;
    for (int64_t o = 0; o < od; ++o) {
      Unpacked* row = g->blocks.data() + o * g->nb;
      for (int64_t b = 0; b < blocks_per_row; ++b)
        unpack_block(info.kind, raw + (o * blocks_per_row + b) * info.block_bytes, row + b * sub);
      if (QGATE_GGML_BUILD_SCALE_BUG) inject_scale_bug(info.kind, row, g->nb);
    }
    if (ctx->path == QGATE_PATH_F16) {
      g->wf16.resize(size_t(od * k));
      for (int64_t o = 0; o < od; ++o) {
        for (int64_t b = 0; b < g->nb; ++b) {
          const Unpacked& u = g->blocks[size_t(o * g->nb + b)];
          float* dst = g->wf16.data() + o * k + b * kBlock;
          for (int i = 0; i < kBlock; ++i) dst[i] = round_f16(u.fa[i / 16] * float(u.w[i]) + u.fc);
        }
      }
    }
    *out = g;
    return QGATE_OK;
  } catch (const std::bad_alloc&) {
    return fail(ctx, QGATE_ERR_OUT_OF_MEMORY, "out of memory preparing the weights");
  } catch (const std::exception& e) {
    return fail(ctx, QGATE_ERR_INTERNAL, e.what());
  }
}

QGATE_EXPORT qgate_status qgate_gemm_run(qgate_gemm* gemm, const float* x, int64_t nt, float* y, void* stream) {
  (void)stream;
  if (gemm == nullptr) return QGATE_ERR_INVALID_ARGUMENT;
  qgate_context* ctx = gemm->ctx;
  if (x == nullptr || y == nullptr) return fail(ctx, QGATE_ERR_INVALID_ARGUMENT, "x or y is NULL");
  if (nt < 1 || nt > gemm->max_nt)
    return fail(ctx, QGATE_ERR_INVALID_ARGUMENT,
                "nt=" + std::to_string(nt) + " outside 1.." + std::to_string(gemm->max_nt));
  try {
    const int64_t k = gemm->k, od = gemm->od, nb = gemm->nb;
    if (ctx->path == QGATE_PATH_MMQ && nt <= kMmvqMaxTokens) {
      std::vector<VecActBlock> act(size_t(nt * nb));
      for (int64_t t = 0; t < nt; ++t)
        for (int64_t b = 0; b < nb; ++b) quantize_vec_act_block(x + t * k + b * kBlock, &act[size_t(t * nb + b)]);
      parallel_for(od, ctx->threads, [&](int64_t o0, int64_t o1) {
        for (int64_t t = 0; t < nt; ++t)
          for (int64_t o = o0; o < o1; ++o)
            y[t * od + o] = mmvq_dot(gemm->kind, gemm->blocks.data() + o * nb, act.data() + t * nb, nb);
      });
    } else if (ctx->path == QGATE_PATH_MMQ) {
      std::vector<ActBlock> act(size_t(nt * nb));
      parallel_for(nt, ctx->threads, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
          for (int64_t b = 0; b < nb; ++b) quantize_act_block(x + t * k + b * kBlock, &act[size_t(t * nb + b)]);
      });
      parallel_for(od, ctx->threads, [&](int64_t o0, int64_t o1) {
        for (int64_t t = 0; t < nt; ++t)
          for (int64_t o = o0; o < o1; ++o)
            y[t * od + o] = mmq_dot(gemm->kind, gemm->blocks.data() + o * nb, act.data() + t * nb, nb);
      });
    } else {
      std::vector<float> xh(size_t(nt * k));
      for (int64_t i = 0; i < nt * k; ++i) xh[size_t(i)] = round_f16(x[i]);
      parallel_for(od, ctx->threads, [&](int64_t o0, int64_t o1) {
        for (int64_t t = 0; t < nt; ++t)
          for (int64_t o = o0; o < o1; ++o) y[t * od + o] = f16_dot(gemm->wf16.data() + o * k, xh.data() + t * k, k);
      });
    }
    return QGATE_OK;
  } catch (const std::bad_alloc&) {
    return fail(ctx, QGATE_ERR_OUT_OF_MEMORY, "out of memory in run");
  } catch (const std::exception& e) {
    return fail(ctx, QGATE_ERR_INTERNAL, e.what());
  }
}

QGATE_EXPORT int64_t qgate_gemm_resident_bytes(const qgate_gemm* gemm) {
  if (gemm == nullptr) return 0;
  return int64_t(gemm->blocks.size() * sizeof(Unpacked) + gemm->wf16.size() * sizeof(float));
}

QGATE_EXPORT void qgate_gemm_release(qgate_gemm* gemm) { delete gemm; }

}  // extern "C"
