// The worker's CUDA device when qgate was built without CUDA: every request says so plainly.
#include "qgate/worker/device_api.h"

namespace qgate::worker {

std::unique_ptr<DeviceApi> make_cuda_device_api(int) {
  throw DeviceError("this qgate-worker was built without CUDA (nvcc was not found at build time)");
}

bool cuda_device_api_compiled() { return false; }
int cuda_device_count() { return 0; }

}  // namespace qgate::worker
