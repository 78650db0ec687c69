// The kinds of fatal worker errors (v1::WorkerErrorKind): how a build that cannot load maps onto
// them, and the error record the worker writes. Their words are in qgate/v1/record_words.h.
#pragma once

#include <string>

#include "qgate/v1/worker.pb.h"
#include "qgate/worker/kernel_build.h"

namespace qgate::worker {

/// The error kind of a build that could not be loaded (UNSPECIFIED for BuildLoadError::none).
v1::WorkerErrorKind to_error_kind(BuildLoadError error);
/// A WorkerRecord carrying one WorkerError.
v1::WorkerRecord error_record(v1::WorkerErrorKind kind, const std::string& message);

}  // namespace qgate::worker
