// The slow build's device side when it is built without CUDA (see slow_device.h): nothing can be
// done on a device, and every function says so. slow_build.cpp then refuses CUDA contexts.
#include "slow_device.h"

namespace qgate_slow {

bool device_compiled() { return false; }

DeviceState* device_open(int, std::string* error) {
  *error = "qgate-slow was built without CUDA";
  return nullptr;
}

void device_close(DeviceState*) {}

bool device_calibrate(DeviceState*, void*, double, const std::function<bool()>&, Calibration*, std::string* error) {
  *error = "qgate-slow was built without CUDA";
  return false;
}

bool device_spin(void*, uint64_t, std::string* error) {
  *error = "qgate-slow was built without CUDA";
  return false;
}

}  // namespace qgate_slow
