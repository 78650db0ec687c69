// The SQL of the compare-run reads (Store::compare_runs, Store::job_compare_runs), kept here so the
// store tests can ask SQLite for the plan of the very text the store prepares (EXPLAIN QUERY PLAN).
#pragma once

#include <string>

#include "../record_declarations.h"

namespace qgate::db::detail {

/// A CompareRun's columns (compare_run_projection), with the job's timing through the LEFT JOIN (none
/// for imported runs); a WHERE clause follows.
inline std::string compare_run_select() {
  return "SELECT " + compare_run_projection().column_list() + " FROM runs r LEFT JOIN jobs j ON j.id = r.job_id ";
}

/// The order of a read of some runs found by an index of their own (a job's, a build's): oldest
/// first, as expressions (unary plus) rather than columns, so that no planner walks the whole of
/// runs_by_time (started_ms, id; migration 0016, for trend pages) to skip the sort of a few rows.
inline constexpr const char* kRunsOldestFirstSorted = " ORDER BY +r.started_ms, +r.id";

/// Store::job_compare_runs: one job's finished whole runs (not their per-type parts) with a tok/s, oldest first. The only equality is on
/// r.job_id, so SQLite searches runs_by_job (0001_initial) and reads and sorts the job's own rows
/// alone, however long its builds' history.
inline std::string job_compare_runs_sql() {
  return compare_run_select() +
         "WHERE r.job_id = ? AND r.part_of IS NULL AND r.state = 'done' AND r.tokens_per_s IS NOT NULL" +
         kRunsOldestFirstSorted;
}

}  // namespace qgate::db::detail
