// `qgate import` and `qgate export --format llama-bench-sql` end to end: a real qgated, the real CLI.
// test-backend-ops' MUL_MAT rows show up in `qgate trend` as an external build; a bad row anywhere
// leaves the store as it was; qgate's own runs exported as llama-bench SQL import back unchanged.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "compare_history.h"
#include "daemon_under_test.h"
#include "qgate/db/sqlite_store.h"

namespace qgate::testing {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const std::string kData = QGATE_INTEROP_DATA;
const std::string kMulMat = "mul_mat-m4096-k14336";

class ImportE2eTest : public ::testing::Test {
 protected:
  void SetUp() override { daemon_.start(); }

  json trend(const std::string& args) {
    const CliResult r = daemon_.cli("--json trend --since 5000d " + args);
    EXPECT_EQ(r.code, 0) << r.err;
    return json_data(r, "points");
  }

  /// True when `trend` says no run of `profile` was ever stored (exit 3, with the profiles there are).
  bool never_stored(const std::string& profile) {
    const CliResult r = daemon_.cli("trend --profile " + profile);
    EXPECT_EQ(r.code, 3) << r.out << r.err;
    return contains(r.err, "no run of profile '" + profile + "' was ever stored");
  }

  DaemonUnderTest daemon_;
};

TEST_F(ImportE2eTest, TestBackendOpsMulMatShowsUpInTrend) {
  const CliResult r = daemon_.cli("import " + kData + "/test_backend_ops_mulmat_h200.sql");
  ASSERT_EQ(r.code, 0) << r.err << daemon_.log();
  EXPECT_TRUE(contains(r.out, "imported 4 runs as test-backend-ops-sql")) << r.out;
  EXPECT_TRUE(contains(r.out, "build llama.cpp@unknown/CUDA0/NVIDIA H200")) << r.out;
  EXPECT_TRUE(contains(r.out, "qgate trend --profile '" + kMulMat + "'")) << r.out;

  const CliResult text = daemon_.cli("trend --since 5000d --profile " + kMulMat);
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_TRUE(contains(text.out, "llama.cpp@unknown/CUDA0/NVIDIA H200")) << text.out;
  EXPECT_TRUE(contains(text.out, "q4_0")) << text.out;

  const json points = trend("--profile " + kMulMat + " --type q4_0");
  ASSERT_EQ(points.size(), 1u) << points.dump();
  EXPECT_NEAR(points[0]["tokens_per_s"].get<double>(), 512 / 324.788961e-6, 1e-3);
  EXPECT_EQ(points[0]["backend"], "CUDA0");
  EXPECT_EQ(points[0]["job_id"], 0);  // imported: no job

  const CliResult builds = daemon_.cli("--json builds");
  ASSERT_EQ(builds.code, 0) << builds.err;
  EXPECT_EQ(json_data(builds, "builds").size(), 1u);

  // The same file again stores nothing twice.
  const CliResult again = daemon_.cli("--json import " + kData + "/test_backend_ops_mulmat_h200.sql");
  ASSERT_EQ(again.code, 0) << again.err;
  const json outcome = json_data(again, "import");
  EXPECT_EQ(outcome.value("runs_added", 0), 0) << outcome.dump();
  EXPECT_EQ(outcome.value("runs_already_stored", 0), 4) << outcome.dump();
  EXPECT_EQ(trend("--profile " + kMulMat).size(), 4u);
}

TEST_F(ImportE2eTest, TestBackendOpsCorrectnessCasesBecomeAFinishedParityJobOfTheExternalBuild) {
  // test-backend-ops' test mode as printed to the console: no times, so the file's modification time.
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("qgate-tbo-" + std::to_string(::getpid()) + ".txt");
  std::filesystem::copy_file(kData + "/test_backend_ops_test_console.txt", file,
                             std::filesystem::copy_options::overwrite_existing);
  const auto when = std::chrono::sys_seconds{std::chrono::seconds{1796004600}};  // 2026-11-30T02:10:00Z
  std::filesystem::last_write_time(file, std::chrono::file_clock::from_sys(when));
  const CliResult r = daemon_.cli("import " + file.string());
  ASSERT_EQ(r.code, 0) << r.err << daemon_.log();
  EXPECT_TRUE(contains(r.out, "imported 6 correctness checks (2 incorrect)")) << r.out;
  EXPECT_FALSE(contains(r.out, "imported 0 runs")) << r.out;

  const CliResult imported = daemon_.cli("--json import " + file.string());
  ASSERT_EQ(imported.code, 0) << imported.err;
  const json again = json_data(imported, "import");
  EXPECT_EQ(again.value("checks_added", 0), 0) << again.dump();
  EXPECT_EQ(again.value("check_jobs_already_stored", 0), 1) << again.dump();
  std::filesystem::remove(file);

  // One finished parity job of the external build, FAIL because two cases were incorrect.
  const json jobs = json_data(daemon_.cli("--json jobs"), "jobs");
  ASSERT_EQ(jobs.size(), 1u) << jobs.dump();
  const std::int64_t job_id = jobs[0]["id"].get<std::int64_t>();
  const CliResult shown = daemon_.cli("--json show " + std::to_string(job_id));
  ASSERT_EQ(shown.code, 0) << shown.err;
  const json job = json_data(shown, "job");
  EXPECT_EQ(job["state"], "JOB_STATE_DONE") << job.dump();
  EXPECT_EQ(job["verdict"]["verdict"], "VERDICT_FAIL") << job.dump();
  EXPECT_EQ(job["verdict"]["parity_passed"], 3) << job.dump();
  EXPECT_EQ(job["verdict"]["parity_failed"], 2) << job.dump();
  const CliResult text = daemon_.cli("show " + std::to_string(job_id));
  EXPECT_TRUE(contains(text.out, "parity   3 passed, 2 failed")) << text.out;
  EXPECT_TRUE(contains(daemon_.cli("builds").out, "llama.cpp@unknown/CUDA0")) << daemon_.cli("builds").out;

  // The cases as stored, read beside the running daemon.
  db::SqliteOptions options;
  options.path = daemon_.dir() + "/qgate.db";
  options.read_only = true;
  const auto store = db::open_sqlite_store(options);
  const auto cases = store->parity_cases(job_id);
  ASSERT_EQ(cases.size(), 6u);
  std::map<std::string, int> outcomes;
  for (const auto& c : cases) ++outcomes[c.outcome];
  EXPECT_EQ(outcomes, (std::map<std::string, int>{{"incorrect", 2}, {"not_supported", 1}, {"passed", 3}}));
  const auto q6 = std::find_if(cases.begin(), cases.end(), [](const db::ParityCaseRecord& c) { return c.weight_type == "q6_K"; });
  ASSERT_NE(q6, cases.end());
  EXPECT_EQ(q6->path, "MUL_MAT");
  EXPECT_EQ(q6->outcome, "incorrect");
  EXPECT_EQ((std::tuple{q6->nt, q6->od, q6->k}), (std::tuple<std::int64_t, std::int64_t, std::int64_t>{16, 16, 256}));
  EXPECT_DOUBLE_EQ(q6->nmse.value_or(0), 0.001953125);
  EXPECT_DOUBLE_EQ(q6->tolerance.value_or(0), 0.0005);
  EXPECT_EQ(q6->created_ms, 1796004600000);
  const bool nan_kept = std::any_of(cases.begin(), cases.end(), [](const db::ParityCaseRecord& c) {
    return c.outcome == "incorrect" && contains(c.message, "NaN at index 7");
  });
  EXPECT_TRUE(nan_kept);
}

TEST_F(ImportE2eTest, TheDaemonRefusesABadCheckAndStoresNothing) {
  v1::ImportResultsRequest request;
  request.set_source("crafted");
  for (int i = 0; i < 3; ++i) {
    auto* c = request.add_checks();
    c->set_tool("test-backend-ops");
    c->set_backend("CUDA0");
    c->set_op("MUL_MAT");
    c->set_params("type_a=q4_0,type_b=f32,m=16,n=1,k=256");
    c->set_weight_type("q4_0");
    c->set_outcome(i == 2 ? "maybe" : "passed");
    c->set_checked_unix_ms(1'796'000'000'000);
    c->set_line(30 + i);
  }
  grpc::ClientContext context;
  v1::ImportResultsResponse response;
  const grpc::Status status = daemon_.stub()->ImportResults(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(contains(status.error_message(), "line 32, field outcome")) << status.error_message();
  EXPECT_TRUE(json_data(daemon_.cli("--json builds"), "builds").empty());
  EXPECT_TRUE(json_data(daemon_.cli("--json jobs"), "jobs").empty());
}

TEST_F(ImportE2eTest, LlamaBenchMarkdownAndTodaysSqlImportByContent) {
  // The default markdown table: its rows take the file's modification time.
  const std::filesystem::path md = std::filesystem::temp_directory_path() / ("qgate-bench-" + std::to_string(::getpid()) + ".md");
  std::filesystem::copy_file(kData + "/llama_bench.md", md, std::filesystem::copy_options::overwrite_existing);
  const auto when = std::chrono::sys_seconds{std::chrono::seconds{1796004600}};  // 2026-11-30T02:10:00Z
  std::filesystem::last_write_time(md, std::chrono::file_clock::from_sys(when));
  const CliResult r = daemon_.cli("import " + md.string());
  std::filesystem::remove(md);
  ASSERT_EQ(r.code, 0) << r.err << daemon_.log();
  EXPECT_TRUE(contains(r.out, "imported 3 runs as llama-bench-md")) << r.out;
  const json points = trend("--profile 'llama 8B Q4_K - Medium'");
  int runs = 0;
  for (const auto& p : points) {
    runs += p["runs"].get<int>();
    EXPECT_EQ(p["started_unix_ms"], 1796004600000) << p.dump();
  }
  EXPECT_EQ(runs, 3) << points.dump();
  // pp512 at depth 0 and at depth 4096 share path and tokens but not their settings: two series.
  EXPECT_EQ(points.size(), 3u) << points.dump();
  const CliResult table = daemon_.cli("trend --since 5000d --profile 'llama 8B Q4_K - Medium'");
  EXPECT_TRUE(contains(table.out, "SETTINGS")) << table.out;
  EXPECT_TRUE(contains(table.out, "n_gpu_layers=99 flash_attn=1 n_depth=4096")) << table.out;

  // Today's SQL (table llama_bench) under a name that says nothing of its format.
  const CliResult sql = daemon_.cli("import " + kData + "/llama_bench_current.sql");
  ASSERT_EQ(sql.code, 0) << sql.err;
  EXPECT_TRUE(contains(sql.out, "imported 2 runs as llama-bench-sql")) << sql.out;
}

TEST_F(ImportE2eTest, ABadThirdRowImportsNothing) {
  const CliResult r = daemon_.cli("import " + kData + "/test_backend_ops_bad_third_row.sql");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_TRUE(contains(r.err, "line 24, field time_us: 'fast' is not a number")) << r.err;
  EXPECT_TRUE(contains(r.err, "nothing imported")) << r.err;
  EXPECT_TRUE(never_stored(kMulMat));
  EXPECT_TRUE(json_data(daemon_.cli("--json builds"), "builds").empty());
}

TEST_F(ImportE2eTest, TheDaemonRefusesABadResultAndStoresNoneOfTheOthers) {
  v1::ImportResultsRequest request;
  request.set_source("crafted");
  request.set_format("test-backend-ops-sql");
  for (int i = 0; i < 3; ++i) {
    auto* r = request.add_results();
    r->set_tool("test-backend-ops");
    r->set_build_commit("abc123");
    r->set_backend("CUDA0");
    r->set_gpu_name("NVIDIA H200");
    r->set_profile(kMulMat);
    r->set_path("q4_0");
    r->set_tokens(512);
    r->set_tokens_per_s(i == 2 ? -1.0 : 1.5e6);
    r->set_started_unix_ms(1'796'000'000'000 + i);
    r->set_line(20 + i);
  }
  grpc::ClientContext context;
  v1::ImportResultsResponse response;
  const grpc::Status status = daemon_.stub()->ImportResults(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(contains(status.error_message(), "line 22, field tokens_per_s")) << status.error_message();
  EXPECT_TRUE(never_stored(kMulMat));
  EXPECT_TRUE(json_data(daemon_.cli("--json builds"), "builds").empty());
}

class ExportRoundTripTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      db::SqliteOptions options;
      options.path = daemon_.dir() + "/qgate.db";
      auto store = db::open_sqlite_store(options);
      seed_history(*store);
    }
    daemon_.start();
  }

  DaemonUnderTest daemon_;
};

TEST_F(ExportRoundTripTest, LlamaBenchSqlExportImportsBackWithItsValues) {
  const std::string file = daemon_.dir() + "/export.sql";
  const CliResult exported =
      daemon_.cli("export --format llama-bench-sql --profile " + std::string(kProfile) + " --output " + file);
  ASSERT_EQ(exported.code, 0) << exported.err;
  const std::string sql = slurp(file);
  // Today's table (docs/interop.md), which compare-llama-bench.py reads.
  EXPECT_EQ(sql.rfind("CREATE TABLE IF NOT EXISTS llama_bench (\n  build_commit TEXT,\n  build_number INTEGER,", 0), 0u)
      << sql.substr(0, 200);

  // Runs, not per-build points: export's JSON has a point per run.
  const CliResult before = daemon_.cli("export --format json --profile " + std::string(kProfile));
  ASSERT_EQ(before.code, 0) << before.err;
  // What went out: the quiet and unknown runs of qgate's jobs.
  std::vector<json> originals;
  for (const auto& p : json_data(before, "points"))
    if (p["job_id"].get<std::int64_t>() != 0) originals.push_back(p);
  ASSERT_FALSE(originals.empty());

  const CliResult imported = daemon_.cli("--json import " + file);
  ASSERT_EQ(imported.code, 0) << imported.err << daemon_.log();
  const json outcome = json_data(imported, "import");
  EXPECT_EQ(outcome["format"], "llama-bench-sql");
  EXPECT_EQ(outcome.value("runs_added", 0), static_cast<int>(originals.size())) << outcome.dump();

  // The imported runs come back under llama-bench's model_type: the profile with the path after it.
  const CliResult after = daemon_.cli("export --format json");
  ASSERT_EQ(after.code, 0) << after.err;
  json back = json::array();
  for (const auto& p : json_data(after, "points"))
    if (p["build_name"].get<std::string>().rfind("llama.cpp@", 0) == 0) back.push_back(p);
  ASSERT_EQ(back.size(), originals.size());
  std::map<std::string, std::set<std::string>> commits_of_build;  // by the original build's sha256
  std::set<std::string> commits;
  for (const auto& p : back) {
    // "llama.cpp@<build_commit>/cuda/NVIDIA H200": the build's commit, or a hex digest standing in
    // for one (these builds have none).
    const std::string name = p["build_name"].get<std::string>();
    const std::string commit = name.substr(10, name.find('/') - 10);
    commits.insert(commit);
    // Each run's start is its own in this history.
    const auto it = std::find_if(originals.begin(), originals.end(),
                                 [&](const json& o) { return o["started_unix_ms"] == p["started_unix_ms"]; });
    ASSERT_NE(it, originals.end()) << p.dump();
    const json& original = *it;
    commits_of_build[original["build_sha256"].get<std::string>()].insert(commit);
    EXPECT_EQ(name, "llama.cpp@" + commit + "/" + original["backend"].get<std::string>() + "/" +
                        original["gpu_name"].get<std::string>());
    EXPECT_EQ(p["backend"], original["backend"]);
    EXPECT_EQ(p["gpu_name"], original["gpu_name"]);
    EXPECT_EQ(p["tokens"], original["tokens"]);
    EXPECT_EQ(p["profile"], original["profile"].get<std::string>() + " " + original["path"].get<std::string>());
    EXPECT_EQ(p["path"], "pp");
    EXPECT_NEAR(p["tokens_per_s"].get<double>(), original["tokens_per_s"].get<double>(), 1e-6) << p.dump();
  }
  // One commit of equal length per build, and no two builds on one, so the script keeps them apart.
  for (const auto& [build, its_commits] : commits_of_build) EXPECT_EQ(its_commits.size(), 1u) << build;
  EXPECT_EQ(commits.size(), commits_of_build.size());
  EXPECT_GE(commits.size(), 2u);
  for (const auto& c : commits) {
    EXPECT_EQ(c.size(), commits.begin()->size()) << c;
    EXPECT_EQ(c.find_first_not_of("0123456789abcdef"), std::string::npos) << c;
  }
}

}  // namespace
}  // namespace qgate::testing
