// Reads ggml's block formats element by element, as the format specification describes them,
// into one record per 32-element group. Private to the parity reference.
#pragma once

#include <cstddef>
#include <cstdint>

namespace qgate::reference::detail {

inline constexpr int kGroup = 32;

/// One 32-element group of a weight row, exactly as stored.
struct StoredGroup {
  int32_t stored[kGroup];  // the stored integer: q4 0..15, q5 0..31, q8 -128..127, q6_K 0..63
  uint16_t d = 0;          // f16 bits: the block's d, or the super-block's d (K-quants)
  uint16_t m = 0;          // f16 bits: q4_1/q5_1 m, q4_K/q5_K dmin; 0 for the other types
  int32_t scale[2] = {1, 1};  // K: the 6-bit sub-scale (both halves); q6_K: the int8 scale of
                              // elements 0..15 and of 16..31; 1 for the legacy types
  int32_t min = 0;            // q4_K/q5_K: the 6-bit sub-min
};

/// The facts of a type the reference needs; throws std::invalid_argument for an unknown id.
struct FormatFacts {
  int block_elements;  // 32 or 256
  size_t block_bytes;
  bool k_quant;        // q4_K, q5_K, q6_K
  bool has_min;        // q4_1, q5_1, q4_K, q5_K
};
FormatFacts format_facts(int32_t type);

/// Decodes one row of k elements into k/32 groups.
void decode_row(int32_t type, const uint8_t* row, int64_t k, StoredGroup* out);

/// The exact value of a stored f16 (IEEE binary16) as a double.
double half_value(uint16_t bits);
/// The double nearest to `value` that an f16 can hold (round to nearest, ties to even; overflow
/// gives infinity).
double round_to_half(double value);
/// The spacing of f16 values at |value| (2^-24 below the normal range).
double half_spacing(double value);

/// The row's elements dequantized exactly (in f64), as the format defines them.
void dequantize_exact(int32_t type, const StoredGroup* groups, int64_t k, double* out);

}  // namespace qgate::reference::detail
