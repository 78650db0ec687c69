// The kernel benchmark: timed repetitions of each (type, path, shape), cold L2, CUDA events,
// median of repetitions after warm-up, with the cuBLASLt f16 baseline timed in the same run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "qgate/worker/device_api.h"
#include "qgate/worker/kernel_build.h"
#include "qgate/worker/problems.h"

namespace qgate::worker {

struct BenchOptions {
  std::vector<quant::WeightType> types;
  std::vector<int64_t> token_counts = {512, 2048};
  std::vector<std::pair<int64_t, int64_t>> od_k = {{4096, 14336}, {14336, 4096}};
  std::vector<int> paths = {QGATE_PATH_MMQ, QGATE_PATH_F16};
  int warmup = 3;
  int repetitions = 20;
  bool cublaslt = true;   // time cuBLASLt f16 beside the build where the library is found
  bool cold = true;       // flush L2 before every timed repetition
  // Calls queued back to back in each timed sample, whose time is divided among them: 1 times one
  // isolated call; more amortizes the launch and drain of an idle stream, as an engine's decode loop
  // does (and llama.cpp's test-backend-ops perf mode). More than 1 needs a warm L2.
  int calls_per_sample = 1;
  uint64_t seed = 20260831;
  int threads = 0;
};

/// One timed sample: `calls` back-to-back calls of `enqueue`, all queued before the clock starts,
/// as microseconds per call.
double per_call_us(DeviceApi& device, int calls, const std::function<void()>& enqueue);

/// Summary statistics of a list of samples, in the units given.
struct SampleStats {
  double median = 0, min = 0, max = 0, mean = 0, stddev = 0;
};
SampleStats summarize(std::vector<double> samples);

class BenchRunner {
 public:
  BenchRunner(const KernelBuild& build, DeviceApi& device, int threads);
  void run(const BenchOptions& options, const std::function<void(const v1::GemmTiming&)>& on_timing,
           const std::function<void(const std::string&)>& progress);

 private:
  const KernelBuild& build_;
  DeviceApi& device_;
  int threads_;
};

/// The f16 baseline provider (cuBLASLt, loaded at run time). Absent without CUDA.
class F16Baseline {
 public:
  virtual ~F16Baseline() = default;
  /// Times y = x*W^T for f16 copies of the given dequantized operands as `plan` says (its warm-up,
  /// repetitions, L2 flush and calls per sample); fills `timing`.
  virtual void time(const std::vector<float>& w_dequant, const std::vector<float>& x, int64_t nt,
                    int64_t od, int64_t k, const BenchOptions& plan, v1::GemmTiming* timing) = 0;
};
/// nullptr with *why set when no baseline can be used on this device.
std::unique_ptr<F16Baseline> make_cublaslt_baseline(DeviceApi& device, std::string* why);

}  // namespace qgate::worker
