// The SQL of the compare-run reads (Store::compare_runs, Store::job_compare_runs), kept here so the
// store tests can ask SQLite for the plan of the very text the store prepares (EXPLAIN QUERY PLAN).
#pragma once

#include <string>

namespace qgate::db::detail {

/// A CompareRun's columns, in the order the store reads them, with the job's timing through the
/// LEFT JOIN (none for imported runs); a WHERE clause follows.
inline constexpr const char* kCompareRunSelect =
    "SELECT r.id, r.job_id, r.build_id, r.arm, r.pair_index, r.path, r.profile, r.weight_type, "
    "r.tokens, r.backend, r.gpu_name, r.gpu_uuid, r.started_ms, r.tokens_per_s, r.contended, j.timing "
    "FROM runs r LEFT JOIN jobs j ON j.id = r.job_id ";

/// Store::job_compare_runs: one job's finished runs with a tok/s, oldest first. The only equality is on
/// r.job_id, so SQLite searches runs_by_job (0001_initial) and reads and sorts the job's own rows
/// alone, however long its builds' history.
inline std::string job_compare_runs_sql() {
  return std::string(kCompareRunSelect) +
         "WHERE r.job_id = ? AND r.state = 'done' AND r.tokens_per_s IS NOT NULL "
         "ORDER BY r.started_ms, r.id";
}

}  // namespace qgate::db::detail
