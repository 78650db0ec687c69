// ggml's block formats read from their specification, one element at a time. Written for
// clarity, not speed: the parity reference decodes each weight row once per case.
#include "block_decode.h"

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

namespace qgate::reference::detail {

namespace {

enum TypeId : int32_t { q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q4_K = 12, q5_K = 13, q6_K = 14 };

uint16_t read_u16(const uint8_t* p) { return uint16_t(p[0] | (p[1] << 8)); }
uint32_t read_u32(const uint8_t* p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24);
}

// Legacy 4-bit quants: element j < 16 is the low nibble of byte j, element j >= 16 the high
// nibble of byte j - 16.
int32_t nibble(const uint8_t* qs, int j) { return j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4); }

// Legacy block: [d][m?][qh[4]?][qs] (q8_0: [d][int8 x 32]).
void decode_legacy(int32_t type, const uint8_t* block, StoredGroup* g) {
  g->d = read_u16(block);
  const uint8_t* p = block + 2;
  if (type == q4_1 || type == q5_1) {
    g->m = read_u16(p);
    p += 2;
  }
  if (type == q8_0) {
    for (int j = 0; j < kGroup; ++j) g->stored[j] = int8_t(p[j]);
    return;
  }
  uint32_t high = 0;
  const bool five_bit = type == q5_0 || type == q5_1;
  if (five_bit) {
    high = read_u32(p);
    p += 4;
  }
  for (int j = 0; j < kGroup; ++j)
    g->stored[j] = nibble(p, j) | (five_bit ? int32_t((high >> j) & 1u) << 4 : 0);
}

// q4_K/q5_K 12 scale bytes hold eight 6-bit scales and eight 6-bit mins. Sub-block j < 4: scale
// in the low 6 bits of byte j, min in the low 6 bits of byte j + 4. j >= 4: the low 4 bits come
// from byte j + 4 (scale: low nibble, min: high nibble) and the top 2 bits from the top bits of
// byte j - 4 (scale) or byte j (min).
void k_scale_and_min(const uint8_t* s, int j, int32_t* scale, int32_t* min) {
  if (j < 4) {
    *scale = s[j] & 0x3F;
    *min = s[j + 4] & 0x3F;
    return;
  }
  *scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
  *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
}

// q4_K: [d][dmin][scales 12][qs 128]; q5_K: [d][dmin][scales 12][qh 32][qs 128]. Sub-block j
// (elements 32j..32j+31) reads byte 32*(j/2) + l of qs, low nibble for even j, high for odd;
// q5_K's fifth bit of element l is bit j of qh[l].
void decode_k45(int32_t type, const uint8_t* block, StoredGroup* groups) {
  const uint16_t d = read_u16(block), dmin = read_u16(block + 2);
  const uint8_t* scales = block + 4;
  const uint8_t* qh = type == q5_K ? block + 16 : nullptr;
  const uint8_t* qs = block + (type == q5_K ? 48 : 16);
  for (int j = 0; j < 8; ++j) {
    StoredGroup& g = groups[j];
    g.d = d;
    g.m = dmin;
    int32_t scale, min;
    k_scale_and_min(scales, j, &scale, &min);
    g.scale[0] = g.scale[1] = scale;
    g.min = min;
    for (int l = 0; l < kGroup; ++l) {
      int32_t v = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF;
      if (qh) v |= ((qh[l] >> j) & 1) << 4;
      g.stored[l] = v;
    }
  }
}

// q6_K: [ql 128][qh 64][int8 scales 16][d]. Element i: half h = i / 128, l = i % 32, quarter
// q = (i % 128) / 32. Low 4 bits: byte 64h + 32*(q % 2) + l of ql, low nibble for q < 2, high
// otherwise; high 2 bits: bits 2q, 2q+1 of qh[32h + l]. Scale of element i: scales[i / 16].
void decode_q6_K(const uint8_t* block, StoredGroup* groups) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
  const uint16_t d = read_u16(block + 208);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, l = i % 32, q = (i % 128) / 32;
    const int32_t low = (ql[64 * h + 32 * (q % 2) + l] >> (q < 2 ? 0 : 4)) & 0xF;
    const int32_t high = (qh[32 * h + l] >> (2 * q)) & 0x3;
    groups[i / 32].stored[i % 32] = low | (high << 4);
  }
  for (int j = 0; j < 8; ++j) {
    groups[j].d = d;
    groups[j].scale[0] = scales[2 * j];
    groups[j].scale[1] = scales[2 * j + 1];
  }
}

}  // namespace

FormatFacts format_facts(int32_t type) {
  switch (type) {
    case q4_0: return {32, 18, false, false};
    case q4_1: return {32, 20, false, true};
    case q5_0: return {32, 22, false, false};
    case q5_1: return {32, 24, false, true};
    case q8_0: return {32, 34, false, false};
    case q4_K: return {256, 144, true, true};
    case q5_K: return {256, 176, true, true};
    case q6_K: return {256, 210, true, false};
    default: break;
  }
  throw std::invalid_argument("parity reference: unknown weight type id " + std::to_string(type));
}

void decode_row(int32_t type, const uint8_t* row, int64_t k, StoredGroup* out) {
  const FormatFacts f = format_facts(type);
  const int64_t blocks = k / f.block_elements;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* block = row + b * int64_t(f.block_bytes);
    if (!f.k_quant) {
      out[b] = StoredGroup{};
      decode_legacy(type, block, &out[b]);
    } else {
      StoredGroup* groups = out + 8 * b;
      for (int j = 0; j < 8; ++j) groups[j] = StoredGroup{};
      if (type == q6_K) decode_q6_K(block, groups);
      else decode_k45(type, block, groups);
    }
  }
}

double half_value(uint16_t bits) {
  const int sign = (bits >> 15) ? -1 : 1;
  const int exponent = (bits >> 10) & 0x1F;
  const int fraction = bits & 0x3FF;
  if (exponent == 0x1F) return fraction ? NAN : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(double(fraction), -24);
  return sign * std::ldexp(double(fraction | 0x400), exponent - 25);
}

double half_spacing(double value) {
  const double a = std::fabs(value);
  if (!(a >= std::ldexp(1.0, -14))) return std::ldexp(1.0, -24);  // subnormal range (and 0)
  int exponent;
  std::frexp(a, &exponent);  // a = f * 2^exponent, f in [0.5, 1)
  return std::ldexp(1.0, exponent - 11);
}

double round_to_half(double value) {
  if (std::isnan(value) || std::isinf(value)) return value;
  const double spacing = half_spacing(value);
  const double rounded = std::nearbyint(value / spacing) * spacing;  // exact scaling by 2^n
  return std::fabs(rounded) > 65504.0 ? std::copysign(INFINITY, value) : rounded;
}

void dequantize_exact(int32_t type, const StoredGroup* groups, int64_t k, double* out) {
  for (int64_t g = 0; g < k / kGroup; ++g) {
    const StoredGroup& s = groups[g];
    const double d = half_value(s.d), m = half_value(s.m);
    for (int j = 0; j < kGroup; ++j) {
      const double q = s.stored[j];
      double w = 0;
      switch (type) {
        case q4_0: w = d * (q - 8); break;
        case q5_0: w = d * (q - 16); break;
        case q8_0: w = d * q; break;
        case q4_1:
        case q5_1: w = d * q + m; break;
        case q4_K:
        case q5_K: w = d * s.scale[0] * q - m * s.min; break;
        case q6_K: w = d * s.scale[j / 16] * (q - 32); break;
        default: throw std::invalid_argument("parity reference: unknown weight type id " + std::to_string(type));
      }
      out[g * kGroup + j] = w;
    }
  }
}

}  // namespace qgate::reference::detail
