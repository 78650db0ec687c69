// The parity phase: one `qgate-worker parity` process sweeps the candidate's paths and types
// against the independent reference, judged in the build's numerics. Every case is stored; a lost
// CUDA context ends the phase at once (every later case would fail alike).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "qgate/server/job_control.h"
#include "qgate/server/job_recorder.h"
#include "qgate/server/worker_channel.h"
#include "qgate/v1/harness.pb.h"

namespace qgate::server {

struct ParitySetup {
  std::string worker_binary;
  std::vector<std::string> common_args;  // --build, --backend, --device, --threads, --seed
  std::string log_path;                  // the worker's stderr
  db::RowId build_id = 0;
  v1::ShapeSet shapes = v1::SHAPE_SET_UNSPECIFIED;
  std::string gguf;                      // a model file whose tensors are swept, or ""
  std::string tensors;                   // globs over its tensor names ("" = blk.0.*)
  v1::NumericsProfile numerics = v1::NUMERICS_PROFILE_UNSPECIFIED;
  int64_t phase_timeout_s = 1800;
  int64_t case_timeout_s = 300;
};

struct ParityOutcome {
  int passed = 0;
  int failed = 0;
  std::string first_failure;             // "q4_0 mmq 1x256x256: 256 NaN"
  std::optional<v1::MemoryLeak> leak;    // memory the sweep did not get back
};

class ParityPhase {
 public:
  ParityPhase(ParitySetup setup, WorkerLauncher& launcher, JobRecorder& recorder, const JobControl& control);
  /// Throws JobFailure (a crash, a lost context, a hang), JobCancelled or DaemonStopping.
  ParityOutcome run(v1::JobProgress& progress);
  /// The worker arguments of the sweep (for tests and logs).
  std::vector<std::string> worker_args() const;

 private:
  /// One run of the sweep's worker; nullopt when the worker was killed from outside (SIGKILL that
  /// qgated did not send) and this is not the last attempt.
  std::optional<ParityOutcome> sweep(v1::JobProgress& progress, bool last_attempt);
  ParitySetup setup_;
  WorkerLauncher& launcher_;
  JobRecorder& recorder_;
  const JobControl& control_;
};

}  // namespace qgate::server
