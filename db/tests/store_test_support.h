// Helpers shared by the store tests and the tests above the store: a temporary directory per test,
// a SQLite store in it, and small row builders. The fixtures that run a case on both engines are in
// engine_fixtures.h.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include "qgate/db/records.h"
#include "qgate/db/sqlite_store.h"

namespace qgate::db::testing {

/// A fresh directory under TMPDIR, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("qgate-store-test-{}-{}", ::getpid(), counter++);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ignored);
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::filesystem::path file(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

inline std::unique_ptr<Store> open_store(const std::filesystem::path& path) {
  SqliteOptions options;
  options.path = path;
  return open_sqlite_store(options);
}

inline Build make_build(const std::string& name, const std::string& sha256,
                        std::int64_t created_ms = 0) {
  Build build;
  build.name = name;
  build.sha256 = sha256;
  build.commit_sha = "0123abcd";
  build.branch = "main";
  build.created_ms = created_ms;
  return build;
}

inline Run make_done_run(RowId build_id, const std::string& profile, const std::string& weight_type,
                         std::int64_t started_ms, double tokens_per_s,
                         std::optional<bool> contended) {
  Run run;
  run.build_id = build_id;
  run.path = "mmq";
  run.profile = profile;
  run.weight_type = weight_type;
  run.started_ms = started_ms;
  run.finished_ms = started_ms + 1000;
  run.state = RunState::Done;
  run.gpu_name = "NVIDIA H200";
  run.gpu_uuid = "GPU-00000000-0000-0000-0000-000000000000";
  run.backend = "cuda";
  run.tokens = 512;
  run.tokens_per_s = tokens_per_s;
  run.contended = contended;
  return run;
}

/// A gate job of `build_id` on "llama-7b", queued at `created_ms`.
inline Job make_job(RowId build_id, std::int64_t created_ms = 0, int device = 0) {
  Job job;
  job.kind = "gate";
  job.build_id = build_id;
  job.profile = "llama-7b";
  job.spec_json = R"({"profile":"llama-7b"})";
  job.backend = "cuda";
  job.device = device;
  job.created_ms = created_ms;
  return job;
}

/// make_done_run's run on "llama-7b", filed under a job.
inline Run make_job_run(RowId job_id, RowId build_id, const std::string& weight_type, std::int64_t started_ms,
                        double tokens_per_s, std::optional<bool> contended) {
  Run run = make_done_run(build_id, "llama-7b", weight_type, started_ms, tokens_per_s, contended);
  run.job_id = job_id;
  return run;
}

/// Rows in `table`, read past the store through a connection of its own.
inline std::int64_t raw_count(const std::filesystem::path& path, const std::string& table) {
  SQLite::Database raw(path.string(), SQLite::OPEN_READONLY);
  return raw.execAndGet("SELECT COUNT(*) FROM " + table).getInt64();
}

}  // namespace qgate::db::testing
