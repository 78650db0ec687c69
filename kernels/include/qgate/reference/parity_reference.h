// The parity reference: what a kernel build's output must be, computed from ggml's block format
// specification alone, in the numerics the build declares. It shares no code with qgate's own
// kernels (CPU or CUDA): it decodes blocks itself, quantizes activations itself and sums in f64,
// so a sweep of qgate's CPU backend against it tests the maths, not the plumbing.
//
// A numerics profile names a library's arithmetic; a route is the kernel that library dispatches a
// given problem to (ggml's CUDA backend takes MMVQ at up to 8 tokens and MMQ above). The reference
// picks the route as the profile's library would, and evaluates it as an error budget: the discrete
// choices of the route (how activations are quantized, which values it keeps in f16) define the
// expected value; the roundings of its intermediates (f16 scale products, f16 or f32 sums) are the
// element's slack (docs/parity.md, "Routes").
//
// Three expectations exist for one GEMM problem:
//   expect_mmq(profile)  the quantized (MMQ) path in a profile, on the route its library takes;
//   expect_f16(profile)  the f16 path: f16-rounded dequantized weights and activations;
//   exact_product        dequantized weights times the f32 activations, in f64: no profile at all,
//                        so NMSE against it catches wrong maths whatever profile was declared.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qgate::reference {

/// The arithmetic a kernel build declares.
enum class Numerics {
  qgate,  // per 32: d = f16(amax/127), q = round-half-even(x/d), min term d*sum(q)
  // ggml's CUDA backend on sm_90: MMVQ at <= 8 tokens (q8_1 activations d = amax/127, q =
  // roundf(x/d), (d, sum of x) kept as an f16 pair, per-type vec_dot), MMQ above (q = roundf(x*127/
  // amax), d = 1/(127/amax), f16 (d, sum) for q4_0, q4_1, q5_1, q4_K, q5_K, f32 d otherwise); for
  // f16 weights MMVF at 1 token, MMF up to 16, cuBLAS with f16 accumulation above.
  ggml,
  // ggml's CPU backend: q8_0 (f16 d) or q8_1 (f16 d and f16 d*sum(q)) per 32 for the legacy types,
  // q8_K per 256 (f32 d) for the K-quants, f32 arithmetic; f16 activations and f32 sums for f16.
  ggml_cpu,
  // Kernels of unknown lineage: the expectation is the exact product, and the slack the worst case
  // of 8-bit activations per 32 values with f16 scales (deliberately weaker; NMSE is gated too).
  unknown,
};
/// "qgate", "ggml", "ggml-cpu" or "unknown".
std::string_view to_string(Numerics numerics);
/// The names to_string gives (and "ggml_cpu"), case-insensitively; empty for anything else.
std::optional<Numerics> parse_numerics(std::string_view text);

/// The kernel a profile's library runs for a problem. ggml's CUDA routes assume compute capability
/// 9.0 (an H200), built for an arch >= 8.0 with its default precision and no forced kernels.
enum class Route {
  qgate_mmq,         // "qgate/mmq"
  qgate_f16,         // "qgate/f16"
  ggml_mmvq,         // "ggml/mmvq": quantized weights, tokens <= kGgmlMmvqMaxTokens
  ggml_mmq,          // "ggml/mmq": quantized weights, more tokens
  ggml_mmvf,         // "ggml/mmvf": f16 weights, tokens == kGgmlMmvfTokens; half2 sums per thread
  ggml_mmf,          // "ggml/mmf": f16 weights, tokens <= kGgmlMmfMaxTokens, k % 64 == 0, od % 32 == 0
  ggml_cublas_f16,   // "ggml/cublas-f16": cuBLAS, f16 compute, f16 accumulation and output
  ggml_cpu_vec_dot,  // "ggml-cpu/vec_dot": ggml-cpu's quantized dot products
  ggml_cpu_f16,      // "ggml-cpu/f16": f16 activations, f32 sums
  unknown_mmq,       // "unknown/mmq"
  unknown_f16,       // "unknown/f16"
};
std::string_view to_string(Route route);

/// The compute capability ggml's CUDA routes are chosen for, and the thresholds of ggml at
/// d99724f2 for it (ggml-cuda.cu ggml_cuda_mul_mat; mmvq.cu ggml_cuda_should_use_mmvq;
/// mmvf.cu ggml_cuda_should_use_mmvf; mmf.cu ggml_cuda_should_use_mmf).
inline constexpr int kGgmlComputeCapability = 90;
inline constexpr int64_t kGgmlMmvqMaxTokens = 8;
inline constexpr int64_t kGgmlMmvfTokens = 1;
inline constexpr int64_t kGgmlMmfMaxTokens = 16;

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

/// The route `numerics`' library takes for the quantized path of `problem` (ggml: MMVQ at
/// nt <= 8, MMQ above), and for its f16 path (ggml: MMVF at nt == 1, MMF up to 16 tokens when
/// k % 64 == 0 and od % 32 == 0, cuBLAS otherwise).
Route mmq_route(Numerics numerics, const GemmProblem& problem);
Route f16_route(Numerics numerics, const GemmProblem& problem);

/// What a faithful kernel produces, element by element: the value, and how far a kernel that
/// follows the same route may differ from it beyond the absolute floor (kAbsoluteTolerance).
struct Expectation {
  std::vector<double> y;      // [nt][od]
  std::vector<double> slack;  // [nt][od]: the route's error budget (docs/parity.md)
  double rtol = 0;            // the factor on each element's sum |terms| for its f32 arithmetic
  std::string route;          // e.g. "ggml/mmvq sm90", "qgate/mmq", "ggml-cpu/vec_dot"
};

/// The floor every element gets: the gate qgate has always had for outputs of order 1.
inline constexpr double kAbsoluteTolerance = 1e-3;
/// llama.cpp's test-backend-ops MUL_MAT threshold, applied to NMSE against exact_product on
/// random activation rows.
inline constexpr double kExactNmseLimit = 5e-4;

/// The quantized path in `numerics`, on mmq_route(numerics, problem). Throws std::invalid_argument
/// on an unknown type, a k that is not a multiple of the type's block, or null pointers.
Expectation expect_mmq(Numerics numerics, const GemmProblem& problem, int threads = 0);
/// The f16 path in `numerics`, on f16_route(numerics, problem): weights dequantized in f32 and
/// rounded to f16, activations rounded to f16, the exact products summed in f64.
Expectation expect_f16(Numerics numerics, const GemmProblem& problem, int threads = 0);
/// The f16 path in the qgate profile (f32 accumulation).
Expectation expect_f16(const GemmProblem& problem, int threads = 0);
/// One route, whatever the problem's size would pick (for tests and forced-kernel builds).
Expectation expect_route(Route route, const GemmProblem& problem, int threads = 0);
/// Dequantized weights (exact, in f64) times the f32 activations, summed in f64.
std::vector<double> exact_product(const GemmProblem& problem, int threads = 0);

}  // namespace qgate::reference
