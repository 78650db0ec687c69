// Without CUDA there is no cuBLASLt baseline to time.
#include "qgate/worker/bench.h"

namespace qgate::worker {

std::unique_ptr<F16Baseline> make_cublaslt_baseline(DeviceApi&, std::string* why) {
  *why = "this qgate-worker was built without CUDA";
  return nullptr;
}

}  // namespace qgate::worker
