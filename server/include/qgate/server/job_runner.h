// Runs one job end to end: the parity phase (a qgate-worker `parity` process), then the
// interleaved A/B (one `qgate-worker serve` process per arm, kept for the job, ABBA order, pairs
// added until the verdict is confident or the budget ends), storing every case, run and verdict.
#pragma once

#include <atomic>
#include <string>

#include "qgate/cotenant/sampler.h"
#include "qgate/db/store.h"
#include "qgate/server/daemon_options.h"
#include "qgate/server/event_hub.h"

namespace qgate::server {

class JobRunner {
 public:
  /// `sampler` reads the GPU's co-tenant load during every timed run (it may be unavailable).
  JobRunner(db::Store& store, EventHub& events, const DaemonOptions& options, cotenant::Sampler& sampler);
  /// What the scheduler asks of a running job through `stop`.
  static constexpr int kKeepRunning = 0;
  static constexpr int kCancel = 1;    // the user cancelled: the job ends CANCELLED
  static constexpr int kShutdown = 2;  // the daemon stops: the job stays running, re-run at restart

  /// Runs a job the scheduler has claimed (state running) to a terminal state. Never throws: any
  /// failure ends the job FAILED with its reason.
  void run(const db::Job& job, const std::atomic<int>& stop);

 private:
  db::Store& store_;
  EventHub& events_;
  const DaemonOptions& options_;
  cotenant::Sampler& sampler_;
};

}  // namespace qgate::server
