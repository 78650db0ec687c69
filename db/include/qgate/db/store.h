// qgate::db::Store: everything qgated keeps, behind one interface, on one of two engines: SQLite, the
// embedded default (sqlite_store.h), or PostgreSQL, which a fleet of daemons shares
// (postgres_store.h). Both run the same store code, tables and migrations.
//
// Every method either completes or throws StoreError and leaves the database as it was: each write
// is one transaction. Implementations are safe to call from several threads.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qgate/db/build_content.h"
#include "qgate/db/records.h"
#include "qgate/db/store_error.h"

namespace qgate::db {

/// What crash recovery at start-up did with the jobs a previous daemon left running.
struct InterruptedJobs {
  std::vector<RowId> requeued;  // queued again
  std::vector<RowId> given_up;  // failed: their daemon died under them max_daemon_deaths times
};
/// The daemon deaths a job survives: the second ends it (docs/security.md).
inline constexpr int kMaxDaemonDeaths = 2;

/// Who claims jobs through a store, and how long a claim holds without a renewal (docs/fleet.md).
/// A daemon's id stays the same across its restarts (its host and data dir), so a daemon that starts
/// again takes back what its earlier life left running; other daemons' jobs it leaves alone until
/// their leases run out.
struct Claimant {
  std::string id;                 // "" until set: jobs are claimed with no claimant and no lease
  std::int64_t lease_ms = 60000;  // a claim held this long past its last renewal
  std::string host;               // written on the jobs it claims (JobFilter::host)
};

/// The queue's jobs a claimer may take: those its GPU and daemon can run (docs/fleet.md).
struct ClaimScope {
  /// Jobs pinned to this ordinal; none = the jobs any GPU may take.
  std::optional<int> ordinal;
  /// The GPU's name and uuid: a job that asks for a model or uuid is taken only by a GPU of it.
  std::string gpu_name;
  std::string gpu_uuid;
  /// The daemon's labels: a job is taken only when they include every label it asks for.
  std::vector<std::string> labels;
  /// The GPUs the daemon serves: a job that needs more at once (a split A/B) is left to another.
  int gpus_served = 1;
  /// The GPU is quiet now: jobs waiting for a quiet window may be taken too.
  bool gpu_quiet = false;
};

/// What a lease renewal found of the claimant's running jobs.
struct LeaseRenewal {
  std::vector<RowId> held;              // running under the claimant's lease, now renewed
  std::vector<RowId> cancel_requested;  // of those, the ones a daemon elsewhere was asked to cancel
};

/// One GPU of one daemon of the fleet, as that daemon last published it (table fleet_gpus).
struct FleetGpu {
  std::string claimant;           // the daemon's claimant id
  int ordinal = 0;
  std::string host;
  std::string name;
  std::string uuid;
  std::vector<std::string> labels;  // the daemon's
  std::string backend;
  std::string qgate_version;
  std::optional<RowId> running_job_id;
  std::string cotenant_state;     // "quiet", "contended", ...; '' = unknown
  std::string cotenant_reason;
  std::int64_t seen_ms = 0;       // when the daemon last published it
};

/// The schema version this library migrates to (the number of migrations), on either engine.
int schema_version_known();

class Store {
 public:
  virtual ~Store() = default;

  /// The schema version the open database is at (SQLite: PRAGMA user_version; PostgreSQL: the
  /// table schema_migrations).
  virtual int schema_version() = 0;

  // --- Builds ---

  /// Stores a build unless one with the same sha256 exists; either way returns the stored id.
  virtual BuildInsert insert_build(const Build& build) = 0;
  virtual std::optional<Build> find_build(RowId id) = 0;
  virtual std::optional<Build> find_build_by_sha256(std::string_view sha256) = 0;
  /// The most recently created build of that name (names are shared by successive builds).
  virtual std::optional<Build> find_latest_build_by_name(std::string_view name) = 0;
  /// Newest first; all names when `name` is empty.
  virtual std::vector<Build> list_builds(std::optional<std::string_view> name, int limit) = 0;

  // --- Build content (docs/fleet.md, "Builds on every host") ---

  /// Whether this store is one database that daemons on several hosts share (PostgreSQL): a build
  /// one daemon took in then travels to the others as content stored here.
  virtual bool shared_by_hosts() const = 0;
  /// Stores what `content` reads, to its end, as the content of `sha256`, in chunks of
  /// kBuildContentChunkBytes, all in one transaction. Returns false, reading nothing, when that
  /// content is stored already. Bytes that do not hash to `sha256` are refused
  /// (StoreError(InvalidValue)) and nothing is written.
  virtual bool put_build_content(std::string_view sha256, std::istream& content) = 0;
  virtual bool has_build_content(std::string_view sha256) = 0;
  /// Streams the content of `sha256` into `sink`, chunk by chunk in order, and checks at the end that
  /// the bytes have the stored size and hash to `sha256`. Returns false, calling no sink, when none
  /// is stored. A missing chunk or bytes that do not match throw StoreError(Corrupt), after the sink
  /// has taken some of them: write them somewhere temporary until this returns true.
  virtual bool read_build_content(std::string_view sha256, const BuildContentSink& sink) = 0;

  // --- Jobs ---

  /// Writes the job as queued and commits durably before returning: the daemon answers the
  /// submit RPC only after this, so an acknowledged job survives a crash or a power cut.
  virtual RowId create_job(const Job& job) = 0;
  virtual std::optional<Job> find_job(RowId id) = 0;
  /// Moves a job to `state`; sets started_ms on the first move to running and finished_ms on a
  /// terminal state; stores `error` when given. With `only_if`, changes the job only when it is in
  /// that state and returns whether it did (a cancel that lost a race to the scheduler returns
  /// false). Throws StoreError(NotFound) when no job has that id.
  virtual bool update_job_state(RowId id, JobState state, std::optional<std::string> error,
                                std::optional<JobState> only_if) = 0;
  virtual void update_job_progress(RowId id, std::string_view progress_json) = 0;
  /// A failed or cancelled end with its disposition, in one transaction: the state, the error,
  /// finished_ms, the disposition and its detail. With `only_if`, only from that state; returns
  /// whether the job changed. Throws StoreError(NotFound) when no job has that id.
  virtual bool end_job(RowId id, JobState state, const std::string& error, const JobEnding& ending,
                       std::optional<JobState> only_if) = 0;
  /// Newest first.
  virtual std::vector<Job> list_jobs(const JobFilter& filter) = 0;
  /// How many jobs match the filter (its limit is not applied).
  virtual std::int64_t count_jobs(const JobFilter& filter) = 0;
  /// Newest first, each with its build, baseline and verdict (type ratios and leaks included), in a
  /// constant number of queries whatever the number of jobs.
  virtual std::vector<JobListing> list_job_listings(const JobFilter& filter) = 0;
  virtual std::optional<JobListing> find_job_listing(RowId id) = 0;
  /// Who claims jobs through this store from now on (claim_next_job, renew_leases,
  /// requeue_interrupted_jobs).
  virtual void set_claimant(const Claimant& claimant) = 0;
  /// Atomically takes the oldest queued job within the scope and marks it running, held by the
  /// claimant under a lease, with the claimant's host. Jobs that wait for a quiet window
  /// (quiet_only) are passed over unless the scope's GPU is quiet.
  virtual std::optional<Job> claim_next_job(const ClaimScope& scope) = 0;
  /// The same for a GPU with no name, uuid or labels that a daemon of any size serves: only jobs
  /// that ask for no model, uuid or label (single-daemon tests and tools).
  std::optional<Job> claim_next_job(std::optional<int> device, bool gpu_quiet = false) {
    ClaimScope scope;
    scope.ordinal = device;
    scope.gpus_served = 2;
    scope.gpu_quiet = gpu_quiet;
    return claim_next_job(scope);
  }
  /// Asks the daemon that runs a job to cancel it, through the job's row: that daemon's next lease
  /// renewal sees it. Returns false when the job is not running.
  virtual bool request_cancel(RowId id) = 0;
  /// A queued job stops (or starts) waiting for a quiet window. Returns false when the job is not
  /// queued any more.
  virtual bool set_job_quiet_only(RowId id, bool quiet_only) = 0;
  /// Finished jobs (done) created at or after since_ms with at least one run whose co-tenant load
  /// was contended, oldest first.
  virtual std::vector<RowId> jobs_with_contended_runs(std::int64_t since_ms) = 0;
  /// Extends the lease of every job the claimant runs, to now + lease_ms, and says which they are
  /// and which of them were asked to cancel. A job the claimant thinks it runs that is not held
  /// has lost its lease: another daemon may have taken it.
  virtual LeaseRenewal renew_leases() = 0;
  /// Jobs whose lease ran out (any claimant's: a daemon that died or lost the database) are
  /// recovered as requeue_interrupted_jobs recovers a dead daemon's jobs: back to queued with
  /// attempts + 1 and their unfinished runs interrupted, or ended when that makes
  /// `max_daemon_deaths`.
  virtual InterruptedJobs requeue_expired_leases(int max_daemon_deaths = kMaxDaemonDeaths) = 0;
  /// Crash recovery at start-up: jobs left running by a previous daemon go back to queued with
  /// attempts + 1 (attempts counts the daemons that died under a job), and their unfinished runs
  /// are marked interrupted. A job whose daemon has now died under it `max_daemon_deaths` times is
  /// not run again: it ends failed, disposition crashed, with that reason, since a build that
  /// kills its parent would otherwise take every restarted daemon down with it. A daemon that
  /// stops in order calls it with `daemon_died` false: its jobs go back to the queue uncounted.
  /// Only the claimant's own jobs and jobs claimed with no claimant are taken: another live
  /// daemon's are not (requeue_expired_leases recovers a dead one's).
  virtual InterruptedJobs requeue_interrupted_jobs(int max_daemon_deaths = kMaxDaemonDeaths,
                                                   bool daemon_died = true) = 0;

  // --- Runs ---

  /// Starts a run (state running unless run.state says otherwise). Returns its id.
  virtual RowId add_run(const Run& run) = 0;
  /// Writes the run's result and its samples in one transaction, and stores each of result.parts as
  /// a run of its own (the whole run's row with the part's weight type and figures, part_of the run).
  virtual void finish_run(RowId run_id, const RunResult& result,
                          std::span<const Sample> samples) = 0;
  /// Stores finished runs with their samples and co-tenant rows, the whole batch in one
  /// transaction (imports of external results, bulk loads). Returns the new run ids in order.
  virtual std::vector<RowId> record_runs(std::span<const RunBundle> bundles) = 0;
  /// Stores imported builds (found by sha256 when already there) and their runs in one
  /// transaction: everything or nothing. A run already stored by an earlier import of the same
  /// results is not stored twice.
  virtual ImportOutcome import_external(const ExternalImport& batch) = 0;
  virtual std::optional<Run> find_run(RowId id) = 0;
  virtual std::vector<Sample> run_samples(RowId run_id) = 0;
  /// All runs, or the whole runs of one job (its parts are not counted).
  virtual std::int64_t count_runs(std::optional<RowId> job_id) = 0;

  // --- Parity, verdicts, co-tenant load ---

  /// The whole batch in one transaction: all cases are stored or none.
  virtual void add_parity_cases(std::span<const ParityCaseRecord> cases) = 0;
  virtual std::vector<ParityCaseRecord> parity_cases(RowId job_id) = 0;
  /// Inserts or replaces the verdict of verdict.job_id, with its type ratios and leaks.
  virtual void put_verdict(const Verdict& verdict) = 0;
  /// The end of a job that ran to its verdict, atomically: the verdict (all its rows), the
  /// disposition, the final progress and the move from running to done. Returns false (writing
  /// nothing) when the job is no longer running.
  virtual bool finish_job_with_verdict(const Verdict& verdict, const JobEnding& ending,
                                       std::string_view progress_json) = 0;
  virtual std::optional<Verdict> find_verdict(RowId job_id) = 0;
  /// Inserts or replaces the run's co-tenant summary and per-sample readings, and copies the
  /// summary's contended flag onto the run so trend queries need no join.
  virtual void put_cotenant(const CotenantSummary& summary,
                            std::span<const CotenantSample> samples) = 0;
  virtual std::optional<CotenantSummary> find_cotenant(RowId run_id) = 0;
  virtual std::vector<CotenantSample> cotenant_samples(RowId run_id) = 0;

  // --- History ---

  /// Finished runs with a tokens_per_s, oldest first.
  virtual std::vector<TrendRow> query_trend(const TrendQuery& query) = 0;
  /// Trend points, one per build, series and week, oldest first (by first run), for those with a
  /// kept run at or after since_ms, read from the rollups kept at write time (build_rollups): one
  /// index range scan. A point names its newest job; the runs behind it are query_trend's (one
  /// job's with job_id), or compare_runs' for its build. A query with job_id is refused
  /// (InvalidValue): a job's figures are its runs.
  virtual std::vector<TrendSummary> query_trend_summaries(const TrendQuery& query) = 0;
  /// One build's finished runs with a tokens_per_s that match the query, contended ones included,
  /// each with its series fields and its job's spec; oldest first. One query, no lookups per run.
  virtual std::vector<CompareRun> compare_runs(const CompareRunsQuery& query) = 0;
  /// One job's finished runs with a tokens_per_s, whichever of its builds they ran, contended ones
  /// included, in compare_runs' shape; oldest first (started_ms, then id). Read through runs_by_job:
  /// bounded by the job's own runs, never by how many runs its builds have from other jobs.
  virtual std::vector<CompareRun> job_compare_runs(RowId job_id) = 0;

  // --- The fleet's GPUs ---

  /// Replaces the claimant's rows of fleet_gpus with these (its GPUs now), seen now.
  virtual void publish_gpus(std::span<const FleetGpu> gpus) = 0;
  /// Every daemon's GPUs as last published, by host, claimant and ordinal; rows not seen since
  /// `seen_since_ms` are left out.
  virtual std::vector<FleetGpu> list_fleet_gpus(std::int64_t seen_since_ms) = 0;

  /// The backend's own consistency check; "ok" when healthy.
  virtual std::string integrity_check() = 0;
};

}  // namespace qgate::db
