// The SQLite implementation of qgate::db::Store: opening (file mode, pragmas), migrations, and every
// query. One connection per store, guarded by a mutex; prepared statements are cached per SQL text.
#include "qgate/db/sqlite_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "detail/compare_runs_sql.h"
#include "detail/migrations.h"
#include "detail/sqlite_checked.h"
#include "detail/sqlite_records.h"

namespace qgate::db {
namespace detail {

StoreErrorKind kind_from_sqlite_code(int sqlite_code) {
  if (sqlite_code < 0) return StoreErrorKind::Other;  // SQLiteCpp's own misuse errors
  switch (sqlite_code & 0xff) {                       // primary code of an extended one
    case SQLITE_CONSTRAINT: return StoreErrorKind::Constraint;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH: return StoreErrorKind::ReadOnly;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return StoreErrorKind::Busy;
    case SQLITE_FULL: return StoreErrorKind::Full;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return StoreErrorKind::Corrupt;
    case SQLITE_CANTOPEN: return StoreErrorKind::CannotOpen;
    case SQLITE_IOERR: return StoreErrorKind::Io;
    default: return StoreErrorKind::Other;
  }
}

}  // namespace detail

namespace {

using detail::bind_all;
using detail::bind_child;
using detail::bind_record;
using detail::child_insert_sql;
using detail::child_select_sql;
using detail::insert_sql;
using detail::read_record;
using detail::upsert_sql;
using detail::ScopedStatement;

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::int64_t or_now(std::int64_t ms) { return ms != 0 ? ms : now_ms(); }

// Creates the database file with mode 0600 before SQLite touches it. SQLite's unix VFS gives the
// -wal and -shm files the mode of the database file, so all three stay private to the daemon's
// user. Done with open(2)+fchmod rather than umask(2): umask is process-wide and racy with threads.
void create_private_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return;  // created meanwhile by someone else: theirs to keep as it is
    throw StoreError(StoreErrorKind::CannotOpen,
                     fmt::format("create database {}: {}", path.string(), std::strerror(errno)));
  }
  // open(2) applies the umask; fchmod makes it exactly 0600 whatever the umask.
  const int chmod_result = ::fchmod(fd, S_IRUSR | S_IWUSR);
  const int chmod_errno = errno;
  ::close(fd);
  if (chmod_result != 0) {
    throw StoreError(StoreErrorKind::CannotOpen, fmt::format("chmod 0600 {}: {}", path.string(),
                                                             std::strerror(chmod_errno)));
  }
}

/// The WHERE clause of a JobFilter over the jobs table aliased `alias`, with its parameters bound
/// from index 1 by bind_job_filter in the same order.
std::string job_filter_sql(const JobFilter& filter, std::string_view alias) {
  std::string sql;
  auto add = [&](std::string_view condition) {
    sql += sql.empty() ? " WHERE " : " AND ";
    sql += fmt::format("{}.{}", alias, condition);
  };
  if (filter.state) add("state = ?");
  if (filter.quiet_only) add("quiet_only = ?");
  if (filter.remeasure_of) add("remeasure_of = ?");
  return sql;
}

/// Binds a JobFilter's parameters from `index` on; returns the next free index.
int bind_job_filter(SQLite::Statement& statement, const JobFilter& filter, int index) {
  if (filter.state) detail::bind_value(statement, index++, to_string(*filter.state));
  if (filter.quiet_only) detail::bind_value(statement, index++, *filter.quiet_only);
  if (filter.remeasure_of) detail::bind_value(statement, index++, *filter.remeasure_of);
  return index;
}

/// A trend point's week: 7 days from a Monday 00:00 UTC. The Unix epoch was a Thursday, so weeks
/// are counted from Monday 1969-12-29, 3 days before it (and integer division, which truncates, is
/// the floor for every time since the epoch).
constexpr std::int64_t kWeekMs = 7LL * 24 * 3600 * 1000;
constexpr std::int64_t kEpochAfterMondayMs = 3LL * 24 * 3600 * 1000;
/// The week of runs.started_ms, in SQL: the one place it is computed.
const std::string kWeekOfRun =
    fmt::format("((started_ms + {0}) / {1}) * {1} - {0}", kEpochAfterMondayMs, kWeekMs);

/// A trend point's key: one build's runs of one series in one week (week_ms: kWeekOfRun), timed one
/// way (timing: the job's, '' for runs no job measured; migration 0007).
constexpr const char* kRollupGroup =
    "build_id, series_key, tokens, week_ms, timing, profile, weight_type, path, backend, gpu_name";

/// The trend points (build_rollups, migration 0006) of the runs in a scope, recomputed from those
/// runs: one row per build, series (series key, profile, weight type, path, tokens, backend, GPU),
/// week and timing. The one statement that defines a point: the write path runs it with the scope of one
/// (build, series key, tokens, week) group after deleting that group's rows, and the migration
/// runner runs it over every run ("1") right after 0006 creates the table. {scope} is a condition
/// on runs r; {group} is a point's key (kRollupGroup), spelled once; {week} is kWeekOfRun.
constexpr const char* kRollupRecompute = R"sql(INSERT INTO build_rollups (build_id, series_key, tokens, week_ms, timing, profile, weight_type, path, backend,
                           gpu_name, build_name, build_sha256, commit_sha, first_ms, last_ms, jobs,
                           runs, contended_runs, unknown_runs, quiet_runs, quiet_median, quiet_low,
                           quiet_high, quiet_last_job, open_runs, open_median, open_low, open_high,
                           open_last_job, all_median, all_low, all_high, all_last_job)
WITH scoped AS (
  SELECT build_id, series_key, tokens, {week} AS week_ms,
         COALESCE((SELECT j.timing FROM jobs j WHERE j.id = r.job_id), '') AS timing,
         profile, weight_type, path, backend, gpu_name, job_id, started_ms, tokens_per_s AS v, contended AS c
  FROM runs r
  WHERE r.state = 'done' AND r.tokens_per_s IS NOT NULL AND {scope}
),
ranked AS (
  SELECT scoped.*,
         row_number() OVER (PARTITION BY {group} ORDER BY v) AS all_rank,
         row_number() OVER (PARTITION BY {group}, c IS 0 ORDER BY v) AS quiet_rank,
         row_number() OVER (PARTITION BY {group}, c IS NOT 1 ORDER BY v) AS open_rank
  FROM scoped
),
counted AS (
  SELECT ranked.*,
         count(*) OVER g AS all_n,
         sum(c IS 0) OVER g AS quiet_n,
         sum(c IS NOT 1) OVER g AS open_n
  FROM ranked
  WINDOW g AS (PARTITION BY {group})
)
SELECT x.build_id, x.series_key, x.tokens, x.week_ms, x.timing, x.profile, x.weight_type, x.path, x.backend, x.gpu_name,
       b.name, b.sha256, b.commit_sha, x.first_ms, x.last_ms, x.jobs, x.runs, x.contended_runs,
       x.unknown_runs, x.quiet_runs, x.quiet_median, x.quiet_low, x.quiet_high, x.quiet_last_job,
       x.open_runs, x.open_median, x.open_low, x.open_high, x.open_last_job, x.all_median, x.all_low,
       x.all_high, x.all_last_job
FROM (
  SELECT {group},
         min(started_ms) AS first_ms, max(started_ms) AS last_ms,
         count(DISTINCT job_id) AS jobs, count(*) AS runs,
         sum(c IS 1) AS contended_runs, sum(c IS NULL) AS unknown_runs,
         sum(c IS 0) AS quiet_runs,
         avg(CASE WHEN c IS 0 AND quiet_rank IN ((quiet_n + 1) / 2, (quiet_n + 2) / 2) THEN v END) AS quiet_median,
         min(CASE WHEN c IS 0 THEN v END) AS quiet_low,
         max(CASE WHEN c IS 0 THEN v END) AS quiet_high,
         COALESCE(max(CASE WHEN c IS 0 THEN job_id END), 0) AS quiet_last_job,
         sum(c IS NOT 1) AS open_runs,
         avg(CASE WHEN c IS NOT 1 AND open_rank IN ((open_n + 1) / 2, (open_n + 2) / 2) THEN v END) AS open_median,
         min(CASE WHEN c IS NOT 1 THEN v END) AS open_low,
         max(CASE WHEN c IS NOT 1 THEN v END) AS open_high,
         COALESCE(max(CASE WHEN c IS NOT 1 THEN job_id END), 0) AS open_last_job,
         avg(CASE WHEN all_rank IN ((all_n + 1) / 2, (all_n + 2) / 2) THEN v END) AS all_median,
         min(v) AS all_low, max(v) AS all_high, COALESCE(max(job_id), 0) AS all_last_job
  FROM counted
  GROUP BY {group}
) x JOIN builds b ON b.id = x.build_id)sql";

/// kRollupRecompute over the runs that `scope` (a condition on runs r) selects.
std::string rollup_recompute(std::string_view scope) {
  return fmt::format(kRollupRecompute, fmt::arg("scope", scope), fmt::arg("group", kRollupGroup),
                     fmt::arg("week", kWeekOfRun));
}

/// The schema version whose migration creates build_rollups, after which the runner fills it.
constexpr int kBuildRollupsVersion = 7;  // 0006 created it, 0007 added the timing to its key

class SqliteStore final : public Store {
 public:
  explicit SqliteStore(const SqliteOptions& options)
      : path_(options.path.string()), read_only_(options.read_only),
        database_(open_database(options)) {
    configure(options);
    migrate();
  }

  int schema_version() override {
    return guarded("schema_version", [&] { return read_user_version(); });
  }

  // --- Builds ---

  BuildInsert insert_build(const Build& build) override {
    return guarded("insert_build", [&] {
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::IMMEDIATE);
      if (auto existing = select_build("sha256 = ?", build.sha256)) {
        return BuildInsert{existing->id, false};
      }
      Build row = build;
      row.created_ms = or_now(row.created_ms);
      ScopedStatement insert(prepared(insert_sql(build_record())));
      bind_record(*insert, build_record(), row);
      insert->exec();
      const RowId id = database_.getLastInsertRowid();
      transaction.commit();
      return BuildInsert{id, true};
    });
  }

  std::optional<Build> find_build(RowId id) override {
    return guarded("find_build", [&] { return select_build("id = ?", id); });
  }

  std::optional<Build> find_build_by_sha256(std::string_view sha256) override {
    return guarded("find_build_by_sha256", [&] { return select_build("sha256 = ?", sha256); });
  }

  std::optional<Build> find_latest_build_by_name(std::string_view name) override {
    return guarded("find_latest_build_by_name", [&] {
      return select_build("name = ? ORDER BY created_ms DESC, id DESC LIMIT 1", name);
    });
  }

  std::vector<Build> list_builds(std::optional<std::string_view> name, int limit) override {
    return guarded("list_builds", [&] {
      std::vector<Build> out;
      ScopedStatement select(prepared(fmt::format(
          "SELECT {} FROM builds WHERE (? IS NULL OR name = ?) ORDER BY created_ms DESC, id DESC LIMIT ?",
          build_record().column_list())));
      std::optional<std::string> n;
      if (name) n = std::string(*name);
      bind_all(*select, n, n, limit);
      while (select->executeStep()) out.push_back(read_record(build_record(), *select));
      return out;
    });
  }

  // --- Jobs ---

  RowId create_job(const Job& job) override {
    return guarded("create_job", [&] {
      // The submit RPC's promise: this commit alone is synced as well (synchronous=FULL), so an
      // acknowledged job survives a power cut, not only a daemon crash.
      DurableCommitScope durable(database_);
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::IMMEDIATE);
      Job row = job;
      row.state = JobState::Queued;
      row.created_ms = or_now(row.created_ms);
      row.started_ms.reset();
      row.finished_ms.reset();
      ScopedStatement insert(prepared(insert_sql(job_record())));
      bind_record(*insert, job_record(), row);
      insert->exec();
      const RowId id = database_.getLastInsertRowid();
      transaction.commit();
      return id;
    });
  }

  std::optional<Job> find_job(RowId id) override {
    return guarded("find_job", [&] { return select_job(id); });
  }

  bool update_job_state(RowId id, JobState state, std::optional<std::string> error,
                        std::optional<JobState> only_if) override {
    return guarded("update_job_state", [&] {
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::IMMEDIATE);
      const std::string sql = fmt::format(
          "UPDATE jobs SET state = ?1, error = COALESCE(?2, error), "
          "started_ms = CASE WHEN ?1 = 'running' AND started_ms IS NULL THEN ?3 ELSE started_ms END, "
          "finished_ms = CASE WHEN ?4 = 1 THEN ?3 ELSE finished_ms END "
          "WHERE id = ?5{}",
          only_if ? " AND state = ?6" : "");
      ScopedStatement update(prepared(sql));
      bind_all(*update, to_string(state), error, now_ms(), is_terminal(state), id);
      if (only_if) bind_all_from(*update, 6, to_string(*only_if));
      const int changed = update->exec();
      if (changed == 0 && !job_exists(id)) {
        throw StoreError(StoreErrorKind::NotFound, fmt::format("update_job_state: no job {}", id));
      }
      transaction.commit();
      return changed > 0;
    });
  }

  void update_job_progress(RowId id, std::string_view progress_json) override {
    guarded("update_job_progress", [&] {
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::IMMEDIATE);
      ScopedStatement update(prepared("UPDATE jobs SET progress_json = ? WHERE id = ?"));
      bind_all(*update, progress_json, id);
      if (update->exec() == 0) {
        throw StoreError(StoreErrorKind::NotFound,
                         fmt::format("update_job_progress: no job {}", id));
      }
      transaction.commit();
    });
  }

  bool end_job(RowId id, JobState state, const std::string& error, const JobEnding& ending,
               std::optional<JobState> only_if) override {
    return guarded("end_job", [&] {
      if (!is_terminal(state)) {
        throw StoreError(StoreErrorKind::InvalidValue,
                         fmt::format("end_job: {} is not an end state", to_string(state)));
      }
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::IMMEDIATE);
      const std::string sql = fmt::format(
          "UPDATE jobs SET state = ?, error = ?, finished_ms = ?, disposition = ?, "
          "disposition_detail = ? WHERE id = ?{}",
          only_if ? " AND state = ?" : "");
      ScopedStatement update(prepared(sql));
      bind_all(*update, to_string(state), error, now_ms(), to_string(ending.disposition),
               ending.detail, id);
      if (only_if) bind_all_from(*update, 7, to_string(*only_if));
      const int changed = update->exec();
      if (changed == 0 && !job_exists(id)) {
        throw StoreError(StoreErrorKind::NotFound, fmt::format("end_job: no job {}", id));
      }
      transaction.commit();
      return changed > 0;
    });
  }

  std::vector<Job> list_jobs(const JobFilter& filter) override {
    return guarded("list_jobs", [&] {
      const std::string sql =
          fmt::format("SELECT {} FROM jobs j{} ORDER BY j.created_ms DESC, j.id DESC LIMIT ?",
                      job_record().column_list("j"), job_filter_sql(filter, "j"));
      ScopedStatement select(prepared(sql));
      const int next = bind_job_filter(*select, filter, 1);
      detail::bind_value(*select, next, filter.limit);
      std::vector<Job> jobs;
      while (select->executeStep()) jobs.push_back(read_record(job_record(), *select));
      return jobs;
    });
  }

  std::int64_t count_jobs(const JobFilter& filter) override {
    return guarded("count_jobs", [&] {
      ScopedStatement select(
          prepared(fmt::format("SELECT COUNT(*) FROM jobs j{}", job_filter_sql(filter, "j"))));
      bind_job_filter(*select, filter, 1);
      select->executeStep();
      return select->getColumn(0).getInt64();
    });
  }

  std::vector<JobListing> list_job_listings(const JobFilter& filter) override {
    return guarded("list_job_listings", [&] {
      // One read transaction, so the three queries see one snapshot.
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::DEFERRED);
      const std::string matching =
          fmt::format("SELECT j.id FROM jobs j{} ORDER BY j.created_ms DESC, j.id DESC LIMIT ?",
                      job_filter_sql(filter, "j"));
      std::vector<JobListing> listings = select_listings(
          fmt::format("j.id IN ({}) ORDER BY j.created_ms DESC, j.id DESC", matching),
          [&](SQLite::Statement& statement) {
            const int next = bind_job_filter(statement, filter, 1);
            detail::bind_value(statement, next, filter.limit);
          });
      attach_verdict_children(listings, matching, [&](SQLite::Statement& statement) {
        const int next = bind_job_filter(statement, filter, 1);
        detail::bind_value(statement, next, filter.limit);
      });
      transaction.commit();
      return listings;
    });
  }

  std::optional<JobListing> find_job_listing(RowId id) override {
    return guarded("find_job_listing", [&]() -> std::optional<JobListing> {
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::DEFERRED);
      auto bind_id = [&](SQLite::Statement& statement) { detail::bind_value(statement, 1, id); };
      std::vector<JobListing> listings = select_listings("j.id = ?", bind_id);
      attach_verdict_children(listings, "SELECT ?", bind_id);
      transaction.commit();
      if (listings.empty()) return std::nullopt;
      return std::move(listings.front());
    });
  }

  using Store::claim_next_job;
  std::optional<Job> claim_next_job(std::optional<int> device, bool gpu_quiet) override {
    return guarded("claim_next_job", [&]() -> std::optional<Job> {
      // IMMEDIATE takes the write lock before the SELECT, so two claimers (threads or daemons
      // sharing the file) cannot both see the same queued job.
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::IMMEDIATE);
      const std::string sql = fmt::format(
          "SELECT id FROM jobs WHERE state = 'queued'{}{} ORDER BY created_ms, id LIMIT 1",
          device ? " AND device = ?" : "", gpu_quiet ? "" : " AND quiet_only = 0");
      std::optional<RowId> id;
      {
        ScopedStatement select(prepared(sql));
        if (device) bind_all(*select, *device);
        if (select->executeStep()) id = select->getColumn(0).getInt64();
      }
      if (!id) return std::nullopt;
      ScopedStatement update(prepared(
          "UPDATE jobs SET state = 'running', started_ms = ? WHERE id = ? AND state = 'queued'"));
      bind_all(*update, now_ms(), *id);
      update->exec();
      auto job = select_job(*id);
      transaction.commit();
      return job;
    });
  }

  bool set_job_quiet_only(RowId id, bool quiet_only) override {
    return guarded("set_job_quiet_only", [&] {
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::IMMEDIATE);
      ScopedStatement update(prepared("UPDATE jobs SET quiet_only = ? WHERE id = ? AND state = 'queued'"));
      bind_all(*update, quiet_only, id);
      const int changed = update->exec();
      if (changed == 0 && !job_exists(id)) {
        throw StoreError(StoreErrorKind::NotFound, fmt::format("set_job_quiet_only: no job {}", id));
      }
      transaction.commit();
      return changed > 0;
    });
  }

  std::vector<RowId> jobs_with_contended_runs(std::int64_t since_ms) override {
    return guarded("jobs_with_contended_runs", [&] {
      std::vector<RowId> ids;
      ScopedStatement select(prepared(
          "SELECT DISTINCT j.id FROM jobs j JOIN runs r ON r.job_id = j.id JOIN cotenant c ON c.run_id = r.id "
          "WHERE j.state = 'done' AND j.created_ms >= ? AND c.contended = 1 ORDER BY j.id"));
      bind_all(*select, since_ms);
      while (select->executeStep()) ids.push_back(select->getColumn(0).getInt64());
      return ids;
    });
  }

  InterruptedJobs requeue_interrupted_jobs(int max_daemon_deaths, bool daemon_died) override {
    return guarded("requeue_interrupted_jobs", [&] {
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::IMMEDIATE);
      InterruptedJobs out;
      {
        ScopedStatement select(prepared("SELECT id, attempts FROM jobs WHERE state = 'running' ORDER BY id"));
        while (select->executeStep())
          (daemon_died && select->getColumn(1).getInt() + 1 >= max_daemon_deaths ? out.given_up : out.requeued)
              .push_back(select->getColumn(0).getInt64());
      }
      // Their half-done runs would otherwise stay 'running' forever; they are kept (for the record)
      // but marked, and never show in trends.
      ScopedStatement interrupt_runs(prepared(
          "UPDATE runs SET state = 'interrupted', finished_ms = ? "
          "WHERE state = 'running' AND job_id IN (SELECT id FROM jobs WHERE state = 'running')"));
      bind_all(*interrupt_runs, now_ms());
      interrupt_runs->exec();
      if (daemon_died) {
        ScopedStatement give_up(prepared(
            "UPDATE jobs SET state = 'failed', attempts = attempts + 1, finished_ms = ?, disposition = 'crashed', "
            "disposition_detail = ?, error = ? WHERE state = 'running' AND attempts + 1 >= ?"));
        const std::string why = "the daemon died " + std::to_string(max_daemon_deaths) +
                                " times while this job ran; it is not run again (a build that kills its parent "
                                "would take every restarted daemon down)";
        bind_all(*give_up, now_ms(), why, why, max_daemon_deaths);
        give_up->exec();
      }
      ScopedStatement requeue(prepared(
          "UPDATE jobs SET state = 'queued', attempts = attempts + ?, started_ms = NULL WHERE state = 'running'"));
      bind_all(*requeue, daemon_died ? 1 : 0);
      requeue->exec();
      transaction.commit();
      return out;
    });
  }

  // --- Runs ---

  RowId add_run(const Run& run) override {
    return guarded("add_run", [&] {
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::IMMEDIATE);
      const RowId id = insert_run(run, run.contended);
      refresh_rollups_of_run(id);
      transaction.commit();
      return id;
    });
  }

  void finish_run(RowId run_id, const RunResult& result, std::span<const Sample> samples) override {
    guarded("finish_run", [&] {
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::IMMEDIATE);
      // The result may set the token count, which moves the run to another point: both are redone.
      RollupScopes scopes;
      add_group_of_run(run_id, scopes);
      ScopedStatement update(prepared(
          "UPDATE runs SET state = ?, finished_ms = ?, tokens = COALESCE(?, tokens), "
          "tokens_per_s = COALESCE(?, tokens_per_s), gemm_ms = COALESCE(?, gemm_ms), "
          "contended = COALESCE(?, contended) WHERE id = ?"));
      bind_all(*update, to_string(result.state), or_now(result.finished_ms), result.tokens,
               result.tokens_per_s, result.gemm_ms, result.contended, run_id);
      if (update->exec() == 0) {
        throw StoreError(StoreErrorKind::NotFound, fmt::format("finish_run: no run {}", run_id));
      }
      insert_samples(run_id, samples);
      add_group_of_run(run_id, scopes);
      refresh_rollups(scopes);
      transaction.commit();
    });
  }

  std::vector<RowId> record_runs(std::span<const RunBundle> bundles) override {
    return guarded("record_runs", [&] {
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::IMMEDIATE);
      std::vector<RowId> ids;
      ids.reserve(bundles.size());
      RollupScopes scopes;
      for (const RunBundle& bundle : bundles) {
        // The co-tenant summary decides the run's contended flag, as put_cotenant does.
        const std::optional<bool> contended =
            bundle.cotenant ? bundle.cotenant->contended : bundle.run.contended;
        const RowId run_id = insert_run(bundle.run, contended, &scopes);
        insert_samples(run_id, bundle.samples);
        if (bundle.cotenant) {
          upsert_cotenant(run_id, *bundle.cotenant);
          insert_cotenant_samples(run_id, bundle.cotenant_samples);
        }
        ids.push_back(run_id);
      }
      refresh_rollups(scopes);
      transaction.commit();
      return ids;
    });
  }

  ImportOutcome import_external(const ExternalImport& batch) override {
    return guarded("import_external", [&] {
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::IMMEDIATE);
      ImportOutcome outcome;
      RollupScopes scopes;
      for (const Build& build : batch.builds) {
        if (auto existing = select_build("sha256 = ?", build.sha256)) {
          outcome.build_ids.push_back(existing->id);
          continue;
        }
        Build row = build;
        row.created_ms = or_now(row.created_ms);
        ScopedStatement insert(prepared(insert_sql(build_record())));
        bind_record(*insert, build_record(), row);
        insert->exec();
        outcome.build_ids.push_back(database_.getLastInsertRowid());
        ++outcome.builds_added;
      }
      for (const ImportedRun& imported : batch.runs) {
        if (imported.build_index >= outcome.build_ids.size()) {
          throw StoreError(StoreErrorKind::Constraint,
                           fmt::format("imported run names build {} of {}", imported.build_index,
                                       outcome.build_ids.size()));
        }
        Run run = imported.bundle.run;
        run.build_id = outcome.build_ids[imported.build_index];
        ScopedStatement same(prepared(
            "SELECT 1 FROM runs WHERE job_id IS NULL AND build_id = ? AND started_ms = ? AND profile = ? "
            "AND path = ? AND tokens = ? AND tokens_per_s IS ? LIMIT 1"));
        bind_all(*same, run.build_id, run.started_ms, run.profile, run.path, run.tokens, run.tokens_per_s);
        if (same->executeStep()) {
          ++outcome.runs_already_stored;
          continue;
        }
        const RowId run_id = insert_run(run, run.contended, &scopes);
        insert_samples(run_id, imported.bundle.samples);
        outcome.run_ids.push_back(run_id);
      }
      refresh_rollups(scopes);
      transaction.commit();
      return outcome;
    });
  }

  std::optional<Run> find_run(RowId id) override {
    return guarded("find_run", [&]() -> std::optional<Run> {
      ScopedStatement select(prepared(fmt::format("SELECT {} FROM runs WHERE id = ?", run_record().column_list())));
      bind_all(*select, id);
      if (!select->executeStep()) return std::nullopt;
      return read_record(run_record(), *select);
    });
  }

  std::vector<Sample> run_samples(RowId run_id) override {
    return guarded("run_samples", [&] {
      ScopedStatement select(prepared(child_select_sql(sample_record(), "= ?")));
      bind_all(*select, run_id);
      std::vector<Sample> samples;
      while (select->executeStep()) samples.push_back(read_record(sample_record(), *select, 1));
      return samples;
    });
  }

  std::int64_t count_runs(std::optional<RowId> job_id) override {
    return guarded("count_runs", [&] {
      ScopedStatement select(prepared(job_id ? "SELECT COUNT(*) FROM runs WHERE job_id = ?"
                                             : "SELECT COUNT(*) FROM runs"));
      if (job_id) bind_all(*select, *job_id);
      select->executeStep();
      return select->getColumn(0).getInt64();
    });
  }

  // --- Parity, verdicts, co-tenant load ---

  void add_parity_cases(std::span<const ParityCaseRecord> cases) override {
    guarded("add_parity_cases", [&] {
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::IMMEDIATE);
      const std::int64_t now = now_ms();
      for (const ParityCaseRecord& parity : cases) {
        ParityCaseRecord row = parity;
        if (row.created_ms == 0) row.created_ms = now;
        ScopedStatement insert(prepared(insert_sql(parity_case_record())));
        bind_record(*insert, parity_case_record(), row);
        insert->exec();
      }
      transaction.commit();
    });
  }

  std::vector<ParityCaseRecord> parity_cases(RowId job_id) override {
    return guarded("parity_cases", [&] {
      ScopedStatement select(prepared(
          fmt::format("SELECT {} FROM parity_cases WHERE job_id = ? ORDER BY id", parity_case_record().column_list())));
      bind_all(*select, job_id);
      std::vector<ParityCaseRecord> cases;
      while (select->executeStep()) cases.push_back(read_record(parity_case_record(), *select));
      return cases;
    });
  }

  void put_verdict(const Verdict& verdict) override {
    guarded("put_verdict", [&] {
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::IMMEDIATE);
      upsert_verdict(verdict);
      transaction.commit();
    });
  }

  bool finish_job_with_verdict(const Verdict& verdict, const JobEnding& ending,
                               std::string_view progress_json) override {
    return guarded("finish_job_with_verdict", [&] {
      // One transaction: a crash leaves either a running job without a verdict (re-run at the next
      // start) or a done job with its verdict, never a verdict on a job that will run again.
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::IMMEDIATE);
      ScopedStatement update(prepared(
          "UPDATE jobs SET state = 'done', progress_json = ?, finished_ms = ?, disposition = ?, "
          "disposition_detail = ? WHERE id = ? AND state = 'running'"));
      bind_all(*update, progress_json, now_ms(), to_string(ending.disposition), ending.detail,
               verdict.job_id);
      if (update->exec() == 0) {
        if (!job_exists(verdict.job_id))
          throw StoreError(StoreErrorKind::NotFound, fmt::format("finish_job_with_verdict: no job {}", verdict.job_id));
        return false;  // not running any more (cancelled): nothing is written
      }
      upsert_verdict(verdict);
      transaction.commit();
      return true;
    });
  }

  std::optional<Verdict> find_verdict(RowId job_id) override {
    return guarded("find_verdict", [&]() -> std::optional<Verdict> {
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::DEFERRED);
      std::optional<Verdict> verdict;
      {
        ScopedStatement select(
            prepared(fmt::format("SELECT {} FROM verdicts WHERE job_id = ?", verdict_record().column_list())));
        bind_all(*select, job_id);
        if (!select->executeStep()) return std::nullopt;
        verdict = with_read_labels(read_record(verdict_record(), *select));
      }
      std::vector<JobListing> one(1);
      one.front().verdict = std::move(verdict);
      attach_verdict_children(one, "SELECT ?", [&](SQLite::Statement& statement) {
        detail::bind_value(statement, 1, job_id);
      });
      transaction.commit();
      return std::move(one.front().verdict);
    });
  }

  void put_cotenant(const CotenantSummary& summary,
                    std::span<const CotenantSample> samples) override {
    guarded("put_cotenant", [&] {
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::IMMEDIATE);
      upsert_cotenant(summary.run_id, summary);
      ScopedStatement clear(prepared("DELETE FROM cotenant_samples WHERE run_id = ?"));
      bind_all(*clear, summary.run_id);
      clear->exec();
      insert_cotenant_samples(summary.run_id, samples);
      // Copied onto the run so trend queries filter on runs alone, without a join.
      ScopedStatement mark(prepared("UPDATE runs SET contended = ? WHERE id = ?"));
      bind_all(*mark, summary.contended, summary.run_id);
      mark->exec();
      refresh_rollups_of_run(summary.run_id);
      transaction.commit();
    });
  }

  std::optional<CotenantSummary> find_cotenant(RowId run_id) override {
    return guarded("find_cotenant", [&]() -> std::optional<CotenantSummary> {
      ScopedStatement select(prepared(
          fmt::format("SELECT {} FROM cotenant WHERE run_id = ?", cotenant_record().column_list())));
      bind_all(*select, run_id);
      if (!select->executeStep()) return std::nullopt;
      return read_record(cotenant_record(), *select);
    });
  }

  std::vector<CotenantSample> cotenant_samples(RowId run_id) override {
    return guarded("cotenant_samples", [&] {
      ScopedStatement select(prepared(child_select_sql(cotenant_sample_record(), "= ?", "t_ms, id")));
      bind_all(*select, run_id);
      std::vector<CotenantSample> samples;
      while (select->executeStep()) samples.push_back(read_record(cotenant_sample_record(), *select, 1));
      return samples;
    });
  }

  // --- History ---

  std::vector<TrendRow> query_trend(const TrendQuery& query) override {
    return guarded("query_trend", [&] {
      // Only the filters given go into the SQL (rather than "? IS NULL OR col = ?"), so the planner
      // sees plain equalities and uses runs_by_profile_type / runs_by_series. Each shape of query
      // is prepared once and cached.
      std::string sql = fmt::format(
          "SELECT {} FROM runs r JOIN builds b ON b.id = r.build_id LEFT JOIN jobs j ON j.id = r.job_id "
          "WHERE r.state = 'done' AND r.tokens_per_s IS NOT NULL AND r.started_ms >= ?",
          trend_row_projection().column_list());
      if (query.profile) sql += " AND r.profile = ?";
      if (query.weight_type) sql += " AND r.weight_type = ?";
      if (query.path) sql += " AND r.path = ?";
      if (query.build_name_glob) sql += " AND b.name GLOB ?";
      if (query.job_id) sql += " AND r.job_id = ?";
      if (!query.include_contended)
        sql += query.include_unknown ? " AND (r.contended = 0 OR r.contended IS NULL)" : " AND r.contended = 0";
      sql += " ORDER BY r.started_ms, r.id";
      if (query.limit) sql += " LIMIT ?";

      ScopedStatement select(prepared(sql));
      int index = 1;
      detail::bind_value(*select, index++, query.since_ms);
      for (const auto* filter : {&query.profile, &query.weight_type, &query.path,
                                 &query.build_name_glob}) {
        if (*filter) detail::bind_value(*select, index++, **filter);
      }
      if (query.job_id) detail::bind_value(*select, index++, *query.job_id);
      if (query.limit) detail::bind_value(*select, index++, *query.limit);

      std::vector<TrendRow> rows;
      while (select->executeStep()) rows.push_back(read_record(trend_row_projection(), *select));
      return rows;
    });
  }

  std::vector<TrendSummary> query_trend_summaries(const TrendQuery& query) override {
    return guarded("query_trend_summaries", [&] {
      if (query.job_id) {
        throw StoreError(StoreErrorKind::InvalidValue,
                         "query_trend_summaries: a point is a build's; a job's runs come from query_trend");
      }
      // The co-tenant filter picks which of the row's three summaries is read (0006's comment).
      // Only the filters given go into the SQL, so each shape is one cached statement whose plan is
      // a range scan of build_rollups_by_profile_type (or _by_profile_time, _by_time).
      const char* set = query.include_contended ? "all" : query.include_unknown ? "open" : "quiet";
      const RecordDeclaration<TrendSummary>& projection = trend_summary_projection(set);
      std::string sql =
          fmt::format("SELECT {} FROM build_rollups WHERE last_ms >= ?", projection.column_list());
      if (query.profile) sql += " AND profile = ?";
      if (query.weight_type) sql += " AND weight_type = ?";
      if (query.path) sql += " AND path = ?";
      if (query.build_name_glob) sql += " AND build_name GLOB ?";
      if (!query.include_contended) sql += fmt::format(" AND {}_runs > 0", set);
      sql += " ORDER BY first_ms, id";
      if (query.limit) sql += " LIMIT ?";

      ScopedStatement select(prepared(sql));
      int index = 1;
      detail::bind_value(*select, index++, query.since_ms);
      for (const auto* filter : {&query.profile, &query.weight_type, &query.path,
                                 &query.build_name_glob}) {
        if (*filter) detail::bind_value(*select, index++, **filter);
      }
      if (query.limit) detail::bind_value(*select, index++, *query.limit);

      std::vector<TrendSummary> rows;
      while (select->executeStep()) rows.push_back(read_record(projection, *select));
      return rows;
    });
  }

  std::vector<CompareRun> compare_runs(const CompareRunsQuery& query) override {
    return guarded("compare_runs", [&] {
      // The build's runs come through runs_by_build_series (with a profile SQLite may pick
      // runs_by_profile_time); the optional filters are added only when given, so each shape of
      // the query is one cached statement.
      std::string sql = detail::compare_run_select() +
                        "WHERE r.build_id = ? AND r.state = 'done' AND r.tokens_per_s IS NOT NULL";
      if (query.profile) sql += " AND r.profile = ?";
      if (query.tokens) sql += " AND r.tokens = ?";
      if (query.weight_type) sql += " AND r.weight_type = ?";
      sql += " ORDER BY r.started_ms, r.id";
      ScopedStatement select(prepared(sql));
      int index = 1;
      detail::bind_value(*select, index++, query.build_id);
      if (query.profile) detail::bind_value(*select, index++, *query.profile);
      if (query.tokens) detail::bind_value(*select, index++, *query.tokens);
      if (query.weight_type) detail::bind_value(*select, index++, *query.weight_type);
      std::vector<CompareRun> runs;
      while (select->executeStep()) runs.push_back(read_record(compare_run_projection(), *select));
      return runs;
    });
  }

  std::vector<CompareRun> job_compare_runs(RowId job_id) override {
    return guarded("job_compare_runs", [&] {
      // runs_by_job: the job's own rows, never its builds' (detail/compare_runs_sql.h).
      ScopedStatement select(prepared(detail::job_compare_runs_sql()));
      bind_all(*select, job_id);
      std::vector<CompareRun> runs;
      while (select->executeStep()) runs.push_back(read_record(compare_run_projection(), *select));
      return runs;
    });
  }

  std::string integrity_check() override {
    return guarded("integrity_check", [&] {
      SQLite::Statement check(database_, "PRAGMA integrity_check");
      std::string report;
      while (check.executeStep()) {
        if (!report.empty()) report += '\n';
        report += check.getColumn(0).getString();
      }
      return report;
    });
  }

 private:
  // Switches the connection to synchronous=FULL for one commit and back to NORMAL afterwards.
  class DurableCommitScope {
   public:
    explicit DurableCommitScope(SQLite::Database& database) : database_(database) {
      database_.exec("PRAGMA synchronous = FULL");
    }
    ~DurableCommitScope() { database_.tryExec("PRAGMA synchronous = NORMAL"); }
    DurableCommitScope(const DurableCommitScope&) = delete;
    DurableCommitScope& operator=(const DurableCommitScope&) = delete;

   private:
    SQLite::Database& database_;
  };

  template <class Body>
  auto guarded(std::string_view operation, Body&& body,
               std::source_location where = std::source_location::current())
      -> std::invoke_result_t<Body&> {
    std::lock_guard lock(mutex_);
    return detail::checked_sqlite(operation, path_, std::forward<Body>(body), where);
  }

  static SQLite::Database open_database(const SqliteOptions& options) {
    return detail::checked_sqlite("open", options.path.string(), [&] {
      if (!options.read_only && !std::filesystem::exists(options.path)) {
        create_private_file(options.path);
      }
      const int flags = options.read_only ? SQLite::OPEN_READONLY : SQLite::OPEN_READWRITE;
      return SQLite::Database(options.path.string(), flags | SQLITE_OPEN_NOFOLLOW, options.busy_timeout_ms);
    });
  }

  void configure(const SqliteOptions& options) {
    detail::checked_sqlite("configure", path_, [&] {
      // WAL: readers (CLI queries, the dashboard) never block the daemon's writes, and a commit is
      // one append instead of a rollback-journal dance. It is a property of the file, so a
      // read-only connection leaves it as the writer set it.
      if (!read_only_) {
        const std::string mode = database_.execAndGet("PRAGMA journal_mode = WAL").getString();
        if (mode != "wal") {
          throw StoreError(StoreErrorKind::Other,
                           fmt::format("{}: cannot switch to WAL (journal_mode is '{}')", path_, mode));
        }
      }
      // synchronous=NORMAL is durable in WAL mode against a crash of the process (every commit is
      // in the -wal file before the call returns) and never corrupts the file; only an OS crash or
      // power cut can lose the last commits before a checkpoint. Runs can be measured again, so
      // that trade buys a sync-free commit per run; create_job alone commits with FULL.
      database_.exec("PRAGMA synchronous = NORMAL");
      // SQLite leaves REFERENCES unenforced unless asked, per connection.
      database_.exec("PRAGMA foreign_keys = ON");
      if (options.max_size_bytes) {
        const std::int64_t page_size = database_.execAndGet("PRAGMA page_size").getInt64();
        const std::int64_t pages = std::max<std::int64_t>(1, *options.max_size_bytes / page_size);
        database_.exec(fmt::format("PRAGMA max_page_count = {}", pages));
      }
    });
  }

  void migrate() {
    const std::span<const detail::Migration> migrations = detail::embedded_migrations();
    const int known = static_cast<int>(migrations.size());
    const int found = detail::checked_sqlite("migrate", path_, [&] { return read_user_version(); });
    if (found > known) {
      throw StoreError(StoreErrorKind::SchemaTooNew,
                       fmt::format("{}: database schema version {} is newer than this qgate knows "
                                   "({}); it was written by a newer qgate, refusing to open it",
                                   path_, found, known));
    }
    if (found == known) return;
    if (read_only_) {
      throw StoreError(StoreErrorKind::ReadOnly,
                       fmt::format("{}: database schema version {} needs migrating to {}, which a "
                                   "read-only open cannot do",
                                   path_, found, known));
    }
    for (const detail::Migration& migration : migrations) {
      detail::checked_sqlite(fmt::format("migration {}", migration.name), path_, [&] {
        // Each migration and its version bump commit together. The version is read again under
        // the write lock so two processes opening a fresh file do not both apply it.
        SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::IMMEDIATE);
        if (read_user_version() >= migration.version) return;
        database_.exec(std::string(migration.sql));
        after_migration(migration.version);
        database_.exec(fmt::format("PRAGMA user_version = {}", migration.version));
        transaction.commit();
      });
    }
  }

  /// What a migration needs done in code, in its transaction: the rows that the store's own
  /// statements compute, so a migration file never repeats them.
  void after_migration(int version) {
    // Every existing run's trend point, by the statement the write path uses (kRollupRecompute).
    if (version == kBuildRollupsVersion) database_.exec(rollup_recompute("1"));
  }

  int read_user_version() { return database_.execAndGet("PRAGMA user_version").getInt(); }

  SQLite::Statement& prepared(const std::string& sql) {
    auto found = statements_.find(sql);
    if (found == statements_.end()) {
      found = statements_.emplace(sql, std::make_unique<SQLite::Statement>(database_, sql)).first;
    }
    return *found->second;
  }

  template <class... Values>
  static void bind_all_from(SQLite::Statement& statement, int first, const Values&... values) {
    int index = first - 1;
    (detail::bind_value(statement, ++index, values), ...);
  }

  template <class Key>
  std::optional<Build> select_build(const char* where, const Key& key) {
    ScopedStatement select(prepared(fmt::format("SELECT {} FROM builds WHERE {}", build_record().column_list(), where)));
    bind_all(*select, key);
    if (!select->executeStep()) return std::nullopt;
    return read_record(build_record(), *select);
  }

  std::optional<Job> select_job(RowId id) {
    ScopedStatement select(prepared(fmt::format("SELECT {} FROM jobs j WHERE j.id = ?", job_record().column_list("j"))));
    bind_all(*select, id);
    if (!select->executeStep()) return std::nullopt;
    return read_record(job_record(), *select);
  }

  // The verdict upsert with its child rows (replaced), inside the caller's transaction.
  void upsert_verdict(const Verdict& verdict) {
    // INSERT ... ON CONFLICT DO UPDATE is spelled the same in PostgreSQL.
    {
      Verdict row = with_stored_labels(verdict);
      row.created_ms = or_now(row.created_ms);
      ScopedStatement upsert(prepared(upsert_sql(verdict_record())));
      bind_record(*upsert, verdict_record(), row);
      upsert->exec();
    }
    for (const char* table : {"verdict_type_ratios", "verdict_leaks", "verdict_output_identity"}) {
      ScopedStatement clear(prepared(fmt::format("DELETE FROM {} WHERE job_id = ?", table)));
      bind_all(*clear, verdict.job_id);
      clear->exec();
    }
    for (std::size_t position = 0; position < verdict.per_type.size(); ++position) {
      ScopedStatement insert(prepared(child_insert_sql(type_ratio_record())));
      bind_child(*insert, type_ratio_record(), verdict.job_id, std::int64_t(position), verdict.per_type[position]);
      insert->exec();
    }
    for (std::size_t position = 0; position < verdict.leaks.size(); ++position) {
      ScopedStatement insert(prepared(child_insert_sql(leak_record())));
      bind_child(*insert, leak_record(), verdict.job_id, std::int64_t(position), verdict.leaks[position]);
      insert->exec();
    }
    if (const auto& identity = verdict.identity) {
      ScopedStatement insert(prepared(child_insert_sql(output_identity_record())));
      bind_child(*insert, output_identity_record(), verdict.job_id, 0, *identity);
      insert->exec();
    }
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
    while (select->executeStep()) {
      JobListing listing;
      listing.job = read_record(job_record(), *select);
      listing.build = read_record(build_record(), *select, build_first);
      if (!select->getColumn(baseline_first).isNull())
        listing.baseline = read_record(build_record(), *select, baseline_first);
      if (!select->getColumn(verdict_first).isNull())
        listing.verdict = with_read_labels(read_record(verdict_record(), *select, verdict_first));
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
      while (select->executeStep()) {
        const auto found = by_job.find(select->getColumn(0).getInt64());
        if (found != by_job.end()) found->second->per_type.push_back(read_record(type_ratio_record(), *select, 1));
      }
    }
    {
      ScopedStatement select(prepared(child_select_sql(leak_record(), in_jobs)));
      bind(*select);
      while (select->executeStep()) {
        const auto found = by_job.find(select->getColumn(0).getInt64());
        if (found != by_job.end()) found->second->leaks.push_back(read_record(leak_record(), *select, 1));
      }
    }
    ScopedStatement select(prepared(child_select_sql(output_identity_record(), in_jobs, "job_id")));
    bind(*select);
    while (select->executeStep()) {
      const auto found = by_job.find(select->getColumn(0).getInt64());
      if (found != by_job.end()) found->second->identity = read_record(output_identity_record(), *select, 1);
    }
  }

  bool job_exists(RowId id) {
    ScopedStatement select(prepared("SELECT 1 FROM jobs WHERE id = ?"));
    bind_all(*select, id);
    return select->executeStep();
  }

  // A build's name (in the series key) and label (in a verdict's arms); remembered because bulk
  // loads ask for the same few. A build row never changes.
  struct BuildNaming {
    std::string name;
    std::string label;
  };
  const BuildNaming& build_naming(RowId build_id) {
    if (auto cached = build_namings_.find(build_id); cached != build_namings_.end()) {
      return cached->second;
    }
    const std::optional<Build> build = select_build("id = ?", build_id);
    if (!build) throw StoreError(StoreErrorKind::NotFound, fmt::format("no build {}", build_id));
    return build_namings_.emplace(build_id, BuildNaming{build->name, build_label(build->name, build->sha256)})
        .first->second;
  }
  const std::string& build_name(RowId build_id) { return build_naming(build_id).name; }

  // A verdict's arm labels as the store keeps them: empty where the arm's build says the same.
  Verdict with_stored_labels(Verdict verdict) {
    for (auto [id, label] : {std::pair{verdict.arm_a_build_id, &verdict.arm_a_label},
                             std::pair{verdict.arm_b_build_id, &verdict.arm_b_label}}) {
      if (id && *label == build_naming(*id).label) label->clear();
    }
    return verdict;
  }
  // And as they are read: a build's own label where none is kept.
  Verdict with_read_labels(Verdict verdict) {
    for (auto [id, label] : {std::pair{verdict.arm_a_build_id, &verdict.arm_a_label},
                             std::pair{verdict.arm_b_build_id, &verdict.arm_b_label}}) {
      if (id && label->empty()) *label = build_naming(*id).label;
    }
    return verdict;
  }

  /// Which trend points a write touched: (build, series key, tokens, week) groups of runs.
  struct RollupScopes {
    std::set<std::tuple<RowId, std::string, std::int64_t, std::int64_t>> groups;
  };

  /// Rewrites the trend points of every group in `scopes` from their runs. Called inside the
  /// transaction of the write that changed those runs, so points and runs commit together.
  void refresh_rollups(const RollupScopes& scopes) {
    for (const auto& [build_id, series_key, tokens, week_ms] : scopes.groups) {
      ScopedStatement clear(prepared(
          "DELETE FROM build_rollups WHERE build_id = ? AND series_key = ? AND tokens = ? AND week_ms = ?"));
      bind_all(*clear, build_id, series_key, tokens, week_ms);
      clear->exec();
      // The week as a range of started_ms, so runs_by_build_series finds exactly the group's runs.
      ScopedStatement insert(prepared(rollup_recompute(fmt::format(
          "r.build_id = ?1 AND r.series_key = ?2 AND r.tokens = ?3 AND r.started_ms >= ?4 AND r.started_ms < ?4 + {}",
          kWeekMs))));
      bind_all(*insert, build_id, series_key, tokens, week_ms);
      insert->exec();
    }
  }

  /// Adds the group run `run_id` belongs to now (none when there is no such run).
  void add_group_of_run(RowId run_id, RollupScopes& scopes) {
    ScopedStatement select(prepared(
        fmt::format("SELECT build_id, series_key, tokens, {} FROM runs WHERE id = ?", kWeekOfRun)));
    bind_all(*select, run_id);
    if (!select->executeStep()) return;
    scopes.groups.emplace(select->getColumn(0).getInt64(), select->getColumn(1).getString(),
                          select->getColumn(2).getInt64(), select->getColumn(3).getInt64());
  }

  void refresh_rollups_of_run(RowId run_id) {
    RollupScopes scopes;
    add_group_of_run(run_id, scopes);
    refresh_rollups(scopes);
  }

  /// Inserts a run; `scopes` (when given) gains the trend point group it belongs to.
  RowId insert_run(const Run& run, std::optional<bool> contended, RollupScopes* scopes = nullptr) {
    const std::string series_key =
        run.series_key.empty() ? make_series_key(build_name(run.build_id), run) : run.series_key;
    Run row = run;
    row.started_ms = or_now(row.started_ms);
    row.series_key = series_key;
    row.contended = contended;
    ScopedStatement insert(prepared(insert_sql(run_record())));
    bind_record(*insert, run_record(), row);
    insert->exec();
    const RowId id = database_.getLastInsertRowid();
    if (scopes) add_group_of_run(id, *scopes);
    return id;
  }

  void insert_samples(RowId run_id, std::span<const Sample> samples) {
    for (const Sample& sample : samples) {
      ScopedStatement insert(prepared(child_insert_sql(sample_record())));
      bind_child(*insert, sample_record(), run_id, 0, sample);
      insert->exec();
    }
  }

  void upsert_cotenant(RowId run_id, const CotenantSummary& summary) {
    CotenantSummary row = summary;
    row.run_id = run_id;
    ScopedStatement upsert(prepared(upsert_sql(cotenant_record())));
    bind_record(*upsert, cotenant_record(), row);
    upsert->exec();
  }

  void insert_cotenant_samples(RowId run_id, std::span<const CotenantSample> samples) {
    for (const CotenantSample& sample : samples) {
      ScopedStatement insert(prepared(child_insert_sql(cotenant_sample_record())));
      bind_child(*insert, cotenant_sample_record(), run_id, 0, sample);
      insert->exec();
    }
  }

  std::string path_;
  bool read_only_;
  std::mutex mutex_;
  SQLite::Database database_;
  // Declared after database_ so the statements are finalized before the connection closes.
  std::unordered_map<std::string, std::unique_ptr<SQLite::Statement>> statements_;
  std::unordered_map<RowId, BuildNaming> build_namings_;
};

}  // namespace

std::unique_ptr<Store> open_sqlite_store(const SqliteOptions& options) {
  return std::make_unique<SqliteStore>(options);
}

int sqlite_schema_version_known() {
  return static_cast<int>(detail::embedded_migrations().size());
}

}  // namespace qgate::db
