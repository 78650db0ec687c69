// How a job ends early: a failure with what the build did (its disposition and detail), the user's
// cancel, or the daemon stopping. Thrown by the phases, caught once by JobRunner.
#pragma once

#include <stdexcept>
#include <string>

#include "qgate/v1/harness.pb.h"

namespace qgate::server {

/// What a build did when it did not run cleanly to a verdict.
struct Fault {
  v1::Disposition disposition = v1::DISPOSITION_ERROR;
  std::string detail;  // "SIGSEGV in gemm_prepare", "run exceeded 120 s in gemm_run", ...
};

/// Ends the job FAILED. The message is what the user reads; the fault what the build did
/// (DISPOSITION_ERROR: nothing, qgate itself failed).
struct JobFailure : std::runtime_error {
  explicit JobFailure(const std::string& message) : JobFailure(message, Fault{v1::DISPOSITION_ERROR, message}) {}
  JobFailure(const std::string& message, Fault why) : std::runtime_error(message), fault(std::move(why)) {}
  Fault fault;
};

struct JobCancelled : std::runtime_error {
  JobCancelled() : std::runtime_error("cancelled") {}
};

struct DaemonStopping : std::runtime_error {
  DaemonStopping() : std::runtime_error("daemon stopping") {}
};

/// The daemon no longer holds the job's lease (docs/fleet.md): the job went back to the queue, or
/// another daemon runs it, so this one stops at once and writes nothing more of it.
struct LeaseLost : std::runtime_error {
  LeaseLost() : std::runtime_error("lease lost") {}
};

}  // namespace qgate::server
