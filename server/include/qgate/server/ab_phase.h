// The A/B phase: two arms timed in ABBA order (or, for demonstration, sequentially), pairs judged
// only at the sequential design's planned looks (docs/ab-statistics.md), each run stored with its
// co-tenant load. A worker that fails a run is restarted and the run retried once. The result is
// the A/B part of the verdict report, and what the arms' memory readings say about leaks.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "qgate/cotenant/sampler.h"
#include "qgate/server/arm_session.h"
#include "qgate/server/job_control.h"
#include "qgate/server/job_recorder.h"
#include "qgate/server/output_identity.h"
#include "qgate/stats/ab_statistics.h"
#include "qgate/v1/harness.pb.h"

namespace qgate::server {

struct AbSetup {
  ArmSpec a;
  ArmSpec b;
  ArmSettings arms;
  std::string profile;          // the model profile's name
  int64_t tokens = 0;
  stats::GatePolicy policy;
  v1::RunOrder order = v1::RUN_ORDER_ABBA;
  bool fresh_process = false;   // a new worker per run
  double quiet_max_foreign_sm_percent = 5.0;
  std::string throughput_note;  // what tok/s means, for the report ("" = the profile's linear layers)
};

struct AbOutcome {
  v1::VerdictReport report;          // verdict, comparison, ratio and interval, arms, per type, reasons
  std::vector<v1::MemoryLeak> leaks; // memory an arm's build kept
  std::vector<std::string> recovered;  // runs a worker restart saved
};

class AbPhase {
 public:
  AbPhase(AbSetup setup, WorkerLauncher& launcher, JobRecorder& recorder, const JobControl& control,
          cotenant::Sampler& sampler);
  /// Runs the A/B to its stopping look; throws JobFailure, JobCancelled or DaemonStopping.
  AbOutcome run(v1::JobProgress& progress);

 private:
  /// One timed run of `arm`, stored; a failed run restarts the worker and is retried once.
  v1::ProfileRun timed_run(ArmSession& arm, int pair_index);
  std::optional<v1::ProfileRun> sampled_run(ArmSession& arm, int64_t run_id, RunFailure* failure,
                                            std::vector<cotenant::Sample>* samples);

  AbSetup setup_;
  WorkerLauncher& launcher_;
  JobRecorder& recorder_;
  const JobControl& control_;
  cotenant::Sampler& sampler_;
  v1::JobProgress* progress_ = nullptr;
  std::set<int> own_pids_;  // every worker this job started: never counted as a co-tenant
  std::optional<bool> last_contended_;
  int seq_ = 0;
  std::vector<std::string> recovered_;
  OutputIdentityCheck identity_;
  std::map<std::string, int> runs_per_arm_;
};

}  // namespace qgate::server
