// The `ggml` quantizer recipe: the blocks that llama.cpp's reference CPU quantizer writes
// (quantize_row_*_ref in ggml-quants.c, which its quantize tool runs when no importance matrix
// is given), reproduced byte for byte for finite inputs. Each float operation below keeps that
// quantizer's operands, order and grouping, because a single differently rounded sum or
// product can move a code by one. The build compiles this file with -ffp-contract=off so no
// multiply and add are fused into one rounding (the reference is built without FMA contraction
// on x86-64).
#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "qgate/quant/half.h"
#include "qgate/quant/quantize.h"

namespace qgate::quant::detail {

namespace {

// ---- scalar helpers ----

// f16 bits as the reference stores them: round to nearest even, Inf beyond the f16 range, and
// any NaN as the canonical quiet NaN (0x7e00) with its sign. No saturation, unlike the qgate
// recipe's scales.
uint16_t f16_bits(float value) {
  if (std::isnan(value)) {
    return static_cast<uint16_t>((std::signbit(value) ? 0x8000u : 0u) | 0x7e00u);
  }
  return f32_to_f16(value);
}

// Round to nearest, ties to even, by adding 1.5 * 2^23: for |v| < 2^22 the sum's low 23 mantissa
// bits hold round(v) + 2^22. Larger |v| give a value that is wrong but the same as the
// reference's (whose range check is an assertion only, off in release builds).
int round_magic(float v) {
  const float shifted = v + 12582912.0f;
  const auto bits = std::bit_cast<int32_t>(shifted);
  return (bits & 0x007fffff) - 0x00400000;
}

// C's conversion of a float to an integer type as compiled for x86-64: truncate toward zero to
// 32 bits (cvttss2si), NaN and out-of-range values giving INT32_MIN; a narrower destination then
// keeps the low bits. Defined here for every input, so garbage in never means undefined behaviour.
int32_t truncate_to_i32(float v) {
  if (v > -2147483904.0f && v < 2147483648.0f) return static_cast<int32_t>(v);
  return INT32_MIN;
}
int to_i8(float v) { return static_cast<int8_t>(truncate_to_i32(v)); }
int to_u8(float v) { return static_cast<uint8_t>(truncate_to_i32(v)); }

// The element of largest magnitude, with its sign; the first one wins a tie. Zero for a block
// of zeros.
float signed_extreme(const float* x, int n) {
  float largest_abs = 0.0f;
  float extreme = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    if (largest_abs < a) {
      largest_abs = a;
      extreme = x[i];
    }
  }
  return extreme;
}

// ---- legacy 32-element types ----
// Scale d from the block's extreme (or its range), stored as the f16 of the unrounded d; the
// codes use id = 1/d of that unrounded d and truncate x*id + offset + 0.5 (half away from zero
// for the non-negative values here).

// q5 layout: code j's low nibble in qs[j % 16] (high nibble for j >= 16), its fifth bit at
// bit j of the little-endian 32-bit word qh.
void pack_five_bit(const int codes[kQK], uint8_t qs[kQK / 2], uint8_t qh[4]) {
  uint32_t high = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    const int a = codes[j];
    const int b = codes[j + kQK / 2];
    qs[j] = static_cast<uint8_t>((a & 0x0F) | ((b & 0x0F) << 4));
    high |= static_cast<uint32_t>((a >> 4) & 1) << j;
    high |= static_cast<uint32_t>((b >> 4) & 1) << (j + kQK / 2);
  }
  for (int i = 0; i < 4; ++i) qh[i] = static_cast<uint8_t>(high >> (8 * i));
}

// q4_0 (bits 4) and q5_0 (bits 5): d = extreme / -2^(bits-1), so the extreme lands on code 0;
// codes trunc(x*id + 2^(bits-1) + 0.5), capped at 2^bits - 1.
void symmetric_codes(const float* x, int bits, uint16_t* d_bits, int codes[kQK]) {
  const int half_range = 1 << (bits - 1);
  const float d = signed_extreme(x, kQK) / static_cast<float>(-half_range);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_bits = f16_bits(d);
  const float offset = static_cast<float>(half_range) + 0.5f;  // 8.5 or 16.5, exact
  const int top = 2 * half_range - 1;
  for (int j = 0; j < kQK; ++j) {
    const float scaled = x[j] * id;
    codes[j] = static_cast<uint8_t>(std::min(top, to_i8(scaled + offset)));
  }
}

void quantize_q4_0(const float* x, BlockQ4_0* b) {
  int codes[kQK];
  symmetric_codes(x, 4, &b->d, codes);
  for (int j = 0; j < kQK / 2; ++j) {
    b->qs[j] = static_cast<uint8_t>(codes[j] | (codes[j + kQK / 2] << 4));
  }
}

void quantize_q5_0(const float* x, BlockQ5_0* b) {
  int codes[kQK];
  symmetric_codes(x, 5, &b->d, codes);
  pack_five_bit(codes, b->qs, b->qh);
}

// q4_1 and q5_1: d = (max - min) / (2^bits - 1), m = min; codes trunc((x - min)*id + 0.5).
// q4_1 caps its codes at 15; q5_1 keeps the low 8 bits as they are.
void affine_codes(const float* x, int bits, uint16_t* d_bits, uint16_t* m_bits, int codes[kQK]) {
  float lo = FLT_MAX;
  float hi = -FLT_MAX;
  for (int j = 0; j < kQK; ++j) {
    if (x[j] < lo) lo = x[j];
    if (x[j] > hi) hi = x[j];
  }
  const float d = (hi - lo) / static_cast<float>((1 << bits) - 1);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  *d_bits = f16_bits(d);
  *m_bits = f16_bits(lo);
  for (int j = 0; j < kQK; ++j) {
    const float scaled = (x[j] - lo) * id;
    codes[j] = bits == 4 ? static_cast<uint8_t>(std::min(15, to_i8(scaled + 0.5f)))
                         : to_u8(scaled + 0.5f);
  }
}

void quantize_q4_1(const float* x, BlockQ4_1* b) {
  int codes[kQK];
  affine_codes(x, 4, &b->d, &b->m, codes);
  for (int j = 0; j < kQK / 2; ++j) {
    b->qs[j] = static_cast<uint8_t>(codes[j] | (codes[j + kQK / 2] << 4));
  }
}

void quantize_q5_1(const float* x, BlockQ5_1* b) {
  int codes[kQK];
  affine_codes(x, 5, &b->d, &b->m, codes);
  pack_five_bit(codes, b->qs, b->qh);
}

// q8_0: d = amax / 127, codes roundf(x*id) (half away from zero).
void quantize_q8_0(const float* x, BlockQ8_0* b) {
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) {
    const float a = std::fabs(x[j]);
    amax = amax > a ? amax : a;
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b->d = f16_bits(d);
  for (int j = 0; j < kQK; ++j) b->qs[j] = static_cast<int8_t>(to_i8(std::round(x[j] * id)));
}

// ---- q4_K and q5_K: weighted search of each sub-block's scale and min ----

// The search of one 32-element sub-block: codes q in 0..levels with x ~ scale*q - offset,
// offset >= 0, minimising sum w*(scale*q - offset - x)^2 over a few candidate grids.
struct SearchParams {
  int levels;         // 15 (q4_K) or 31 (q5_K)
  float first_shift;  // the first candidate's grid is (levels + first_shift) / range
  float shift_step;
  int steps;          // candidates first_shift + shift_step*s for s = 0..steps
};
constexpr SearchParams kQ4KSearch{15, -1.0f, 0.1f, 20};
constexpr SearchParams kQ5KSearch{31, -0.5f, 0.1f, 15};

struct SubBlockFit {
  float scale;
  float offset;  // what the block subtracts: -(the fitted origin), >= 0 (possibly -0.0)
};

int clamp_code(int v, int lo, int hi) { return std::max(lo, std::min(hi, v)); }

SubBlockFit search_scale_and_min(const float* x, const float* w, const SearchParams& p,
                                 uint8_t codes[kQK]) {
  float origin = x[0];  // the block minimum, at most 0; later the fitted origin
  float hi = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < kQK; ++i) {
    if (x[i] < origin) origin = x[i];
    if (x[i] > hi) hi = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (origin > 0) origin = 0;
  if (hi == origin) {
    std::fill(codes, codes + kQK, uint8_t{0});
    return {0.0f, -origin};
  }

  // The plain grid over [origin, hi] is the starting point.
  const float levels = static_cast<float>(p.levels);
  const float grid = levels / (hi - origin);
  float scale = 1.0f / grid;
  float best_error = 0;
  for (int i = 0; i < kQK; ++i) {
    codes[i] = static_cast<uint8_t>(clamp_code(round_magic(grid * (x[i] - origin)), 0, p.levels));
    float e = scale * static_cast<float>(codes[i]) + origin - x[i];
    e = e * e;
    best_error += w[i] * e;
  }

  // Each candidate grid gets the least-squares scale and origin of its codes; the best one
  // (weighted squared error) wins. An accepted candidate moves the origin the later grids use.
  uint8_t trial[kQK];
  for (int s = 0; s <= p.steps; ++s) {
    const float candidate = (p.first_shift + p.shift_step * static_cast<float>(s) + levels) / (hi - origin);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < kQK; ++i) {
      const int l = clamp_code(round_magic(candidate * (x[i] - origin)), 0, p.levels);
      trial[i] = static_cast<uint8_t>(l);
      const auto fl = static_cast<float>(l);
      sum_l += w[i] * fl;
      sum_l2 += w[i] * fl * fl;
      sum_xl += w[i] * fl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float fit_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float fit_origin = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (fit_origin > 0) {
      fit_origin = 0;
      fit_scale = sum_xl / sum_l2;
    }
    float error = 0;
    for (int i = 0; i < kQK; ++i) {
      float e = fit_scale * static_cast<float>(trial[i]) + fit_origin - x[i];
      e = e * e;
      error += w[i] * e;
    }
    if (error < best_error) {
      std::copy(trial, trial + kQK, codes);
      best_error = error;
      scale = fit_scale;
      origin = fit_origin;
    }
  }
  return {scale, -origin};
}

// Quantizes one q4_K/q5_K super-block: the search per sub-block (weights |x| + rms of the
// sub-block), 6-bit scales and mins against d = max scale / 63 and dmin = max min / 63, then
// the codes again against the stored scales. A sub-block whose stored scale is 0 keeps the
// search's codes. Writes the header fields and the 256 codes.
void quantize_k_affine(const float* x, const SearchParams& p, uint16_t* d_bits, uint16_t* dmin_bits,
                       uint8_t packed[kKScaleBytes], uint8_t codes[kQKK]) {
  constexpr int kSubBlocks = kQKK / kQK;
  float sub_scale[kSubBlocks];
  float sub_offset[kSubBlocks];
  float max_scale = 0;
  float max_offset = 0;
  for (int j = 0; j < kSubBlocks; ++j) {
    const float* xs = x + kQK * j;
    float sum_sq = 0;
    for (int l = 0; l < kQK; ++l) sum_sq += xs[l] * xs[l];
    const float rms = std::sqrt(sum_sq / static_cast<float>(kQK));
    float w[kQK];
    for (int l = 0; l < kQK; ++l) w[l] = rms + std::fabs(xs[l]);
    const SubBlockFit fit = search_scale_and_min(xs, w, p, codes + kQK * j);
    sub_scale[j] = fit.scale;
    sub_offset[j] = fit.offset;
    if (fit.scale > max_scale) max_scale = fit.scale;
    if (fit.offset > max_offset) max_offset = fit.offset;
  }

  const float to_scale6 = max_scale > 0 ? 63.0f / max_scale : 0.0f;
  const float to_offset6 = max_offset > 0 ? 63.0f / max_offset : 0.0f;
  uint8_t scale6[kSubBlocks];
  uint8_t offset6[kSubBlocks];
  for (int j = 0; j < kSubBlocks; ++j) {
    // Narrowed to a byte first, as the reference stores it, then capped at 63.
    scale6[j] = std::min<uint8_t>(63, static_cast<uint8_t>(round_magic(to_scale6 * sub_scale[j])));
    offset6[j] = std::min<uint8_t>(63, static_cast<uint8_t>(round_magic(to_offset6 * sub_offset[j])));
  }
  // Sub-blocks 0..3: 6 bits in bytes 0..3 (scales) and 4..7 (mins). Sub-blocks 4..7: low
  // nibbles in bytes 8..11 (scale low, min high), top 2 bits in the top of bytes 0..7.
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<uint8_t>(scale6[j] | ((scale6[j + 4] >> 4) << 6));
    packed[j + 4] = static_cast<uint8_t>(offset6[j] | ((offset6[j + 4] >> 4) << 6));
    packed[j + 8] = static_cast<uint8_t>((scale6[j + 4] & 0x0F) | ((offset6[j + 4] & 0x0F) << 4));
  }
  *d_bits = f16_bits(max_scale / 63.0f);
  *dmin_bits = f16_bits(max_offset / 63.0f);

  const float d = f16_to_f32(*d_bits);
  const float dmin = f16_to_f32(*dmin_bits);
  for (int j = 0; j < kSubBlocks; ++j) {
    const float step = d * static_cast<float>(scale6[j]);
    if (step == 0.0f) continue;
    const float offset = dmin * static_cast<float>(offset6[j]);
    for (int i = 0; i < kQK; ++i) {
      const float v = (x[kQK * j + i] + offset) / step;
      codes[kQK * j + i] = static_cast<uint8_t>(clamp_code(round_magic(v), 0, p.levels));
    }
  }
}

// Each 64 codes share 32 bytes: code 64c + l in the low nibble of byte 32c + l, code
// 64c + 32 + l in its high nibble. q5_K puts their fifth bits in bits 2c and 2c + 1 of qh[l].
void quantize_q4_K(const float* x, BlockQ4_K* b) {
  uint8_t codes[kQKK];
  quantize_k_affine(x, kQ4KSearch, &b->d, &b->dmin, b->scales, codes);
  for (int c = 0; c < kQKK / 64; ++c) {
    for (int l = 0; l < 32; ++l) {
      b->qs[32 * c + l] = static_cast<uint8_t>(codes[64 * c + l] | (codes[64 * c + 32 + l] << 4));
    }
  }
}

void quantize_q5_K(const float* x, BlockQ5_K* b) {
  uint8_t codes[kQKK];
  quantize_k_affine(x, kQ5KSearch, &b->d, &b->dmin, b->scales, codes);
  std::memset(b->qh, 0, sizeof(b->qh));
  for (int c = 0; c < kQKK / 64; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int lo = codes[64 * c + l];
      const int hi = codes[64 * c + 32 + l];
      b->qs[32 * c + l] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
      b->qh[l] |= static_cast<uint8_t>(((lo >> 4) & 1) << (2 * c));
      b->qh[l] |= static_cast<uint8_t>(((hi >> 4) & 1) << (2 * c + 1));
    }
  }
}

// ---- q6_K: scale search per 16 elements ----

constexpr float kEmptyGroup = 1e-15f;  // below this a group counts as all zeros

// Codes l + 32 with l in -32..31 and x ~ scale*l for one 16-element group: the grid that puts
// the extreme at -32, then 18 grids around it (-(32 + 0.1 t)/extreme, t = +-1..+-9); the one of
// largest (sum w x l)^2 / (sum w l^2), weights x^2, wins, with its least-squares scale.
float search_group_scale(const float* x, uint8_t codes[16]) {
  constexpr int kN = 16;
  constexpr int kHalf = 32;
  float largest_abs = 0;
  float extreme = 0;
  for (int i = 0; i < kN; ++i) {
    const float a = std::fabs(x[i]);
    if (a > largest_abs) {
      largest_abs = a;
      extreme = x[i];
    }
  }
  if (largest_abs < kEmptyGroup) {
    std::fill(codes, codes + kN, uint8_t{0});
    return 0.0f;
  }
  auto code_of = [&](float grid, float v) {
    return clamp_code(round_magic(grid * v), -kHalf, kHalf - 1);
  };
  // Sums of one grid: sum w*x*l and sum w*l*l, w = x^2.
  auto moments = [&](float grid, float* sum_xl, float* sum_ll) {
    *sum_xl = 0;
    *sum_ll = 0;
    for (int i = 0; i < kN; ++i) {
      const auto fl = static_cast<float>(code_of(grid, x[i]));
      const float w = x[i] * x[i];
      *sum_xl += w * x[i] * fl;
      *sum_ll += w * fl * fl;
    }
  };
  auto take_codes = [&](float grid) {
    for (int i = 0; i < kN; ++i) codes[i] = static_cast<uint8_t>(code_of(grid, x[i]) + kHalf);
  };

  float grid = static_cast<float>(-kHalf) / extreme;
  float sum_xl, sum_ll;
  moments(grid, &sum_xl, &sum_ll);
  take_codes(grid);
  float scale = sum_ll != 0.0f ? sum_xl / sum_ll : 0.0f;
  float best = scale * sum_xl;
  for (int t = -9; t <= 9; ++t) {
    if (t == 0) continue;
    grid = -(static_cast<float>(kHalf) + 0.1f * static_cast<float>(t)) / extreme;
    moments(grid, &sum_xl, &sum_ll);
    if (sum_ll > 0 && sum_xl * sum_xl > best * sum_ll) {
      take_codes(grid);
      scale = sum_xl / sum_ll;
      best = scale * sum_xl;
    }
  }
  return scale;
}

// q6_K layout: each 128-element half h uses ql[64h..], qh[32h..]; for l < 32, codes
// 128h + l, +32, +64, +96 take the low nibble of ql[l], of ql[l + 32], the high nibble of ql[l],
// of ql[l + 32], and bit pairs 0-1, 2-3, 4-5, 6-7 of qh[l].
void quantize_q6_K(const float* x, BlockQ6_K* b) {
  constexpr int kGroups = kQKK / 16;
  uint8_t codes[kQKK];
  float group_scale[kGroups];
  float signed_max = 0;
  float largest_abs = 0;
  for (int g = 0; g < kGroups; ++g) {
    group_scale[g] = search_group_scale(x + 16 * g, codes + 16 * g);
    const float a = std::fabs(group_scale[g]);
    if (a > largest_abs) {
      largest_abs = a;
      signed_max = group_scale[g];
    }
  }
  if (largest_abs < kEmptyGroup) {
    std::memset(b, 0, sizeof(*b));
    b->d = f16_bits(0.0f);
    return;
  }

  // The group of largest |scale| gets the int8 scale -128; the others are capped at 127.
  const float to_int8 = -128.0f / signed_max;
  b->d = f16_bits(1.0f / to_int8);
  for (int g = 0; g < kGroups; ++g) {
    b->scales[g] = static_cast<int8_t>(std::min(127, round_magic(to_int8 * group_scale[g])));
  }
  const float d = f16_to_f32(b->d);
  for (int g = 0; g < kGroups; ++g) {
    const float step = d * static_cast<float>(b->scales[g]);
    if (step == 0.0f) continue;  // keeps the search's codes
    for (int i = 0; i < 16; ++i) {
      const int l = clamp_code(round_magic(x[16 * g + i] / step), -32, 31);
      codes[16 * g + i] = static_cast<uint8_t>(l + 32);
    }
  }

  for (int h = 0; h < 2; ++h) {
    uint8_t* ql = b->ql + 64 * h;
    uint8_t* qh = b->qh + 32 * h;
    const uint8_t* c = codes + 128 * h;
    for (int l = 0; l < 32; ++l) {
      ql[l] = static_cast<uint8_t>((c[l] & 0x0F) | ((c[l + 64] & 0x0F) << 4));
      ql[l + 32] = static_cast<uint8_t>((c[l + 32] & 0x0F) | ((c[l + 96] & 0x0F) << 4));
      qh[l] = static_cast<uint8_t>((c[l] >> 4) | ((c[l + 32] >> 4) << 2) | ((c[l + 64] >> 4) << 4) |
                                   ((c[l + 96] >> 4) << 6));
    }
  }
}

template <typename Block>
void each_block(const float* x, void* blocks, int64_t k, int block_elems, void (*quantize)(const float*, Block*)) {
  auto* out = static_cast<Block*>(blocks);
  for (int64_t i = 0; i < k / block_elems; ++i) quantize(x + i * block_elems, out + i);
}

}  // namespace

void quantize_row_ggml(WeightType type, const float* x, void* blocks, int64_t k) {
  switch (type) {
    case WeightType::q4_0: return each_block<BlockQ4_0>(x, blocks, k, kQK, quantize_q4_0);
    case WeightType::q4_1: return each_block<BlockQ4_1>(x, blocks, k, kQK, quantize_q4_1);
    case WeightType::q5_0: return each_block<BlockQ5_0>(x, blocks, k, kQK, quantize_q5_0);
    case WeightType::q5_1: return each_block<BlockQ5_1>(x, blocks, k, kQK, quantize_q5_1);
    case WeightType::q8_0: return each_block<BlockQ8_0>(x, blocks, k, kQK, quantize_q8_0);
    case WeightType::q4_K: return each_block<BlockQ4_K>(x, blocks, k, kQKK, quantize_q4_K);
    case WeightType::q5_K: return each_block<BlockQ5_K>(x, blocks, k, kQKK, quantize_q5_K);
    case WeightType::q6_K: return each_block<BlockQ6_K>(x, blocks, k, kQKK, quantize_q6_K);
  }
  throw std::invalid_argument("quantize_row: unknown weight type");
}

}  // namespace qgate::quant::detail
