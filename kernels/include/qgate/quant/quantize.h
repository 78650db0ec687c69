// Quantizers from f32 to ggml blocks, and dequantizers back, one row at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "qgate/quant/block_formats.h"

namespace qgate::quant {

/// How a quantizer chooses scales and rounds. Both produce valid blocks of the same format;
/// they differ in the bytes.
/// - qgate: plain round-to-nearest-even per block against the f16-rounded scale (K-quants: the
///   sub-block range, no search). qgate's own recipe; the default.
/// - ggml: llama.cpp's reference CPU quantizer (quantize_row_*_ref in ggml-quants.c, what its
///   quantize tool runs without an importance matrix), reproduced byte for byte for finite
///   inputs as an x86-64 build of it (no FMA contraction) writes them. Legacy types code
///   trunc(x*id + offset + 0.5) with id = 1/d of the unrounded d (ties round up), q8_0 roundf
///   (ties away from zero); q4_K/q5_K use its weighted error-minimising scale/min search, q6_K
///   its scale search.
enum class QuantRecipe { qgate, ggml };

std::string_view to_string(QuantRecipe recipe);
/// "qgate" or "ggml", case-insensitively. Empty for anything else.
std::optional<QuantRecipe> parse_recipe(std::string_view name);

/// Quantizes k floats into row_bytes(type, k) bytes of blocks with the given recipe. k must be
/// a multiple of the block size. The result decodes (dequantize_row) to values close to the input.
void quantize_row(WeightType type, const float* x, void* blocks, int64_t k,
                  QuantRecipe recipe = QuantRecipe::qgate);
void dequantize_row(WeightType type, const void* blocks, float* y, int64_t k);

/// od rows of k elements, quantized row by row, rows laid out back to back.
std::vector<uint8_t> quantize_matrix(WeightType type, const float* x, int64_t od, int64_t k,
                                     QuantRecipe recipe = QuantRecipe::qgate);

namespace detail {
/// The ggml recipe (quantize_ggml.cpp); k already checked. Call quantize_row instead.
void quantize_row_ggml(WeightType type, const float* x, void* blocks, int64_t k);
}  // namespace detail

}  // namespace qgate::quant
