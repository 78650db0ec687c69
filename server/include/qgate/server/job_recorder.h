// Everything a running job writes: live progress (the store's progress and the event stream),
// parity cases, runs with their samples and co-tenant load, and the job's end with its verdict and
// disposition. The one place that maps the worker protocol's records to the store's rows.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "qgate/cotenant/sample.h"
#include "qgate/db/store.h"
#include "qgate/server/event_hub.h"
#include "qgate/server/job_failure.h"
#include "qgate/v1/harness.pb.h"
#include "qgate/v1/worker.pb.h"

namespace qgate::server {

/// Where a timed run belongs: its arm, pair and place in the job's run order.
struct RunPlacement {
  std::string arm;           // "A" or "B"
  db::RowId build_id = 0;
  std::string path;          // "mmq" or "f16", as the arm's worker prepared
  int pair_index = 0;
  int seq = 0;               // the job's run order
  int worker_pid = 0;
  int repetitions = 0;
  bool fresh_process = false;
};

class JobRecorder {
 public:
  // `host` is what runs are recorded under (the daemon's --host-name); empty = the host the worker reports.
  JobRecorder(db::Store& store, EventHub& events, const db::Job& job, std::string backend, std::string host);

  db::RowId job_id() const { return job_.id; }

  /// Live progress: stored on the job and published to watchers, with an optional message.
  void publish(const v1::JobProgress& progress, const std::string& message = "");

  /// The parity cases of the job's candidate build, all or none.
  void add_parity_cases(db::RowId build_id, const std::vector<v1::ParityCase>& cases);

  /// A timed run starts: its row, with the worker's context, the profile and the tokens.
  db::RowId start_run(const RunPlacement& where, const v1::RunContext& context, const std::string& profile,
                      int64_t tokens);
  /// The run's result and its samples (tok/s, GEMM ms, each GEMM's median).
  void finish_run(db::RowId run_id, const v1::ProfileRun& run, int64_t tokens);
  void fail_run(db::RowId run_id, int64_t tokens);
  /// The run's co-tenant summary and readings; returns its contended flag (none = unknown).
  std::optional<bool> record_cotenant(db::RowId run_id, const std::vector<cotenant::Sample>& samples,
                                      double quiet_max_foreign_sm_percent, const std::string& unavailable_reason);

  /// The job ran to its verdict: the verdict, its disposition and the final progress, at once.
  void finish(const v1::VerdictReport& report, v1::JobProgress progress, const Fault& disposition);
  /// The job ended without a verdict (FAILED or CANCELLED), with what the build did when known.
  /// Never throws: a store that refuses leaves the job running, to be run again at restart.
  void end(db::JobState state, const std::string& error, const std::optional<Fault>& fault);

 private:
  db::Store& store_;
  EventHub& events_;
  db::Job job_;
  std::string backend_;
  std::string host_;
};

}  // namespace qgate::server
