// The store's history: trend points (kept in build_rollups and rewritten with the runs that
// change them), trend summaries, and the runs that compare reads.
#include "detail/compare_runs_sql.h"
#include "detail/sql_store_impl.h"

#include <algorithm>
#include <limits>

namespace qgate::db::detail {

namespace {

/// A trend point's week: 7 days from a Monday 00:00 UTC. The Unix epoch was a Thursday, so weeks
/// are counted from Monday 1969-12-29, 3 days before it (and integer division, which truncates, is
/// the floor for every time since the epoch).
constexpr std::int64_t kWeekMs = 7LL * 24 * 3600 * 1000;
constexpr std::int64_t kEpochAfterMondayMs = 3LL * 24 * 3600 * 1000;
/// The week of runs.started_ms, in SQL: the one place it is computed.
const std::string kWeekOfRun =
    fmt::format("((started_ms + {0}) / {1}) * {1} - {0}", kEpochAfterMondayMs, kWeekMs);

/// A trend point's key, before the series fields (series_dimensions()): one build's runs of one
/// series in one week (week_ms: kWeekOfRun), timed one way (timing: the job's, '' for runs no job
/// measured; migration 0007), and whole runs or one weight type's parts of runs (part: 1 for parts;
/// migration 0010).
constexpr const char* kRollupKeyHead = "build_id, series_key, week_ms, timing, part";

/// A run's co-tenant filters as conditions on its contended flag c, in SQL both engines run (no
/// SQLite "c IS 0"): quiet is known quiet, open is not known contended (quiet or unknown).
constexpr const char* kQuietRun = "(c IS NOT NULL AND c = 0)";
constexpr const char* kOpenRun = "(c IS NULL OR c <> 1)";
/// The partitions of the rank windows need a value rather than a condition: 1 where it holds.
constexpr const char* kQuietRunFlag = "CASE WHEN c IS NOT NULL AND c = 0 THEN 1 ELSE 0 END";
constexpr const char* kOpenRunFlag = "CASE WHEN c IS NULL OR c <> 1 THEN 1 ELSE 0 END";

constexpr const char* kRollupRecompute = R"sql(INSERT INTO build_rollups ({key_head}, {series}, build_name, build_sha256, commit_sha,
                           first_ms, last_ms, jobs, runs, contended_runs, unknown_runs, quiet_runs, quiet_median,
                           quiet_low, quiet_high, quiet_last_job, open_runs, open_median, open_low, open_high,
                           open_last_job, all_median, all_low, all_high, all_last_job)
WITH scoped AS (
  SELECT build_id, series_key, {week} AS week_ms,
         COALESCE((SELECT j.timing FROM jobs j WHERE j.id = r.job_id), '') AS timing,
         CASE WHEN part_of IS NULL THEN 0 ELSE 1 END AS part, {series}, job_id, started_ms, tokens_per_s AS v, contended AS c
  FROM runs r
  WHERE r.state = 'done' AND r.tokens_per_s IS NOT NULL AND {scope}
),
ranked AS (
  SELECT scoped.*,
         row_number() OVER (PARTITION BY {group} ORDER BY v) AS all_rank,
         row_number() OVER (PARTITION BY {group}, {quiet_flag} ORDER BY v) AS quiet_rank,
         row_number() OVER (PARTITION BY {group}, {open_flag} ORDER BY v) AS open_rank
  FROM scoped
),
counted AS (
  SELECT ranked.*,
         count(*) OVER g AS all_n,
         count(CASE WHEN {quiet} THEN 1 END) OVER g AS quiet_n,
         count(CASE WHEN {open} THEN 1 END) OVER g AS open_n
  FROM ranked
  WINDOW g AS (PARTITION BY {group})
)
SELECT x.build_id, x.series_key, x.week_ms, x.timing, x.part, {x_series},
       b.name, b.sha256, b.commit_sha, x.first_ms, x.last_ms, x.jobs, x.runs, x.contended_runs,
       x.unknown_runs, x.quiet_runs, x.quiet_median, x.quiet_low, x.quiet_high, x.quiet_last_job,
       x.open_runs, x.open_median, x.open_low, x.open_high, x.open_last_job, x.all_median, x.all_low,
       x.all_high, x.all_last_job
FROM (
  SELECT {group},
         min(started_ms) AS first_ms, max(started_ms) AS last_ms,
         count(DISTINCT job_id) AS jobs, count(*) AS runs,
         count(CASE WHEN c = 1 THEN 1 END) AS contended_runs, count(CASE WHEN c IS NULL THEN 1 END) AS unknown_runs,
         count(CASE WHEN {quiet} THEN 1 END) AS quiet_runs,
         avg(CASE WHEN {quiet} AND quiet_rank IN ((quiet_n + 1) / 2, (quiet_n + 2) / 2) THEN v END) AS quiet_median,
         min(CASE WHEN {quiet} THEN v END) AS quiet_low,
         max(CASE WHEN {quiet} THEN v END) AS quiet_high,
         COALESCE(max(CASE WHEN {quiet} THEN job_id END), 0) AS quiet_last_job,
         count(CASE WHEN {open} THEN 1 END) AS open_runs,
         avg(CASE WHEN {open} AND open_rank IN ((open_n + 1) / 2, (open_n + 2) / 2) THEN v END) AS open_median,
         min(CASE WHEN {open} THEN v END) AS open_low,
         max(CASE WHEN {open} THEN v END) AS open_high,
         COALESCE(max(CASE WHEN {open} THEN job_id END), 0) AS open_last_job,
         avg(CASE WHEN all_rank IN ((all_n + 1) / 2, (all_n + 2) / 2) THEN v END) AS all_median,
         min(v) AS all_low, max(v) AS all_high, COALESCE(max(job_id), 0) AS all_last_job
  FROM counted
  GROUP BY {group}
) x JOIN builds b ON b.id = x.build_id)sql";

/// Binds a trend query's time bound and the filters it gives (profile, weight type, path, build
/// name pattern), in that order from index 1, as both trend reads spell them; returns the next index.
int bind_trend_filters(SqlStatement& statement, const TrendQuery& query, const SqlConnection& connection) {
  int index = 1;
  detail::bind_value(statement, index++, query.since_ms);
  for (const auto* filter : {&query.profile, &query.weight_type, &query.path, &query.host}) {
    if (*filter) detail::bind_value(statement, index++, **filter);
  }
  if (query.build_name_glob) detail::bind_value(statement, index++, connection.glob_argument(*query.build_name_glob));
  return index;
}

}  // namespace

std::string rollup_recompute(std::string_view scope) {
  static const std::string group = fmt::format("{}, {}", kRollupKeyHead, series_column_list());
  return fmt::format(kRollupRecompute, fmt::arg("scope", scope), fmt::arg("group", group),
                     fmt::arg("key_head", kRollupKeyHead), fmt::arg("series", series_column_list()),
                     fmt::arg("x_series", series_column_list("x")), fmt::arg("week", kWeekOfRun),
                     fmt::arg("quiet", kQuietRun), fmt::arg("open", kOpenRun),
                     fmt::arg("quiet_flag", kQuietRunFlag), fmt::arg("open_flag", kOpenRunFlag));
}

std::vector<TrendRow> SqlStore::query_trend(const TrendQuery& query) {
  return guarded("query_trend", [&] {
    // Only the filters given go into the SQL (rather than "? IS NULL OR col = ?"), so the planner
    // sees plain equalities and uses runs_by_profile_type / runs_by_series. Each shape of query
    // is prepared once and cached.
    std::string sql = fmt::format(
        "SELECT {} FROM runs r JOIN builds b ON b.id = r.build_id LEFT JOIN jobs j ON j.id = r.job_id "
        "WHERE r.state = 'done' AND r.tokens_per_s IS NOT NULL AND r.started_ms >= ?",
        trend_row_projection().column_list());
    if (query.profile) sql += " AND r.profile = ?";
    // A weight type asked for is that type's runs, parts included; none is whole runs (docs/trends.md).
    sql += query.weight_type ? " AND r.weight_type = ?" : " AND r.part_of IS NULL";
    if (query.path) sql += " AND r.path = ?";
    if (query.host) sql += " AND r.host = ?";
    if (query.build_name_glob) sql += " AND " + connection_->glob_condition("b.name");
    if (query.job_id) sql += " AND r.job_id = ? AND r.part_of IS NULL";  // a job's own runs are whole
    if (!query.include_contended)
      sql += query.include_unknown ? " AND (r.contended = 0 OR r.contended IS NULL)" : " AND r.contended = 0";
    // A page after a cursor: the time bound above becomes the cursor's time when that is later, so
    // the index range starts at the cursor (runs_by_time, or a profile's index), and the row value
    // drops the rows of that millisecond up to the cursor's run.
    if (query.after) sql += " AND (r.started_ms, r.id) > (?, ?)";
    // A job's runs come through runs_by_job and are sorted; any other read walks its index in order.
    sql += query.job_id ? detail::kRunsOldestFirstSorted : " ORDER BY r.started_ms, r.id";
    if (query.limit) sql += " LIMIT ?";

    ScopedStatement select(prepared(sql));
    TrendQuery bounds = query;
    if (query.after) bounds.since_ms = std::max(query.since_ms, query.after->ms);
    int index = bind_trend_filters(*select, bounds, *connection_);
    if (query.job_id) detail::bind_value(*select, index++, *query.job_id);
    if (query.after) {
      detail::bind_value(*select, index++, query.after->ms);
      detail::bind_value(*select, index++, query.after->id);
    }
    if (query.limit) detail::bind_value(*select, index++, *query.limit);

    std::vector<TrendRow> rows;
    while (select->step()) rows.push_back(read_record(trend_row_projection(), *select));
    return rows;
  });
}

std::vector<TrendSummary> SqlStore::query_trend_summaries(const TrendQuery& query) {
  return guarded("query_trend_summaries", [&] {
    if (query.job_id) {
      throw StoreError(StoreErrorKind::InvalidValue,
                       "query_trend_summaries: a point is a build's; a job's runs come from query_trend");
    }
    // The co-tenant filter picks which of the row's three summaries is read (0006's comment).
    // Only the filters given go into the SQL, so each shape is one cached statement.
    const char* set = query.include_contended ? "all" : query.include_unknown ? "open" : "quiet";
    const RecordDeclaration<TrendSummary>& projection = trend_summary_projection(set);
    std::string sql =
        fmt::format("SELECT {} FROM build_rollups WHERE last_ms >= ?", projection.column_list());
    if (query.profile) sql += " AND profile = ?";
    sql += query.weight_type ? " AND weight_type = ?" : " AND part = 0";
    if (query.path) sql += " AND path = ?";
    if (query.host) sql += " AND host = ?";
    if (query.build_name_glob) sql += " AND " + connection_->glob_condition("build_name");
    if (!query.include_contended) sql += fmt::format(" AND {}_runs > 0", set);
    // The read walks an index in its own order (build_rollups_by_profile_type_first, _by_profile_first,
    // _by_first: migration 0016) from a lower bound on first_ms, and stops at the limit: a page costs
    // its own rows, wherever it starts. The bound is the cursor's time, or one implied by since: a
    // point's runs lie in one week, so a point with a run at or after since began less than two
    // weeks before it (two: a week before 1970 is cut by truncating division, kWeekOfRun).
    sql += " AND first_ms >= ?";
    if (query.after) sql += " AND (first_ms, id) > (?, ?)";
    sql += " ORDER BY first_ms, id";
    if (query.limit) sql += " LIMIT ?";

    ScopedStatement select(prepared(sql));
    int index = bind_trend_filters(*select, query, *connection_);
    const std::int64_t earliest = query.since_ms >= std::numeric_limits<std::int64_t>::min() + 2 * kWeekMs
                                      ? query.since_ms - 2 * kWeekMs
                                      : std::numeric_limits<std::int64_t>::min();
    detail::bind_value(*select, index++, query.after ? std::max(earliest, query.after->ms) : earliest);
    if (query.after) {
      detail::bind_value(*select, index++, query.after->ms);
      detail::bind_value(*select, index++, query.after->id);
    }
    if (query.limit) detail::bind_value(*select, index++, *query.limit);

    std::vector<TrendSummary> rows;
    while (select->step()) rows.push_back(read_record(projection, *select));
    return rows;
  });
}

std::vector<CompareRun> SqlStore::compare_runs(const CompareRunsQuery& query) {
  return guarded("compare_runs", [&] {
    // The build's runs come through runs_by_build_series (with a profile the planner may pick
    // runs_by_profile_time); the optional filters are added only when given, so each shape of
    // the query is one cached statement.
    std::string sql = detail::compare_run_select() +
                      "WHERE r.build_id = ? AND r.state = 'done' AND r.tokens_per_s IS NOT NULL";
    if (query.profile) sql += " AND r.profile = ?";
    if (query.tokens) sql += " AND r.tokens = ?";
    sql += query.weight_type ? " AND r.weight_type = ?" : " AND r.part_of IS NULL";
    if (query.host) sql += " AND r.host = ?";
    sql += detail::kRunsOldestFirstSorted;
    ScopedStatement select(prepared(sql));
    int index = 1;
    detail::bind_value(*select, index++, query.build_id);
    if (query.profile) detail::bind_value(*select, index++, *query.profile);
    if (query.tokens) detail::bind_value(*select, index++, *query.tokens);
    if (query.weight_type) detail::bind_value(*select, index++, *query.weight_type);
    if (query.host) detail::bind_value(*select, index++, *query.host);
    std::vector<CompareRun> runs;
    while (select->step()) runs.push_back(read_record(compare_run_projection(), *select));
    return runs;
  });
}

std::vector<CompareRun> SqlStore::job_compare_runs(RowId job_id) {
  return guarded("job_compare_runs", [&] {
    // runs_by_job: the job's own rows, never its builds' (detail/compare_runs_sql.h).
    ScopedStatement select(prepared(detail::job_compare_runs_sql()));
    bind_all(*select, job_id);
    std::vector<CompareRun> runs;
    while (select->step()) runs.push_back(read_record(compare_run_projection(), *select));
    return runs;
  });
}

void SqlStore::refresh_rollups(const RollupScopes& scopes) {
  for (const auto& [build_id, series_key, tokens, week_ms] : scopes.groups) {
    // Two daemons finishing runs of one point must not interleave its delete and insert.
    connection_->lock_key(fmt::format("rollup {} {} {} {}", build_id, series_key, tokens, week_ms));
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

void SqlStore::add_group_of_run(RowId run_id, RollupScopes& scopes) {
  ScopedStatement select(prepared(
      fmt::format("SELECT build_id, series_key, tokens, {} FROM runs WHERE id = ?", kWeekOfRun)));
  bind_all(*select, run_id);
  if (!select->step()) return;
  scopes.groups.emplace(select->int64(0), select->text(1),
                        select->int64(2), select->int64(3));
}

void SqlStore::refresh_rollups_of_run(RowId run_id) {
  RollupScopes scopes;
  add_group_of_run(run_id, scopes);
  refresh_rollups(scopes);
}

}  // namespace qgate::db::detail
