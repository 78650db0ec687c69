// The A/B phase: two arms timed in ABBA order (or, for demonstration, sequentially), pairs judged
// only at the sequential design's planned looks (docs/ab-statistics.md), each run stored with its
// co-tenant load. A worker that fails a run is restarted and the run retried once. The result is
// the A/B part of the verdict report, and what the arms' memory readings say about leaks.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <span>
#include <utility>
#include <string>
#include <vector>

#include "qgate/cotenant/sampler.h"
#include "qgate/server/arm_session.h"
#include "qgate/server/job_control.h"
#include "qgate/server/job_recorder.h"
#include "qgate/server/output_identity.h"
#include "qgate/stats/ab_statistics.h"
#include "qgate/stats/sequential.h"
#include "qgate/v1/harness.pb.h"

namespace qgate::server {

/// A split A/B (docs/two-gpus.md): the arms run at once, one per GPU, and swap GPUs every pair.
struct SplitSetup {
  v1::GpuRef first;                       // arm A's GPU in even pairs
  v1::GpuRef second;
  std::vector<std::string> first_args;    // how a worker opens each
  std::vector<std::string> second_args;
  cotenant::Sampler* first_sampler = nullptr;
  cotenant::Sampler* second_sampler = nullptr;
};

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
  std::optional<SplitSetup> split;
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
  /// Records the start of `arm`'s next run (its place in the job's order) and returns its row.
  db::RowId start_recorded_run(ArmSession& arm, int pair_index);
  std::optional<v1::ProfileRun> sampled_run(ArmSession& arm, int64_t run_id, RunFailure* failure,
                                            std::vector<cotenant::Sample>* samples);
  std::optional<v1::ProfileRun> sampled_run_on(cotenant::Sampler& sampler, ArmSession& arm, int64_t run_id,
                                               RunFailure* failure, std::vector<cotenant::Sample>* samples);
  /// A split pair: arm x on one GPU and arm y on the other, timed at the same moment, each stored
  /// with its own GPU's co-tenant load; a failed run is retried once, alone.
  struct TimedRun {
    v1::ProfileRun run;
    std::optional<bool> contended;
  };
  std::pair<TimedRun, TimedRun> timed_runs_at_once(ArmSession& x, cotenant::Sampler& sx, ArmSession& y,
                                                   cotenant::Sampler& sy, int pair_index);
  /// The split A/B: pairs on swapped GPUs, judged on blocks of two (split_gpus.h).
  AbOutcome run_split(v1::JobProgress& progress);
  /// The report's parts both forms share, from the judged look and the figures behind it.
  void fill_report(AbOutcome& out, const stats::LookResult& decision, std::span<const stats::AbPair> judged,
                   int pairs, int contended, const std::vector<double>& tokens_a, const std::vector<double>& tokens_b);

  AbSetup setup_;
  WorkerLauncher& launcher_;
  JobRecorder& recorder_;
  const JobControl& control_;
  cotenant::Sampler& sampler_;
  v1::JobProgress* progress_ = nullptr;
  std::set<int> own_pids_;  // every worker this job started: never counted as a co-tenant
  // The arms of a sequential or ABBA job: the idle one is frozen while the other is timed.
  std::vector<ArmSession*> arms_;
  std::optional<bool> last_contended_;
  int seq_ = 0;
  std::vector<std::string> recovered_;
  OutputIdentityCheck identity_;
  std::map<std::string, int> runs_per_arm_;
};

}  // namespace qgate::server
