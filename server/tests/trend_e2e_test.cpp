// `qgate trend` end to end over points kept at write time: a real qgated over a store seeded through
// the store's API (a build measured by two jobs on the CUDA backend, another on the CPU), driven
// through the real CLI. One point per build, series and week; the table shows each series' backend and
// GPU; `--job N` shows that job's runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "daemon_under_test.h"
#include "qgate/db/sqlite_store.h"

namespace qgate::testing {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// Some line of `text` holds every one of `parts`, in order.
bool line_with(const std::string& text, std::initializer_list<std::string> parts) {
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    size_t at = 0;
    bool all = true;
    for (const std::string& part : parts) {
      at = line.find(part, at);
      if (at == std::string::npos) {
        all = false;
        break;
      }
      at += part.size();
    }
    if (all) return true;
    begin = end + 1;
  }
  return false;
}

class TrendE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch()).count();
    // The runs start within a minute, inside this week (a point is a build's week of a series).
    constexpr std::int64_t kDayMs = 24LL * 3600 * 1000;
    const std::int64_t monday = (now + 3 * kDayMs) / (7 * kDayMs) * (7 * kDayMs) - 3 * kDayMs;
    const std::int64_t base = std::max(now - 3600'000, monday);
    {
      db::SqliteOptions options;
      options.path = daemon_.dir() + "/qgate.db";
      auto store = db::open_sqlite_store(options);
      db::Build gpu_build;
      gpu_build.name = "mmq-tile128";
      gpu_build.sha256 = std::string(64, 'a');
      gpu_build.commit_sha = "abc123";
      const db::RowId gpu_id = store->insert_build(gpu_build).id;
      db::Build cpu_build = gpu_build;
      cpu_build.name = "cpu-ref";
      cpu_build.sha256 = std::string(64, 'b');
      const db::RowId cpu_id = store->insert_build(cpu_build).id;

      auto run = [&](db::RowId job, db::RowId build, const char* backend, const char* gpu, int i, double tps) {
        db::RunBundle bundle;
        db::Run& r = bundle.run;
        r.job_id = job;
        r.build_id = build;
        r.path = "mmq";
        r.profile = "llama-7b-q4_K_M";
        r.weight_type = "q4_K";
        r.started_ms = base + i * 1000;
        r.finished_ms = r.started_ms + 500;
        r.state = db::RunState::Done;
        r.backend = backend;
        r.gpu_name = gpu;
        r.tokens = 512;
        r.tokens_per_s = tps;
        r.contended = false;
        return bundle;
      };
      std::vector<db::RunBundle> bundles;
      for (int j = 0; j < 2; ++j) {
        db::Job job;
        job.kind = "ab";
        job.build_id = gpu_id;
        job.profile = "llama-7b-q4_K_M";
        job.backend = "cuda";
        gpu_jobs_.push_back(store->create_job(job));
        for (int i = 0; i < 3; ++i) bundles.push_back(run(gpu_jobs_.back(), gpu_id, "cuda", "NVIDIA H200", j * 10 + i, 1000 + 10 * i));
      }
      db::Job cpu_job;
      cpu_job.kind = "ab";
      cpu_job.build_id = cpu_id;
      cpu_job.profile = "llama-7b-q4_K_M";
      cpu_job.backend = "cpu";
      const db::RowId cpu_job_id = store->create_job(cpu_job);
      for (int i = 0; i < 2; ++i) bundles.push_back(run(cpu_job_id, cpu_id, "cpu", "", 50 + i, 20 + i));
      store->record_runs(bundles);
    }
    daemon_.start();
  }

  DaemonUnderTest daemon_;
  std::vector<db::RowId> gpu_jobs_;
};

TEST_F(TrendE2eTest, TheTableShowsEachSeriesBackendAndGpu) {
  const CliResult r = daemon_.cli("trend --profile llama-7b-q4_K_M");
  ASSERT_EQ(r.code, 0) << r.err << daemon_.log();
  EXPECT_TRUE(line_with(r.out, {"BUILD", "PATH", "BACKEND", "GPU", "RUNS", "MEDIAN tok/s"})) << r.out;
  // Both jobs' runs of the GPU build are one point: 6 runs, median of 1000,1000,1010,1010,1020,1020.
  EXPECT_TRUE(line_with(r.out, {"mmq-tile128", "mmq", "cuda", "NVIDIA H200", "6", "1010"})) << r.out;
  // The CPU series has no GPU name: the column says so with a dash, and the backend is cpu.
  EXPECT_TRUE(line_with(r.out, {"cpu-ref", "mmq", "cpu", "-", "2"})) << r.out;
}

// A profile nothing was ever stored for is most likely a typo: the CLI says which profiles there
// are and exits 3; one whose runs are merely older than --since still prints an empty table.
TEST_F(TrendE2eTest, AProfileWithNoRunsIsAnErrorThatListsTheProfilesThereAre) {
  const CliResult r = daemon_.cli("trend --profile llama-7b-q4_K_N");
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("no run of profile 'llama-7b-q4_K_N' was ever stored; profiles with runs: llama-7b-q4_K_M"),
            std::string::npos)
      << r.err;
  const CliResult old = daemon_.cli("trend --profile llama-7b-q4_K_M --since 1s");
  EXPECT_EQ(old.code, 0) << old.err;
}

TEST_F(TrendE2eTest, OnePointPerBuildAndSeriesNamingItsNewestJob) {
  const CliResult r = daemon_.cli("--json trend --profile llama-7b-q4_K_M");
  ASSERT_EQ(r.code, 0) << r.err;
  const json points = json_data(r, "points");
  ASSERT_EQ(points.size(), 2u) << r.out;
  const json& gpu = points[0]["build_name"] == "mmq-tile128" ? points[0] : points[1];
  EXPECT_EQ(gpu["runs"], 6);
  EXPECT_EQ(gpu["backend"], "cuda");
  EXPECT_EQ(gpu["gpu_name"], "NVIDIA H200");
  // int64 fields may come as strings (proto JSON) or numbers.
  const json& job_id = gpu["job_id"];
  EXPECT_EQ(job_id.is_string() ? std::stoll(job_id.get<std::string>()) : job_id.get<std::int64_t>(), gpu_jobs_.back());
  EXPECT_DOUBLE_EQ(gpu["tokens_per_s"].get<double>(), 1010.0);
  EXPECT_DOUBLE_EQ(gpu["tokens_per_s_low"].get<double>(), 1000.0);
  EXPECT_DOUBLE_EQ(gpu["tokens_per_s_high"].get<double>(), 1020.0);

  // The first job's runs are one query away.
  const CliResult job = daemon_.cli("--json trend --profile llama-7b-q4_K_M --job " + std::to_string(gpu_jobs_[0]));
  ASSERT_EQ(job.code, 0) << job.err;
  const json runs = json_data(job, "points");
  ASSERT_EQ(runs.size(), 3u) << job.out;
  for (const json& run : runs) EXPECT_EQ(run["runs"], 1);
}

}  // namespace
}  // namespace qgate::testing
