// Takes a store file back to an older schema for the migration tests: the undo of each migration
// from 0008 on, newest first, so a test that starts at schema N undoes exactly what came after N.
// A new migration adds its undo here, and every migration test keeps starting from a true old file.
#pragma once

#include <SQLiteCpp/SQLiteCpp.h>

#include <string>
#include <vector>

namespace qgate::db::testing {

/// Undoes every migration after `version` (at least 7) that this list knows, newest first, and
/// sets user_version to `version`.
inline void rewind_schema_to(SQLite::Database& raw, int version) {
  struct Undo {
    int migration;
    std::vector<std::string> statements;
  };
  static const std::vector<Undo> undos = {
      {16,
       {"DROP INDEX runs_by_time", "DROP INDEX build_rollups_by_first", "DROP INDEX build_rollups_by_profile_first",
        "DROP INDEX build_rollups_by_profile_type_first",
        "CREATE INDEX build_rollups_by_profile_type ON build_rollups (profile, weight_type, last_ms, path, build_name)",
        "CREATE INDEX build_rollups_by_profile_time ON build_rollups (profile, last_ms, path, build_name)",
        "CREATE INDEX build_rollups_by_time ON build_rollups (last_ms, path, build_name)"}},
      {15, {"DROP TABLE build_content_chunks", "DROP TABLE build_contents"}},
      {14,
       {"DROP TABLE fleet_gpus", "DROP TABLE job_labels", "DROP INDEX jobs_by_host",
        "ALTER TABLE jobs DROP COLUMN gpu_model", "ALTER TABLE jobs DROP COLUMN gpu_uuid",
        "ALTER TABLE jobs DROP COLUMN gpus_needed", "ALTER TABLE jobs DROP COLUMN host",
        "ALTER TABLE jobs DROP COLUMN cancel_requested"}},
      {13,
       {"DROP INDEX jobs_by_lease", "ALTER TABLE jobs DROP COLUMN claimed_by", "ALTER TABLE jobs DROP COLUMN lease_expires_ms"}},
      {12, {"ALTER TABLE build_rollups DROP COLUMN host"}},
      {11, {"ALTER TABLE runs DROP COLUMN settings", "ALTER TABLE build_rollups DROP COLUMN settings"}},
      {10,
       {"DROP INDEX runs_by_part", "ALTER TABLE runs DROP COLUMN part_of", "ALTER TABLE build_rollups DROP COLUMN part"}},
      {9,
       {"DROP INDEX verdicts_by_arm_a_build", "DROP INDEX verdicts_by_arm_b_build",
        "ALTER TABLE verdicts DROP COLUMN arm_a_build_id", "ALTER TABLE verdicts DROP COLUMN arm_b_build_id"}},
      {8, {"ALTER TABLE verdict_leaks DROP COLUMN kept_once"}},
  };
  for (const Undo& undo : undos) {
    if (undo.migration <= version) continue;
    for (const std::string& statement : undo.statements) raw.exec(statement);
  }
  raw.exec("PRAGMA user_version = " + std::to_string(version));
}

}  // namespace qgate::db::testing
