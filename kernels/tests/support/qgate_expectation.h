// For the tests of qgate's own kernels: the parity reference's expectation in qgate's numerics
// profile (qgate/reference/parity_reference.h), on raw blocks of a weight type, as y[nt][od].
#pragma once

#include <cstdint>
#include <vector>

#include "qgate/common/weight_types.h"
#include "qgate/reference/parity_reference.h"

namespace qgate::test_support {

inline reference::GemmProblem qgate_problem(quant::WeightType type, const void* weights, int64_t od, int64_t k,
                                            const float* x, int64_t nt) {
  return {static_cast<int32_t>(type), od, k, nt, static_cast<const uint8_t*>(weights), x};
}

/// The MMQ path: activations quantized per 32 as qgate's kernels do, exact integer dots, f64 sums.
inline std::vector<double> qgate_mmq_expectation(quant::WeightType type, const void* weights, int64_t od, int64_t k,
                                                 const float* x, int64_t nt, int threads = 0) {
  return reference::expect_mmq(reference::Numerics::qgate, qgate_problem(type, weights, od, k, x, nt), threads).y;
}

/// The f16 path: f16-rounded dequantized weights and activations, exact products summed in f64.
inline std::vector<double> qgate_f16_expectation(quant::WeightType type, const void* weights, int64_t od, int64_t k,
                                                 const float* x, int64_t nt, int threads = 0) {
  return reference::expect_f16(qgate_problem(type, weights, od, k, x, nt), threads).y;
}

}  // namespace qgate::test_support
