// Quantizers from f32 to ggml blocks, and dequantizers back, one row at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "qgate/quant/block_formats.h"

namespace qgate::quant {

/// Quantizes k floats into row_bytes(type, k) bytes of blocks. k must be a multiple of the
/// block size. The result decodes (dequantize_row) to values close to the input.
void quantize_row(WeightType type, const float* x, void* blocks, int64_t k);
void dequantize_row(WeightType type, const void* blocks, float* y, int64_t k);

/// od rows of k elements, quantized row by row, rows laid out back to back.
std::vector<uint8_t> quantize_matrix(WeightType type, const float* x, int64_t od, int64_t k);

}  // namespace qgate::quant
