// The kinds of fatal worker errors (v1::WorkerErrorKind): how a build that cannot load maps onto
// them, their stable names for people and logs, and the error record the worker writes.
#pragma once

#include <string>

#include "qgate/v1/worker.pb.h"
#include "qgate/worker/kernel_build.h"

namespace qgate::worker {

/// The error kind of a build that could not be loaded (UNSPECIFIED for BuildLoadError::none).
v1::WorkerErrorKind to_error_kind(BuildLoadError error);
/// "not_found", "not_elf", "dlopen_failed", "missing_symbol", "abi_mismatch", "invalid_argument",
/// "invalid_request", "device", "unknown_numerics", "model_file"; "unspecified" otherwise.
const char* to_string(v1::WorkerErrorKind kind);
/// A WorkerRecord carrying one WorkerError.
v1::WorkerRecord error_record(v1::WorkerErrorKind kind, const std::string& message);

}  // namespace qgate::worker
