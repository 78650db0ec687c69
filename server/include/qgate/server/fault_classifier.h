// What a build did, from what its worker reported or how it ended: the disposition and its detail.
// Reads the worker protocol's typed fields (error kind, CUDA failure, exit signal), never message text.
#pragma once

#include <string>
#include <string_view>

#include "qgate/server/job_failure.h"
#include "qgate/server/worker_channel.h"
#include "qgate/v1/harness.pb.h"
#include "qgate/v1/worker.pb.h"

namespace qgate::server {

class FaultClassifier {
 public:
  /// A worker that ended before finishing: CRASHED, with its signal and the build call it died in
  /// (else the phase qgated had it in); an exit without a signal says so.
  static Fault died(const WorkerExit& exit, std::string_view phase);
  /// A worker's fatal error record: a build it could not load is REJECTED; anything else is qgate's.
  static Fault worker_error(const v1::WorkerError& error);
  /// A case or run that failed: CRASHED when the CUDA context is lost (the build's kernel faulted),
  /// else INCORRECT with `what` and the message.
  static Fault failed(std::string_view what, const std::string& message, const v1::CudaFailure& cuda,
                      std::string_view phase);
  /// A run that overran its limit (the worker's group was killed); `call` is where it hung.
  static Fault timed_out(std::string_view what, int64_t limit_s, const std::string& call);
  /// True when a failure left the CUDA context unusable, so every later call fails alike.
  static bool context_lost(const v1::CudaFailure& cuda) { return cuda.context_lost(); }
};

}  // namespace qgate::server
