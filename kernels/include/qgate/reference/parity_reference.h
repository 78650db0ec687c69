// The parity reference: what a kernel build's output must be, computed from ggml's block format
// specification alone, in the numerics the build declares. It shares no code with qgate's own
// kernels (CPU or CUDA): it decodes blocks itself, quantizes activations itself and sums in f64,
// so a sweep of qgate's CPU backend against it tests the maths, not the plumbing.
//
// Three expectations exist for one GEMM problem:
//   expect_mmq(profile)  the MMQ path in a numerics profile (qgate's contract, or ggml's CUDA MMQ),
//                        with each element's error allowance (docs/parity.md);
//   expect_f16           the f16 path: f16-rounded dequantized weights and activations;
//   exact_product        dequantized weights times the f32 activations, in f64: no profile at all,
//                        so NMSE against it catches wrong maths whatever profile was declared.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace qgate::reference {

/// The arithmetic a kernel's MMQ path follows, which the reference reproduces bit for bit up to
/// the f32 accumulation order.
enum class Numerics {
  qgate,  // per 32: d = f16(amax/127), q = round-half-even(x/d), min term d*sum(q)
  // ggml's CUDA MMQ (sm_80+, the int8 mma path): q = roundf(x*127/amax), d = 1/(127/amax); q4_0,
  // q4_1, q5_1, q4_K and q5_K keep (f16(d), f16(sum of the f32 x)), q5_0, q8_0 and q6_K keep d in
  // f32; the legacy offsets and q6_K's 32 are folded into the integers; q4_K/q5_K scales are f16
  // products f16(d*sc), f16(-dmin*m). ggml builds with fast math, so 127/amax and 1/d_inv are
  // approximate: where that can move a q by one step, or d or the sum to the neighbouring f16, the
  // element's bound allows it.
  ggml,
};
std::string_view to_string(Numerics numerics);
/// "qgate" or "ggml", case-insensitively; empty for anything else.
std::optional<Numerics> parse_numerics(std::string_view text);

/// y[nt][od] = x[nt][k] * W^T, W given as od rows of raw ggml blocks of `type` (a ggml / kernel
/// ABI type id: 2 q4_0, 3 q4_1, 6 q5_0, 7 q5_1, 8 q8_0, 12 q4_K, 13 q5_K, 14 q6_K).
struct GemmProblem {
  int32_t type = 0;
  int64_t od = 0;
  int64_t k = 0;
  int64_t nt = 0;
  const uint8_t* weights = nullptr;  // od * row bytes
  const float* x = nullptr;          // nt * k
};

/// What a faithful kernel produces, element by element: the value, and how far a kernel that
/// follows the same numerics may differ from it beyond the absolute floor (kAbsoluteTolerance).
struct Expectation {
  std::vector<double> y;      // [nt][od]
  std::vector<double> slack;  // [nt][od]: rtol * sum|terms| (+ the f16 sum allowance, ggml)
  double rtol = 0;            // the relative bound applied to each element's sum of |terms|
};

/// The floor every element gets: the gate qgate has always had for outputs of order 1.
inline constexpr double kAbsoluteTolerance = 1e-3;
/// llama.cpp's test-backend-ops MUL_MAT threshold, applied to NMSE against exact_product on
/// random activation rows.
inline constexpr double kExactNmseLimit = 5e-4;

/// The MMQ path in `numerics`. Throws std::invalid_argument on an unknown type, a k that is not a
/// multiple of the type's block, or null pointers.
Expectation expect_mmq(Numerics numerics, const GemmProblem& problem, int threads = 0);
/// The f16 path: weights dequantized in f32 and rounded to f16, activations rounded to f16, the
/// exact products summed in f64.
Expectation expect_f16(const GemmProblem& problem, int threads = 0);
/// Dequantized weights (exact, in f64) times the f32 activations, summed in f64.
std::vector<double> exact_product(const GemmProblem& problem, int threads = 0);

}  // namespace qgate::reference
