// CudaFailure records: sticky-error classification and the last build call.
#include "qgate/worker/cuda_failure.h"

#include <array>

namespace qgate::worker {

bool cuda_error_loses_context(std::string_view cuda_error) {
  static constexpr std::array<std::string_view, 9> sticky = {
      "cudaErrorIllegalAddress",     "cudaErrorLaunchFailure",     "cudaErrorMisalignedAddress",
      "cudaErrorIllegalInstruction", "cudaErrorHardwareStackError", "cudaErrorInvalidAddressSpace",
      "cudaErrorInvalidPc",          "cudaErrorAssert",             "cudaErrorLaunchTimeout"};
  for (std::string_view s : sticky)
    if (s == cuda_error) return true;
  return false;
}

v1::CudaFailure make_cuda_failure(const std::string& cuda_error, const std::string& last_build_call) {
  v1::CudaFailure failure;
  failure.set_error(cuda_error);
  failure.set_last_build_call(last_build_call);
  failure.set_context_lost(cuda_error_loses_context(cuda_error));
  return failure;
}

std::optional<v1::CudaFailure> cuda_failure_of(const DeviceError& error) {
  if (error.cuda_error().empty()) return std::nullopt;
  return make_cuda_failure(error.cuda_error(), error.last_build_call());
}

std::optional<v1::CudaFailure> cuda_failure_left_behind(DeviceApi& device) {
  try {
    device.synchronize();
  } catch (const DeviceError& e) {
    return cuda_failure_of(e);
  }
  return std::nullopt;
}

std::string last_build_call_note(const v1::CudaFailure& failure) {
  if (failure.last_build_call().empty()) return "";
  return " [last build call: " + failure.last_build_call() + "]";
}

}  // namespace qgate::worker
