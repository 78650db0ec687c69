// The application layer of qgated: the domain logic behind the Harness RPCs, one class per use case
// (submit, read, cancel, re-measure, compare). It speaks store rows and API messages, never gRPC;
// refusals are ApplicationErrors and store failures StoreErrors, which the service maps to statuses.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "qgate/cotenant/device_watch.h"
#include "qgate/db/store.h"
#include "qgate/jobs/application_error.h"
#include "qgate/jobs/daemon_hooks.h"
#include "qgate/jobs/job_policy.h"
#include "qgate/v1/harness.pb.h"

namespace qgate::jobs {

/// A build named by id, by sha256 or by name (the newest of that name); none when nothing matches.
std::optional<db::Build> resolve_build(db::Store& store, const std::string& name_or_id);

/// An upload the artifact store has committed, ready to become a build.
struct StoredUpload {
  std::string artifact_path;
  std::string sha256;
  std::int64_t size_bytes = 0;
};

struct SubmitOutcome {
  db::RowId job_id = 0;
  db::Build build;
  bool build_existed = false;  // the same bytes were uploaded before
};

/// SubmitBuild: checks a header before any bytes are taken, and turns a finished upload into a
/// build and a queued job.
/// Refuses (FailedPrecondition) work that waits for a quiet GPU on a daemon that cannot see
/// co-tenant load: it would wait forever and hold a place in the queue. `purpose` ends the message
/// ("to re-measure in").
void require_quiet_windows(const cotenant::DeviceNow& device, const std::string& purpose);

/// Refuses (ResourceExhausted) an A/B or gate job whose profile cannot fit: both arms' workers
/// prepare it at once (one each on a split job's two GPUs), each holding up to
/// ModelProfile::prepared_bytes. `memory_bytes` is what the arms run in ("the GPU's 140.4 GiB").
void require_profile_fits(const v1::JobSpec& job, const std::string& backend, uint64_t memory_bytes,
                          const std::string& memory_name);

class JobSubmission {
 public:
  JobSubmission(db::Store& store, DaemonHooks& daemon, const JobPolicy& options);

  /// Throws ApplicationError(InvalidArgument) saying what is wrong; returns the gate's baseline.
  std::optional<db::Build> validate_header(const v1::SubmitHeader& header) const;
  /// Validates the header again (the baseline may have changed), refuses a mislabelled build or a
  /// full queue, stores the build and the job (durably), and wakes the scheduler.
  SubmitOutcome accept(const v1::SubmitHeader& header, const StoredUpload& upload);
  /// A command job whose arms differ by a variable or by a second command: no upload. Its build
  /// row stands for the command, identified by a SHA-256 over its name, commit and command.
  SubmitOutcome accept_command(const v1::SubmitHeader& header);
  /// True when the header's job takes no upload (a command job not substituting builds).
  static bool takes_no_upload(const v1::SubmitHeader& header);

 private:
  db::Store& store_;
  DaemonHooks& daemon_;
  const JobPolicy& options_;
  SubmitOutcome store_job(const v1::SubmitHeader& header, const std::optional<db::Build>& baseline, db::Build build);

  std::mutex mutex_;  // one upload commits its build and job at a time (duplicate and queue checks)
};

struct QueueCounts {
  std::int64_t queued = 0;         // waiting ones included
  std::int64_t waiting_quiet = 0;  // queued for a quiet window
};

/// GetJob, ListJobs and the queue's counts, each read in a constant number of store queries, but
/// for GetJob of a job that has run: its GPUs (and a split job's GPU report) are read back from its
/// runs, one indexed query and one look-up per run (job_gpu_records.h).
class JobQueries {
 public:
  explicit JobQueries(db::Store& store) : store_(store) {}

  v1::Job job(db::RowId id) const;  // ApplicationError(NotFound)
  /// Newest first; state UNSPECIFIED = every state; limit 0 = 50, at most 10000.
  /// Newest first; `host` non-empty: only jobs claimed by that host's daemons.
  std::vector<v1::Job> list(v1::JobState state, int limit, const std::string& host = "") const;
  QueueCounts queue_counts() const;
  /// How many jobs are in each state now, every state present (0 when none).
  std::map<db::JobState, std::int64_t> counts_by_state() const;

 private:
  db::Store& store_;
};

/// CancelJob: a queued job is cancelled in the store, a running one through the scheduler.
class JobCancellation {
 public:
  JobCancellation(db::Store& store, DaemonHooks& daemon) : store_(store), daemon_(daemon) {}
  /// The job as it is after the request; FailedPrecondition when it has already ended.
  v1::Job cancel(db::RowId id);

 private:
  db::Store& store_;
  DaemonHooks& daemon_;
};

/// Remeasure: queues a quiet-window re-run of a finished job (or of every job with contended runs),
/// one pending re-run per job.
class Remeasurement {
 public:
  Remeasurement(db::Store& store, DaemonHooks& daemon, const JobPolicy& options)
      : store_(store), daemon_(daemon), options_(options) {}
  /// `device` is the daemon's reading of co-tenant load: without one no quiet window can be found.
  v1::RemeasureResponse remeasure(const v1::RemeasureRequest& request, const cotenant::DeviceNow& device);

 private:
  bool has_pending_remeasure(db::RowId job_id);
  db::RowId queue_remeasure(const db::Job& original, const v1::RemeasureRequest& request,
                            std::int64_t deadline_ms);

  db::Store& store_;
  DaemonHooks& daemon_;
  const JobPolicy& options_;
  std::mutex mutex_;  // the pending check and the new job, together
};

/// Compare: resolves the two builds and delegates to CompareBuilds.
class BuildComparer {
 public:
  explicit BuildComparer(db::Store& store) : store_(store) {}
  /// NotFound for an unknown build, InvalidArgument for a bad option, FailedPrecondition when the
  /// two builds share no comparable series.
  v1::CompareResponse compare(const v1::CompareRequest& request) const;

 private:
  db::Store& store_;
};

}  // namespace qgate::jobs
