// The parity phase: every (type, shape, path) case run through a kernel build and compared with
// the CPU reference of its path. Outputs are poisoned first; NaN, Inf and unwritten elements fail.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "qgate/worker/device_api.h"
#include "qgate/worker/kernel_build.h"
#include "qgate/worker/problems.h"

namespace qgate::worker {

struct ParityOptions {
  std::vector<quant::WeightType> types;
  std::vector<GemmShape> shapes;
  std::vector<int> paths;          // QGATE_PATH_F16 / QGATE_PATH_MMQ / QGATE_PATH_FROM_ENV
  uint64_t seed = 20260831;        // recorded in every case
  double mmq_tolerance = 1e-3;     // max |diff| against the q8-dot reference
  double f16_tolerance = 1e-3;     // max |diff| against the f64 reference of f16 operands
  int threads = 0;                 // CPU backend threads, 0 = all
};

/// Statistics of one output against its reference.
struct OutputComparison {
  double max_abs_diff = 0;
  double nmse = 0;
  double ref_max_abs = 0;
  int64_t nan_count = 0;
  int64_t inf_count = 0;
  int64_t unwritten_count = 0;
};

/// The bit pattern outputs are filled with before a run (every byte 0xFF, a NaN).
inline constexpr uint8_t kPoisonByte = 0xFF;
OutputComparison compare_output(const float* y, const double* ref, size_t n);

class ParityRunner {
 public:
  ParityRunner(const KernelBuild& build, DeviceApi& device, int threads);
  ~ParityRunner();
  /// Runs every case and hands each result to `on_case` as soon as it is known.
  void run(const ParityOptions& options, const std::function<void(const v1::ParityCase&)>& on_case);

 private:
  BuildContext* context_for(int path, std::string* error);

  const KernelBuild& build_;
  DeviceApi& device_;
  int threads_;
  std::map<int, std::unique_ptr<BuildContext>> contexts_;
  std::map<int, std::string> context_errors_;
};

}  // namespace qgate::worker
