// The benchmark's cuBLASLt f16 baseline: f16 copies of the same dequantized weights and
// activations, timed on the worker's stream exactly like the build's paths.
#include <cuda_runtime_api.h>

#include <stdexcept>

#include "qgate/cuda/cublaslt_baseline.h"
#include "qgate/quant/half.h"
#include "qgate/worker/bench.h"

namespace qgate::worker {
namespace {

class CublasLtBaseline final : public F16Baseline {
 public:
  CublasLtBaseline(DeviceApi& device, std::unique_ptr<cuda::CublasLtF16Gemm> gemm)
      : device_(device), gemm_(std::move(gemm)) {}

  void time(const std::vector<float>& w, const std::vector<float>& x, int64_t nt, int64_t od, int64_t k,
            const BenchOptions& plan, v1::GemmTiming* timing) override {
    std::vector<uint16_t> wh(w.size()), xh(size_t(nt) * size_t(k));
    for (size_t i = 0; i < w.size(); ++i) wh[i] = quant::f32_to_f16(w[i]);
    for (size_t i = 0; i < xh.size(); ++i) xh[i] = quant::f32_to_f16(x[i]);
    DeviceBuffer dw(device_, wh.size() * 2), dx(device_, xh.size() * 2), dy(device_, size_t(nt) * size_t(od) * 4);
    device_.upload(dw.as<void>(), wh.data(), wh.size() * 2);
    device_.upload(dx.as<void>(), xh.data(), xh.size() * 2);
    std::string error = gemm_->prepare(nt, od, k);
    if (!error.empty()) {
      timing->set_outcome(v1::CASE_OUTCOME_NOT_SUPPORTED);
      timing->set_message(error);
      return;
    }
    auto call = [&] {
      error = gemm_->run(dx.as<void>(), dw.as<void>(), dy.as<float>(), device_.stream());
      if (!error.empty()) throw std::runtime_error("cuBLASLt: " + error);
    };
    for (int i = 0; i < plan.warmup; ++i) per_call_us(device_, plan.calls_per_sample, call);
    for (int i = 0; i < plan.repetitions; ++i) {
      if (plan.cold) device_.flush_cache();
      timing->add_samples_us(per_call_us(device_, plan.calls_per_sample, call));
    }
    timing->set_outcome(v1::CASE_OUTCOME_PASSED);
    timing->set_message(gemm_->library());
  }

 private:
  DeviceApi& device_;
  std::unique_ptr<cuda::CublasLtF16Gemm> gemm_;
};

}  // namespace

std::unique_ptr<F16Baseline> make_cublaslt_baseline(DeviceApi& device, std::string* why) {
  cudaSetDevice(device.device_ordinal());
  auto gemm = cuda::CublasLtF16Gemm::load(why);
  if (!gemm) return nullptr;
  return std::make_unique<CublasLtBaseline>(device, std::move(gemm));
}

}  // namespace qgate::worker
