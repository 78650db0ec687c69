// CPU references that the parity gate compares kernel outputs with. Both are plain, clear and
// multi-threaded over output rows; they are the definition of right, not a fast path.
#pragma once

#include <cstdint>

#include "qgate/quant/block_formats.h"

namespace qgate::quant {

/// The MMQ reference (seed, section 3.2): y[t][o] = sum_b da * (ds * sum(q_w*q_a) + dm * sum(q_a))
/// with exact integer dots and the block terms summed in f64. y is [nt][od].
void reference_mmq(WeightType type, const void* weights, int64_t od, int64_t k, const float* x,
                   int64_t nt, double* y);

/// The f16-path reference: weights dequantized and rounded to f16, activations rounded to f16,
/// products summed in f64. y is [nt][od].
void reference_f16(WeightType type, const void* weights, int64_t od, int64_t k, const float* x,
                   int64_t nt, double* y);

/// The same two references on an explicit number of threads (<= 0: all hardware threads).
/// Each output is summed in one fixed order, so the result does not depend on `threads`.
void reference_mmq(WeightType type, const void* weights, int64_t od, int64_t k, const float* x,
                   int64_t nt, double* y, int threads);
void reference_f16(WeightType type, const void* weights, int64_t od, int64_t k, const float* x,
                   int64_t nt, double* y, int threads);

}  // namespace qgate::quant
