// Tests of the trend rollups (migration 0005): after every kind of write the trend_rollups rows equal
// a recomputation from the raw runs done here in C++, the migration back-fills an existing store,
// and query_trend_summaries picks the summary the co-tenant filter asks for.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "qgate/db/sqlite_store.h"
#include "store_test_support.h"

namespace qgate::db {
namespace {

using testing::make_build;
using testing::make_done_run;
using testing::open_store;
using testing::TempDir;

// One rollup row as stored, or as recomputed; compared whole.
struct Summary {
  std::int64_t runs = 0, contended = 0, unknown = 0, quiet = 0, open = 0;
  std::optional<double> quiet_median, quiet_low, quiet_high;
  std::optional<double> open_median, open_low, open_high;
  double all_median = 0, all_low = 0, all_high = 0;
  std::int64_t first_ms = 0, last_ms = 0;
  std::string build_name;
  bool operator==(const Summary&) const = default;
};

// job (0 = imported), build, series key, profile, weight type, path, tokens, backend, GPU.
using Key = std::tuple<std::int64_t, std::int64_t, std::string, std::string, std::optional<std::string>,
                       std::string, std::int64_t, std::string, std::string>;
using Rollups = std::map<Key, Summary>;

std::optional<std::string> text_or_null(const SQLite::Column& column) {
  if (column.isNull()) return std::nullopt;
  return column.getString();
}
std::optional<double> real_or_null(const SQLite::Column& column) {
  if (column.isNull()) return std::nullopt;
  return column.getDouble();
}

std::optional<double> median_of(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

Rollups stored_rollups(const std::filesystem::path& path) {
  SQLite::Database raw(path.string(), SQLite::OPEN_READONLY);
  SQLite::Statement select(raw,
                           "SELECT job_id, build_id, series_key, profile, weight_type, path, tokens, backend, "
                           "gpu_name, runs, contended_runs, unknown_runs, quiet_runs, quiet_median, quiet_low, "
                           "quiet_high, open_runs, open_median, open_low, open_high, all_median, all_low, "
                           "all_high, first_ms, last_ms, build_name FROM trend_rollups");
  Rollups rollups;
  while (select.executeStep()) {
    Key key{select.getColumn(0).getInt64(), select.getColumn(1).getInt64(), select.getColumn(2).getString(),
            select.getColumn(3).getString(), text_or_null(select.getColumn(4)), select.getColumn(5).getString(),
            select.getColumn(6).getInt64(),   select.getColumn(7).getString(), select.getColumn(8).getString()};
    Summary s;
    s.runs = select.getColumn(9).getInt64();
    s.contended = select.getColumn(10).getInt64();
    s.unknown = select.getColumn(11).getInt64();
    s.quiet = select.getColumn(12).getInt64();
    s.quiet_median = real_or_null(select.getColumn(13));
    s.quiet_low = real_or_null(select.getColumn(14));
    s.quiet_high = real_or_null(select.getColumn(15));
    s.open = select.getColumn(16).getInt64();
    s.open_median = real_or_null(select.getColumn(17));
    s.open_low = real_or_null(select.getColumn(18));
    s.open_high = real_or_null(select.getColumn(19));
    s.all_median = select.getColumn(20).getDouble();
    s.all_low = select.getColumn(21).getDouble();
    s.all_high = select.getColumn(22).getDouble();
    s.first_ms = select.getColumn(23).getInt64();
    s.last_ms = select.getColumn(24).getInt64();
    s.build_name = select.getColumn(25).getString();
    EXPECT_TRUE(rollups.emplace(key, s).second) << "two rollup rows for one job and series";
  }
  return rollups;
}

// The rollups as they should be, from the runs table alone (no SQL aggregation).
Rollups recomputed_rollups(const std::filesystem::path& path) {
  SQLite::Database raw(path.string(), SQLite::OPEN_READONLY);
  SQLite::Statement select(raw,
                           "SELECT r.job_id, r.build_id, r.series_key, r.profile, r.weight_type, r.path, r.tokens, "
                           "r.backend, r.gpu_name, r.state, r.tokens_per_s, r.contended, r.started_ms, b.name "
                           "FROM runs r JOIN builds b ON b.id = r.build_id");
  struct Runs {
    std::vector<double> all, quiet, open;
    Summary summary;
  };
  std::map<Key, Runs> groups;
  while (select.executeStep()) {
    if (select.getColumn(9).getString() != "done" || select.getColumn(10).isNull()) continue;
    Key key{select.getColumn(0).isNull() ? 0 : select.getColumn(0).getInt64(),
            select.getColumn(1).getInt64(),
            select.getColumn(2).getString(),
            select.getColumn(3).getString(),
            text_or_null(select.getColumn(4)),
            select.getColumn(5).getString(),
            select.getColumn(6).getInt64(),
            select.getColumn(7).getString(),
            select.getColumn(8).getString()};
    const double value = select.getColumn(10).getDouble();
    const std::optional<int> contended =
        select.getColumn(11).isNull() ? std::nullopt : std::optional<int>(select.getColumn(11).getInt());
    const std::int64_t started = select.getColumn(12).getInt64();
    auto [it, added] = groups.try_emplace(key);
    Runs& g = it->second;
    if (added || started < g.summary.first_ms) g.summary.first_ms = started;
    if (added || started > g.summary.last_ms) g.summary.last_ms = started;
    g.summary.build_name = select.getColumn(13).getString();
    g.all.push_back(value);
    if (contended == 0) g.quiet.push_back(value);
    if (contended != 1) g.open.push_back(value);
    if (contended == 1) ++g.summary.contended;
    if (!contended) ++g.summary.unknown;
  }
  Rollups rollups;
  for (auto& [key, g] : groups) {
    Summary s = g.summary;
    s.runs = static_cast<std::int64_t>(g.all.size());
    s.quiet = static_cast<std::int64_t>(g.quiet.size());
    s.open = static_cast<std::int64_t>(g.open.size());
    s.quiet_median = median_of(g.quiet);
    s.open_median = median_of(g.open);
    if (!g.quiet.empty()) {
      s.quiet_low = *std::min_element(g.quiet.begin(), g.quiet.end());
      s.quiet_high = *std::max_element(g.quiet.begin(), g.quiet.end());
    }
    if (!g.open.empty()) {
      s.open_low = *std::min_element(g.open.begin(), g.open.end());
      s.open_high = *std::max_element(g.open.begin(), g.open.end());
    }
    s.all_median = *median_of(g.all);
    s.all_low = *std::min_element(g.all.begin(), g.all.end());
    s.all_high = *std::max_element(g.all.begin(), g.all.end());
    rollups.emplace(key, s);
  }
  return rollups;
}

class TrendRollupsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("qgate.db");
    store_ = open_store(path_);
    build_a_ = store_->insert_build(make_build("mmq-a", "sha-a", 10)).id;
    build_b_ = store_->insert_build(make_build("mmq-b", "sha-b", 20)).id;
  }

  void expect_consistent(const std::string& after) {
    const Rollups stored = stored_rollups(path_);
    const Rollups expected = recomputed_rollups(path_);
    EXPECT_EQ(stored.size(), expected.size()) << "after " << after;
    EXPECT_TRUE(stored == expected) << "rollups differ from the runs after " << after;
  }

  RowId start_job(RowId build_id, const std::string& profile) {
    Job job;
    job.build_id = build_id;
    job.profile = profile;
    job.backend = "cuda";
    return store_->create_job(job);
  }

  db::Run job_run(RowId job_id, RowId build_id, const std::string& type, std::int64_t started, double tps,
              std::optional<bool> contended) {
    db::Run run = make_done_run(build_id, "llama-7b", type, started, tps, contended);
    run.job_id = job_id;
    return run;
  }

  TempDir dir_;
  std::filesystem::path path_;
  std::unique_ptr<Store> store_;
  RowId build_a_ = 0, build_b_ = 0;
};

TEST_F(TrendRollupsTest, FreshStoreHasNoRollups) {
  EXPECT_TRUE(stored_rollups(path_).empty());
  EXPECT_TRUE(store_->query_trend_summaries(TrendQuery{}).empty());
}

TEST_F(TrendRollupsTest, JobRunsAreSummarisedAsTheyFinish) {
  const RowId job = start_job(build_a_, "llama-7b");
  // A run in progress is not in a trend yet.
  db::Run running = job_run(job, build_a_, "q4_K", 1000, 0, std::nullopt);
  running.state = RunState::Running;
  running.tokens_per_s.reset();
  const RowId first = store_->add_run(running);
  expect_consistent("a running run");
  EXPECT_TRUE(stored_rollups(path_).empty());

  RunResult result;
  result.tokens_per_s = 400;
  result.contended = false;
  store_->finish_run(first, result, {});
  expect_consistent("finish_run");
  ASSERT_EQ(stored_rollups(path_).size(), 1u);

  for (const auto& [started, tps] : {std::pair{2000, 300.0}, std::pair{3000, 500.0}, std::pair{4000, 350.0}}) {
    running.started_ms = started;
    const RowId id = store_->add_run(running);
    result.tokens_per_s = tps;
    store_->finish_run(id, result, {});
  }
  expect_consistent("four finished runs");
  TrendQuery query;
  auto points = store_->query_trend_summaries(query);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].job_id, job);
  EXPECT_EQ(points[0].runs, 4);
  EXPECT_DOUBLE_EQ(points[0].median_tokens_per_s, 375.0);  // (350 + 400) / 2
  EXPECT_DOUBLE_EQ(points[0].low_tokens_per_s, 300.0);
  EXPECT_DOUBLE_EQ(points[0].high_tokens_per_s, 500.0);
  EXPECT_EQ(points[0].first_ms, 1000);
  EXPECT_EQ(points[0].last_ms, 4000);
  EXPECT_EQ(points[0].backend, "cuda");
  EXPECT_EQ(points[0].gpu_name, "NVIDIA H200");
  EXPECT_EQ(points[0].build_name, "mmq-a");
  EXPECT_EQ(points[0].build_sha256, "sha-a");

  // The co-tenant summary arriving later turns a run contended: the point changes with it.
  CotenantSummary cotenant;
  cotenant.run_id = first;
  cotenant.available = true;
  cotenant.contended = true;
  store_->put_cotenant(cotenant, {});
  expect_consistent("put_cotenant");
  points = store_->query_trend_summaries(query);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].runs, 3);
  EXPECT_EQ(points[0].contended_runs, 1);
  EXPECT_EQ(points[0].total_runs, 4);
  EXPECT_DOUBLE_EQ(points[0].median_tokens_per_s, 350.0);
  query.include_contended = true;
  points = store_->query_trend_summaries(query);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].runs, 4);
  EXPECT_DOUBLE_EQ(points[0].median_tokens_per_s, 375.0);
}

TEST_F(TrendRollupsTest, FailedCancelledAndInterruptedJobsStayConsistent) {
  const RowId failed = start_job(build_a_, "llama-7b");
  const RowId cancelled = start_job(build_b_, "llama-7b");
  std::vector<RunBundle> bundles;
  for (int i = 0; i < 3; ++i) {
    bundles.push_back({job_run(failed, build_a_, "q4_K", 100 + i, 400 + i, false), {}, {}, {}});
    bundles.push_back({job_run(cancelled, build_b_, "q8_0", 200 + i, 300 + i, i == 0), {}, {}, {}});
  }
  db::Run failed_run = job_run(failed, build_a_, "q4_K", 150, 1, false);
  failed_run.state = RunState::Failed;  // a failed run never counts, whatever its figure
  bundles.push_back({failed_run, {}, {}, {}});
  store_->record_runs(bundles);
  expect_consistent("record_runs of two jobs");

  // A run left running by a daemon that died: requeued, the run interrupted, the point unchanged.
  ASSERT_TRUE(store_->claim_next_job(std::nullopt).has_value());
  db::Run running = job_run(failed, build_a_, "q4_K", 160, 0, std::nullopt);
  running.state = RunState::Running;
  running.tokens_per_s.reset();
  store_->add_run(running);
  store_->requeue_interrupted_jobs();
  expect_consistent("requeue_interrupted_jobs");

  ASSERT_TRUE(store_->claim_next_job(std::nullopt).has_value());
  ASSERT_TRUE(store_->claim_next_job(std::nullopt).has_value());
  EXPECT_TRUE(store_->end_job(failed, JobState::Failed, "worker crashed", {}, JobState::Running));
  EXPECT_TRUE(store_->end_job(cancelled, JobState::Cancelled, "", {}, JobState::Running));
  expect_consistent("end_job");

  const Rollups stored = stored_rollups(path_);
  ASSERT_EQ(stored.size(), 2u);
  for (const auto& [key, summary] : stored) {
    if (std::get<0>(key) == failed) {
      EXPECT_EQ(summary.runs, 3);
      EXPECT_EQ(summary.all_median, 401.0);
    } else {
      EXPECT_EQ(std::get<0>(key), cancelled);
      EXPECT_EQ(summary.contended, 1);
      EXPECT_EQ(summary.quiet_median, 301.5);
    }
  }
}

TEST_F(TrendRollupsTest, ImportsAreSummarisedPerBuildAndSeries) {
  ExternalImport batch;
  Build external = make_build("llama.cpp-b4000", "sha-ext");
  external.external = true;
  batch.builds.push_back(external);
  for (int i = 0; i < 5; ++i) {
    ImportedRun imported;
    imported.build_index = 0;
    imported.bundle.run = make_done_run(0, "llama-7b", "q4_0", 1000 + i, 100.0 * (i + 1), std::nullopt);
    imported.bundle.run.tokens = i < 3 ? 512 : 128;  // two series: pp512 and pp128
    batch.runs.push_back(imported);
  }
  const ImportOutcome outcome = store_->import_external(batch);
  expect_consistent("import_external");
  // Importing the same file again adds nothing, and the rows stay as they were.
  const Rollups before = stored_rollups(path_);
  EXPECT_EQ(store_->import_external(batch).runs_already_stored, 5);
  EXPECT_TRUE(stored_rollups(path_) == before);

  // Imported runs have no co-tenant reading: they show only when unknown load is kept.
  TrendQuery query;
  EXPECT_TRUE(store_->query_trend_summaries(query).empty());
  query.include_unknown = true;
  const auto points = store_->query_trend_summaries(query);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_FALSE(points[0].job_id.has_value());
  EXPECT_EQ(points[0].build_id, outcome.build_ids[0]);
  EXPECT_EQ(points[0].tokens, 512);
  EXPECT_EQ(points[0].runs, 3);
  EXPECT_EQ(points[0].unknown_runs, 3);
  EXPECT_DOUBLE_EQ(points[0].median_tokens_per_s, 200.0);
  EXPECT_EQ(points[1].tokens, 128);
  EXPECT_DOUBLE_EQ(points[1].median_tokens_per_s, 450.0);

  // A second import into the same build rewrites that build's rows, not another's.
  ExternalImport more;
  more.builds.push_back(external);
  ImportedRun extra;
  extra.bundle.run = make_done_run(0, "llama-7b", "q4_0", 5000, 1000.0, std::nullopt);
  more.runs.push_back(extra);
  store_->import_external(more);
  expect_consistent("a second import");
}

TEST_F(TrendRollupsTest, SummariesFilterLikeTheRawTrend) {
  const RowId job_a = start_job(build_a_, "llama-7b");
  const RowId job_b = start_job(build_b_, "llama-7b");
  std::vector<RunBundle> bundles;
  bundles.push_back({job_run(job_a, build_a_, "q4_K", 1000, 400, false), {}, {}, {}});
  bundles.push_back({job_run(job_a, build_a_, "q8_0", 1100, 300, true), {}, {}, {}});  // contended only
  bundles.push_back({job_run(job_b, build_b_, "q4_K", 5000, 440, std::nullopt), {}, {}, {}});
  db::Run other_profile = job_run(job_b, build_b_, "q4_K", 6000, 200, false);
  other_profile.profile = "llama-13b";
  other_profile.path = "f16";
  bundles.push_back({other_profile, {}, {}, {}});
  store_->record_runs(bundles);
  expect_consistent("record_runs");

  auto jobs_of = [&](const TrendQuery& query) {
    std::vector<std::pair<RowId, std::string>> out;
    for (const TrendSummary& p : store_->query_trend_summaries(query))
      out.emplace_back(p.job_id.value_or(0), p.weight_type.value_or(""));
    return out;
  };
  using V = std::vector<std::pair<RowId, std::string>>;
  TrendQuery query;
  query.profile = "llama-7b";
  EXPECT_EQ(jobs_of(query), (V{{job_a, "q4_K"}}));
  query.include_unknown = true;
  EXPECT_EQ(jobs_of(query), (V{{job_a, "q4_K"}, {job_b, "q4_K"}}));
  query.include_contended = true;
  EXPECT_EQ(jobs_of(query), (V{{job_a, "q4_K"}, {job_a, "q8_0"}, {job_b, "q4_K"}}));
  query.weight_type = "q4_K";
  query.since_ms = 2000;
  EXPECT_EQ(jobs_of(query), (V{{job_b, "q4_K"}}));
  query.since_ms = 0;
  query.build_name_glob = "mmq-a";
  EXPECT_EQ(jobs_of(query), (V{{job_a, "q4_K"}}));

  TrendQuery f16;
  f16.path = "f16";
  EXPECT_EQ(jobs_of(f16), (V{{job_b, "q4_K"}}));
  TrendQuery limited;
  limited.include_contended = true;
  limited.limit = 2;
  EXPECT_EQ(jobs_of(limited), (V{{job_a, "q4_K"}, {job_a, "q8_0"}}));
}

TEST_F(TrendRollupsTest, MigrationBackFillsAnExistingStore) {
  const RowId job = start_job(build_a_, "llama-7b");
  std::vector<RunBundle> bundles;
  for (int i = 0; i < 7; ++i) {
    bundles.push_back({job_run(job, build_a_, i % 2 ? "q4_K" : "q8_0", 1000 + i, 100.0 + 37 * (i % 4),
                               i == 3 ? std::optional<bool>(true) : i == 5 ? std::nullopt : std::optional<bool>(false)),
                       {}, {}, {}});
  }
  RunBundle imported;
  imported.run = make_done_run(build_b_, "llama-13b", "q4_0", 9000, 55.0, std::nullopt);
  bundles.push_back(imported);
  store_->record_runs(bundles);
  const Rollups written = stored_rollups(path_);
  ASSERT_EQ(written.size(), 3u);
  store_.reset();

  // The store as it was before 0005: no rollup table, schema version 4.
  {
    SQLite::Database raw(path_.string(), SQLite::OPEN_READWRITE);
    raw.exec("DROP TABLE trend_rollups");
    raw.exec("PRAGMA user_version = 4");
  }
  store_ = open_store(path_);
  EXPECT_EQ(store_->schema_version(), sqlite_schema_version_known());
  expect_consistent("the back-fill");
  EXPECT_TRUE(stored_rollups(path_) == written);
  EXPECT_EQ(store_->integrity_check(), "ok");
}

}  // namespace
}  // namespace qgate::db
