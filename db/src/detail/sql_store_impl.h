// The store's one class, declared once for the files that define it by table group: sql_store.cpp
// (opening, migrations), store_builds_jobs.cpp, store_runs.cpp, store_verdicts.cpp and
// store_history.cpp (trends, compares and the trend points kept in build_rollups). It speaks SQL
// that both engines run, through an SqlConnection (SQLite or PostgreSQL). Private to db/.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "qgate/common/gpu_routing.h"
#include "qgate/db/store.h"
#include "sql_checked.h"
#include "sql_connection.h"
#include "sql_records.h"

namespace qgate::db::detail {

inline std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline std::int64_t or_now(std::int64_t ms) { return ms != 0 ? ms : now_ms(); }

/// The schema version after which the runner fills build_rollups anew: that of the last migration that
/// creates or alters the table (0006 created it; 0007, 0010 and 0011 widened a point's key), so a
/// migration that adds a series field to it is refilled with no other change. A file migrated from
/// before 0006 has its table empty until then.
int build_rollups_version();

/// The statement that recomputes the trend points (build_rollups) of the runs that `scope`, a
/// condition on runs r, selects (store_history.cpp).
std::string rollup_recompute(std::string_view scope);

class SqlStore final : public Store {
 public:
  /// Migrates the database unless read_only (then it must be at this library's version already).
  SqlStore(std::unique_ptr<SqlConnection> connection, bool read_only)
      : read_only_(read_only), connection_(std::move(connection)) {
    migrate();
  }
  int schema_version() override;

  // --- Builds ---
  BuildInsert insert_build(const Build& build) override;
  std::optional<Build> find_build(RowId id) override;
  std::optional<Build> find_build_by_sha256(std::string_view sha256) override;
  std::optional<Build> find_latest_build_by_name(std::string_view name) override;
  std::vector<Build> list_builds(std::optional<std::string_view> name, int limit) override;

  // --- Build content (store_build_content.cpp) ---
  bool shared_by_hosts() const override { return connection_->engine() == SqlEngine::Postgresql; }
  bool put_build_content(std::string_view sha256, std::istream& content) override;
  bool has_build_content(std::string_view sha256) override;
  bool read_build_content(std::string_view sha256, const BuildContentSink& sink) override;

  // --- Jobs ---
  RowId create_job(const Job& job) override;
  std::optional<Job> find_job(RowId id) override;
  bool update_job_state(RowId id, JobState state, std::optional<std::string> error,
                        std::optional<JobState> only_if) override;
  void update_job_progress(RowId id, std::string_view progress_json) override;
  bool end_job(RowId id, JobState state, const std::string& error, const JobEnding& ending,
               std::optional<JobState> only_if) override;
  std::vector<Job> list_jobs(const JobFilter& filter) override;
  std::int64_t count_jobs(const JobFilter& filter) override;
  std::vector<JobListing> list_job_listings(const JobFilter& filter) override;
  std::optional<JobListing> find_job_listing(RowId id) override;
  using Store::claim_next_job;
  std::optional<Job> claim_next_job(const ClaimScope& scope) override;
  bool request_cancel(RowId id) override;
  bool set_job_quiet_only(RowId id, bool quiet_only) override;
  std::vector<RowId> jobs_with_contended_runs(std::int64_t since_ms) override;
  InterruptedJobs requeue_interrupted_jobs(int max_daemon_deaths, bool daemon_died) override;
  void set_claimant(const Claimant& claimant) override;
  LeaseRenewal renew_leases() override;
  InterruptedJobs requeue_expired_leases(int max_daemon_deaths) override;

  // --- Runs ---
  RowId add_run(const Run& run) override;
  void finish_run(RowId run_id, const RunResult& result, std::span<const Sample> samples) override;
  std::vector<RowId> record_runs(std::span<const RunBundle> bundles) override;
  ImportOutcome import_external(const ExternalImport& batch) override;
  std::optional<Run> find_run(RowId id) override;
  std::vector<Sample> run_samples(RowId run_id) override;
  std::int64_t count_runs(std::optional<RowId> job_id) override;

  // --- Parity, verdicts, co-tenant load ---
  void add_parity_cases(std::span<const ParityCaseRecord> cases) override;
  std::vector<ParityCaseRecord> parity_cases(RowId job_id) override;
  void put_verdict(const Verdict& verdict) override;
  bool finish_job_with_verdict(const Verdict& verdict, const JobEnding& ending,
                               std::string_view progress_json) override;
  std::optional<Verdict> find_verdict(RowId job_id) override;
  void put_cotenant(const CotenantSummary& summary,
                    std::span<const CotenantSample> samples) override;
  std::optional<CotenantSummary> find_cotenant(RowId run_id) override;
  std::vector<CotenantSample> cotenant_samples(RowId run_id) override;

  // --- History ---
  std::vector<TrendRow> query_trend(const TrendQuery& query) override;
  std::vector<TrendSummary> query_trend_summaries(const TrendQuery& query) override;
  std::vector<CompareRun> compare_runs(const CompareRunsQuery& query) override;
  std::vector<CompareRun> job_compare_runs(RowId job_id) override;
  std::string integrity_check() override;

  // --- The fleet's GPUs ---
  void publish_gpus(std::span<const FleetGpu> gpus) override;
  std::vector<FleetGpu> list_fleet_gpus(std::int64_t seen_since_ms) override;

 private:
  /// Which running jobs a recovery takes: a condition on jobs and the one value it binds.
  struct RecoveredScope {
    std::string condition;
    StoredValue value;
  };
  /// The running jobs `scope` selects, recovered (requeue_interrupted_jobs), in the caller's
  /// transaction.
  InterruptedJobs recover_running_jobs(const RecoveredScope& scope, int max_daemon_deaths, bool daemon_died);

  /// One external build's checks as a finished parity job, inside import_external's transaction.
  void import_checks(const ImportedChecks& checks, ImportOutcome& outcome);

  // A build's name (in the series key) and label (in a verdict's arms); remembered because bulk
  // loads ask for the same few. A build row never changes.
  struct BuildNaming {
    std::string name;
    std::string label;
  };

  /// Which trend points a write touched: (build, series key, tokens, week) groups of runs.
  struct RollupScopes {
    std::set<std::tuple<RowId, std::string, std::int64_t, std::int64_t>> groups;
  };

  template <class Body>
  auto guarded(std::string_view operation, Body&& body,
               std::source_location where = std::source_location::current())
      -> std::invoke_result_t<Body&> {
    std::lock_guard lock(mutex_);
    return detail::checked_sql(operation, connection_->where(), std::forward<Body>(body), where);
  }

  template <class Key>
  std::optional<Build> select_build(const char* where, const Key& key) {
    ScopedStatement select(prepared(fmt::format("SELECT {} FROM builds WHERE {}", build_record().column_list(), where)));
    bind_all(*select, key);
    if (!select->step()) return std::nullopt;
    return read_record(build_record(), *select);
  }

  // Jobs joined with their build, baseline and verdict: one query. `where` is over jobs j; `bind`
  // binds its parameters.
  template <class Bind>
  std::vector<JobListing> select_listings(const std::string& where, Bind&& bind) {
    const std::string sql = fmt::format(
        "SELECT {}, {}, {}, {} FROM jobs j JOIN builds b ON b.id = j.build_id "
        "LEFT JOIN builds bb ON bb.id = j.baseline_build_id "
        "LEFT JOIN verdicts v ON v.job_id = j.id WHERE {}",
        job_record().column_list("j"), build_record().column_list("b"), build_record().column_list("bb"),
        verdict_record().column_list("v"), where);
    ScopedStatement select(prepared(sql));
    bind(*select);
    std::vector<JobListing> listings;
    const int build_first = job_record().count();
    const int baseline_first = build_first + build_record().count();
    const int verdict_first = baseline_first + build_record().count();
    while (select->step()) {
      JobListing listing;
      listing.job = read_record(job_record(), *select);
      listing.build = read_record(build_record(), *select, build_first);
      if (!select->is_null(baseline_first))
        listing.baseline = read_record(build_record(), *select, baseline_first);
      if (!select->is_null(verdict_first))
        listing.verdict = with_labels(read_record(verdict_record(), *select, verdict_first), Labels::Read);
      listings.push_back(std::move(listing));
    }
    return listings;
  }

  // Fills in the type ratios, leaks and output identity of the listings' verdicts: one query per child table over
  // the jobs that `job_ids_sql` (a SELECT of job ids; `bind` binds it) names.
  template <class Bind>
  void attach_verdict_children(std::vector<JobListing>& listings, const std::string& job_ids_sql,
                               Bind&& bind) {
    std::unordered_map<RowId, Verdict*> by_job;
    for (JobListing& listing : listings) {
      if (listing.verdict) by_job[listing.verdict->job_id] = &*listing.verdict;
    }
    if (by_job.empty()) return;
    const std::string in_jobs = fmt::format("IN ({})", job_ids_sql);
    {
      ScopedStatement select(prepared(child_select_sql(type_ratio_record(), in_jobs)));
      bind(*select);
      while (select->step()) {
        const auto found = by_job.find(select->int64(0));
        if (found != by_job.end()) found->second->per_type.push_back(read_record(type_ratio_record(), *select, 1));
      }
    }
    {
      ScopedStatement select(prepared(child_select_sql(leak_record(), in_jobs)));
      bind(*select);
      while (select->step()) {
        const auto found = by_job.find(select->int64(0));
        if (found != by_job.end()) found->second->leaks.push_back(read_record(leak_record(), *select, 1));
      }
    }
    ScopedStatement select(prepared(child_select_sql(output_identity_record(), in_jobs, "job_id")));
    bind(*select);
    while (select->step()) {
      const auto found = by_job.find(select->int64(0));
      if (found != by_job.end()) found->second->identity = read_record(output_identity_record(), *select, 1);
    }
  }

  void migrate();

  /// What a migration needs done in code, in its transaction: the rows that the store's own
  /// statements compute, so a migration file never repeats them.
  void after_migration(int version);
  SqlStatement& prepared(const std::string& sql) { return connection_->prepared(sql); }
  std::optional<Job> select_job(RowId id);
  /// Writes a new job's labels (job_labels), in the caller's transaction.
  void insert_job_labels(RowId job_id, const std::vector<std::string>& labels);

  /// Fills in the labels of `jobs` from job_labels: one query over the jobs that `job_ids_sql` (a
  /// SELECT of job ids; `bind` binds it) names.
  template <class Bind>
  void attach_job_labels(const std::vector<Job*>& jobs, const std::string& job_ids_sql, Bind&& bind) {
    if (jobs.empty()) return;
    std::unordered_map<RowId, Job*> by_id;
    for (Job* job : jobs) by_id[job->id] = job;
    ScopedStatement select(prepared(fmt::format(
        "SELECT job_id, label FROM job_labels WHERE job_id IN ({}) ORDER BY job_id, label", job_ids_sql)));
    bind(*select);
    while (select->step()) {
      const auto found = by_id.find(select->int64(0));
      if (found != by_id.end()) found->second->labels.push_back(select->text(1));
    }
  }

  // The verdict upsert with its child rows (replaced), inside the caller's transaction.
  void upsert_verdict(const Verdict& verdict);
  bool job_exists(RowId id);
  const BuildNaming& build_naming(RowId build_id);
  const std::string& build_name(RowId build_id);

  // A verdict's arm labels as the store keeps them (Stored: empty where the arm's build says the
  // same) or as they are read (Read: the build's own label where none is kept).
  enum class Labels { Stored, Read };
  Verdict with_labels(Verdict verdict, Labels as);

  /// Rewrites the trend points of every group in `scopes` from their runs. Called inside the
  /// transaction of the write that changed those runs, so points and runs commit together.
  void refresh_rollups(const RollupScopes& scopes);

  /// Adds the group run `run_id` belongs to now (none when there is no such run).
  void add_group_of_run(RowId run_id, RollupScopes& scopes);
  void refresh_rollups_of_run(RowId run_id);

  /// Stores each part of the finished run `run_id` as a row of its own: the run's row with the
  /// part's weight type and figures, part_of the run (its series key made anew, since the weight
  /// type is part of it). A finish that is written again replaces the parts.
  void insert_parts(RowId run_id, std::span<const RunPart> parts, RollupScopes& scopes);
  std::vector<RowId> part_ids(RowId run_id);

  /// Inserts a run; `scopes` (when given) gains the trend point group it belongs to.
  RowId insert_run(const Run& run, std::optional<bool> contended, RollupScopes* scopes = nullptr);
  void insert_samples(RowId run_id, std::span<const Sample> samples);
  void upsert_cotenant(RowId run_id, const CotenantSummary& summary);
  void insert_cotenant_samples(RowId run_id, std::span<const CotenantSample> samples);

  bool read_only_;
  std::mutex mutex_;
  Claimant claimant_;
  std::unique_ptr<SqlConnection> connection_;
  std::unordered_map<RowId, BuildNaming> build_namings_;
};

}  // namespace qgate::db::detail
