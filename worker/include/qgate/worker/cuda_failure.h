// CUDA failures as the worker reports them (v1::CudaFailure): the CUDA error's name, the last
// call the worker made into the build before it, and whether the context is lost. qgated reads
// these fields; the record's message stays for people.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "qgate/v1/worker.pb.h"
#include "qgate/worker/device_api.h"

namespace qgate::worker {

/// True for the sticky CUDA errors after which the context is unusable and every later call
/// fails alike: cudaErrorIllegalAddress, LaunchFailure, MisalignedAddress, IllegalInstruction,
/// HardwareStackError, InvalidAddressSpace, InvalidPc, Assert and LaunchTimeout.
bool cuda_error_loses_context(std::string_view cuda_error);

/// The failure record of `cuda_error` after the build call `last_build_call`.
v1::CudaFailure make_cuda_failure(const std::string& cuda_error, const std::string& last_build_call);

/// The failure record of a device error that came from CUDA, naming the build call made last
/// when it was thrown; nullopt when it did not come from CUDA.
std::optional<v1::CudaFailure> cuda_failure_of(const DeviceError& error);

/// After a build call reported a failure: synchronizes the device, where an error the build's
/// kernels left behind shows, and returns its record; nullopt when the device is fine.
std::optional<v1::CudaFailure> cuda_failure_left_behind(DeviceApi& device);

/// " [last build call: qgate_gemm_run]" for a message, "" when no build call was made.
std::string last_build_call_note(const v1::CudaFailure& failure);

}  // namespace qgate::worker
