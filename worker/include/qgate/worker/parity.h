// The parity phase: every (type, shape, activation rows, path) case run through a kernel build
// (ParityRunner, in the process that loads it) and judged against the parity reference
// (kernels/include/qgate/reference) in the numerics the build declares (ParityJudge, in a process
// that never loads it: docs/security.md). Outputs are poisoned first; NaN, Inf and unwritten
// elements fail.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qgate/reference/parity_reference.h"
#include "qgate/worker/device_api.h"
#include "qgate/worker/kernel_build.h"
#include "qgate/worker/problems.h"

namespace qgate::worker {

struct ParityOptions {
  std::vector<quant::WeightType> types;
  std::vector<GemmShape> shapes;
  std::vector<int> paths;          // QGATE_PATH_F16 / QGATE_PATH_MMQ / QGATE_PATH_FROM_ENV
  bool edge_cases = true;          // the edge activation rows, once per type (edge_case_shape())
  uint64_t seed = 20260831;        // recorded in every case
  reference::Numerics numerics = reference::Numerics::qgate;  // the MMQ path's profile
  double atol = reference::kAbsoluteTolerance;                 // every element's floor
  int threads = 0;                 // CPU backend threads, 0 = all
};

/// Where a case's weights come from: seeded random weights quantized by qgate, or the blocks of a
/// tensor in a user's model file.
struct WeightsSource {
  std::string name = "seeded";                                  // recorded in the case
  std::function<std::vector<uint8_t>()> load;                   // empty: make_weights(seed)
};

/// One case of a sweep, before any path runs it.
struct ParityCaseSpec {
  quant::WeightType type;
  GemmShape shape;
  ActivationKind activation = ActivationKind::random;
  uint64_t seed = 0;
  WeightsSource weights;
};

/// The sweep's cases in run order: every type x shape with random rows, then, when edge_cases,
/// every type x edge row kind at edge_case_shape(). Each runs once per requested path.
std::vector<ParityCaseSpec> plan_cases(const ParityOptions& options);

/// One output judged against its reference.
struct OutputComparison {
  double max_abs_diff = 0;
  double nmse = 0;               // against the expectation of the case's path and profile
  double ref_max_abs = 0;
  double loosest_bound = 0;      // the largest per-element bound, atol + slack
  double worst_tolerance_fraction = 0;
  int64_t worst_index = -1;      // the element that came closest to (or past) its bound
  double max_rel_diff = 0;
  double exact_nmse = 0;         // against the exact f64 product
  int64_t nan_count = 0;
  int64_t inf_count = 0;
  int64_t unwritten_count = 0;
};

/// The bit pattern outputs are filled with before a run (every byte 0xFF, a NaN).
inline constexpr uint8_t kPoisonByte = 0xFF;
/// Compares n outputs with their expectation and the exact product; `atol` is every element's
/// floor, added to expected.slack[i].
OutputComparison compare_output(const float* y, const reference::Expectation& expected,
                                const std::vector<double>& exact, double atol, size_t n);

/// What one case on one path produced in the build's process, before any judgement.
struct ProducedOutput {
  int32_t slot = 0;            // case index * paths + path index, in run order
  v1::ParityCase produced;     // identity, path, run_ms; the outcome when there is no output
  std::vector<float> y;        // nt * od outputs; empty when the build produced none
  bool has_output = false;
};

class ParityRunner {
 public:
  ParityRunner(const KernelBuild& build, DeviceApi& device, int threads);
  ~ParityRunner();
  /// Runs the cases and hands each output to `on_output` as soon as the build returned it.
  void run(const ParityOptions& options, const std::vector<ParityCaseSpec>& cases,
           const std::function<void(ProducedOutput&&)>& on_output);
  /// Destroys the build contexts the cases created (they are created again when needed), so a
  /// memory reading after the sweep holds nothing of the build's.
  void release_contexts();
  /// Creates the contexts of `paths` now (a failure is kept and reported by run()), so that what a
  /// build sets up once per context (loading a library) is in place before a memory reading.
  void open_contexts(const std::vector<int>& paths);

 private:
  BuildContext* context_for(int path, std::string* error);
  /// Sets c->cuda (and notes it in the message) when a CUDA error is left on the device.
  void note_cuda_failure(v1::ParityCase* c);
  void run_case(const ParityOptions& options, const ParityCaseSpec& spec, int32_t first_slot,
                const std::function<void(ProducedOutput&&)>& on_output);

  const KernelBuild& build_;
  DeviceApi& device_;
  int threads_;
  std::map<int, std::unique_ptr<BuildContext>> contexts_;
  std::map<int, std::string> context_errors_;
};

/// The case's identity as a record: type, shape, seed, path, profile, activation rows, weights.
v1::ParityCase describe_case(const ParityOptions& options, const ParityCaseSpec& spec, int path);

/// Judges outputs against the parity reference. It holds no kernel build: the inputs of a case
/// are made again from its seed (or read from its model file), so nothing the build's process
/// says but the outputs themselves enters a verdict.
class ParityJudge {
 public:
  ParityJudge(const ParityOptions& options, int threads) : options_(options), threads_(threads) {}
  /// The verdict on `y` (nt * od outputs) of case `spec` on `path`; `produced` brings run_ms.
  v1::ParityCase judge(const ParityCaseSpec& spec, int path, const v1::ParityCase& produced,
                       const std::vector<float>& y);

 private:
  const ParityOptions& options_;
  int threads_;
  // The inputs and exact product of the last case judged: its paths come one after the other.
  const ParityCaseSpec* inputs_of_ = nullptr;
  std::vector<uint8_t> weights_;
  std::vector<float> x_;
  std::vector<double> exact_;
};

v1::NumericsProfile to_proto(reference::Numerics numerics);
/// The profile a record names; nullopt for UNSPECIFIED or a value this worker does not know.
std::optional<reference::Numerics> from_proto(v1::NumericsProfile profile);
v1::ActivationKind to_proto(ActivationKind kind);

}  // namespace qgate::worker
