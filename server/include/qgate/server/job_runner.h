// Runs one job end to end: the parity phase, then the A/B phase, then the verdict with the
// disposition saying what the build did. It reads the job's spec, composes the phases and ends
// the job once, whatever happened; the phases do the work (parity_phase.h, ab_phase.h).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "qgate/cotenant/sampler.h"
#include "qgate/db/store.h"
#include "qgate/server/daemon_options.h"
#include "qgate/server/build_files.h"
#include "qgate/server/event_hub.h"
#include "qgate/server/gpu_pool.h"
#include "qgate/server/job_control.h"
#include "qgate/server/unrecorded_jobs.h"
#include "qgate/server/worker_channel.h"

namespace qgate::server {

/// Where a claimed job runs: its GPU, or the two GPUs of a split job (in ordinal order). Each opens
/// its workers with its own arguments and samples its own co-tenants.
struct JobPlacement {
  std::vector<const ServedGpu*> gpus;
};

class JobRunner {
 public:
  /// `sampler` reads the GPU's co-tenant load during every timed run (it may be unavailable).
  /// Workers are real qgate-worker processes unless `launcher` is given.
  JobRunner(db::Store& store, EventHub& events, const DaemonOptions& options, cotenant::Sampler& sampler,
            std::shared_ptr<WorkerLauncher> launcher = nullptr);
  /// What the scheduler asks of a running job through `stop` (see StopRequest).
  static constexpr int kKeepRunning = server::kKeepRunning;
  static constexpr int kCancel = kCancelJob;
  static constexpr int kShutdown = kDaemonStops;

  /// Runs a job the scheduler has claimed (state running) to a terminal state. Never throws: any
  /// failure ends the job FAILED with its reason.
  void run(const db::Job& job, const std::atomic<int>& stop);
  /// The same, on the placement's GPU(s). A split job needs two; a GPU without worker arguments is
  /// opened as the daemon's options say (--device of options.gpu).
  void run(const db::Job& job, const std::atomic<int>& stop, const JobPlacement& placement);
  /// Where a job goes that stops because the store was lost under it, to be queued again once the
  /// store answers (without one it waits for the next start). Call before the first run.
  void set_unrecorded_jobs(UnrecordedJobs* unrecorded) { unrecorded_ = unrecorded; }

 private:
  db::Store& store_;
  EventHub& events_;
  const DaemonOptions& options_;
  cotenant::Sampler& sampler_;
  std::shared_ptr<WorkerLauncher> launcher_;
  BuildFiles build_files_;  // the files this host runs builds from (<data dir>/artifacts)
  UnrecordedJobs* unrecorded_ = nullptr;
};

}  // namespace qgate::server
