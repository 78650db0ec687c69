// Tests of Store::job_compare_runs, the read behind a job's detail views: one job's finished runs
// (on its build and its baseline's), not a second job's of the same builds nor another build's, with
// every field and oldest first; the same rows compare_runs gives for its builds, filtered to the job;
// and a plan that searches runs_by_job rather than scanning the builds' runs (EXPLAIN QUERY PLAN).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "detail/compare_runs_sql.h"
#include "qgate/db/sqlite_store.h"
#include "engine_fixtures.h"

namespace qgate::db {
namespace {

using testing::make_build;
using testing::make_job;
using testing::make_job_run;

/// Everything a CompareRun holds, to compare runs whole.
auto fields(const CompareRun& r) {
  return std::make_tuple(r.run_id, r.job_id, r.build_id, r.arm, r.pair_index, r.path, r.profile, r.weight_type,
                         r.tokens, r.backend, r.gpu_name, r.gpu_uuid, r.started_ms, r.tokens_per_s, r.contended,
                         r.job_timing);
}

std::vector<RowId> run_ids(const std::vector<CompareRun>& runs) {
  std::vector<RowId> ids;
  for (const CompareRun& r : runs) ids.push_back(r.run_id);
  return ids;
}

/// Two jobs of mmq-a (the gate against mmq-b, and a second A/B), their runs interleaved in time and
/// stored out of time order, and a third build's history, from a job of its own and imported.
class JobCompareRunsTest : public testing::TwoBuildsFixture {
 protected:
  void SetUp() override {
    TwoBuildsFixture::SetUp();
    if (IsSkipped()) return;
    other_build_ = store_->insert_build(make_build("f16-x", "sha-f", 30)).id;

    Job gate = make_job(mmq_a_, 100);
    gate.baseline_build_id = mmq_b_;
    gate.timing = TimingMode::Pass;
    gate_ = store_->create_job(gate);
    Job second = make_job(mmq_a_, 200);
    second_ = store_->create_job(second);
    other_job_ = store_->create_job(make_job(other_build_, 300));

    // The gate's pair 1 is stored before its pair 0; its pair-0 B run starts with the A run (a tie,
    // broken by run id).
    gate_runs_.push_back(add(arm_run(gate_, mmq_a_, "A", 1, 3000, 410.0, false)));   // [0]
    gate_runs_.push_back(add(arm_run(gate_, mmq_b_, "B", 1, 4000, 370.0, true)));    // [1] contended
    gate_runs_.push_back(add(arm_run(gate_, mmq_a_, "A", 0, 1000, 400.0, false)));   // [2]
    gate_runs_.push_back(add(arm_run(gate_, mmq_b_, "B", 0, 1000, 360.0, std::nullopt)));  // [3] unknown load
    // The second job's runs of the same build, in between.
    second_runs_.push_back(add(arm_run(second_, mmq_a_, "A", 0, 2000, 500.0, false)));
    second_runs_.push_back(add(arm_run(second_, mmq_a_, "B", 0, 3500, 450.0, false)));
    // Still running, failed (with a tok/s on record), or done without a tok/s: left out.
    db::Run running = arm_run(gate_, mmq_a_, "A", 2, 5000, 0.0, false);
    running.state = RunState::Running;
    running.finished_ms.reset();
    running.tokens_per_s.reset();
    store_->add_run(running);
    db::Run failed = arm_run(gate_, mmq_a_, "A", 2, 5500, 420.0, false);
    failed.state = RunState::Failed;
    add(failed);
    db::Run no_rate = arm_run(gate_, mmq_b_, "B", 2, 6000, 0.0, false);
    no_rate.tokens_per_s.reset();
    add(no_rate);
    // Another build's history: a job of its own and an imported run (no job).
    add(arm_run(other_job_, other_build_, "A", 0, 1500, 300.0, false));
    db::Run imported = make_job_run(0, other_build_, "f16", 2500, 280.0, false);
    imported.job_id.reset();
    add(imported);
  }

  static db::Run arm_run(RowId job, RowId build, const char* arm, int pair, std::int64_t started_ms, double tok_s,
                     std::optional<bool> contended) {
    db::Run run = make_job_run(job, build, "q4_K", started_ms, tok_s, contended);
    run.arm = arm;
    run.pair_index = pair;
    return run;
  }

  RowId add(const db::Run& run) {
    RunBundle bundle;
    bundle.run = run;
    return store_->record_runs(std::vector<RunBundle>{bundle}).at(0);
  }

  RowId other_build_ = 0, gate_ = 0, second_ = 0, other_job_ = 0;
  std::vector<RowId> gate_runs_, second_runs_;
};
INSTANTIATE_FOR_BOTH_ENGINES(JobCompareRunsTest);

TEST_P(JobCompareRunsTest, ReturnsExactlyTheJobsFinishedRunsOldestFirst) {
  const auto runs = store_->job_compare_runs(gate_);
  // started_ms, then run id: pair 0's A and B (both at 1000, A stored first), then pair 1's.
  EXPECT_EQ(run_ids(runs), (std::vector<RowId>{gate_runs_[2], gate_runs_[3], gate_runs_[0], gate_runs_[1]}));
  EXPECT_EQ(run_ids(store_->job_compare_runs(second_)), second_runs_);
}

TEST_P(JobCompareRunsTest, RunsCarryTheirFieldsAndTheJobsTiming) {
  const auto runs = store_->job_compare_runs(gate_);
  ASSERT_EQ(runs.size(), 4u);
  const CompareRun& a0 = runs[0];
  EXPECT_EQ(a0.run_id, gate_runs_[2]);
  EXPECT_EQ(a0.job_id, gate_);
  EXPECT_EQ(a0.build_id, mmq_a_);
  EXPECT_EQ(a0.arm, "A");
  EXPECT_EQ(a0.pair_index, 0);
  EXPECT_EQ(a0.path, "mmq");
  EXPECT_EQ(a0.profile, "llama-7b");
  EXPECT_EQ(a0.weight_type, "q4_K");
  EXPECT_EQ(a0.tokens, 512);
  EXPECT_EQ(a0.backend, "cuda");
  EXPECT_EQ(a0.gpu_name, "NVIDIA H200");
  EXPECT_EQ(a0.gpu_uuid, "GPU-00000000-0000-0000-0000-000000000000");
  EXPECT_EQ(a0.started_ms, 1000);
  EXPECT_EQ(a0.tokens_per_s, 400.0);
  EXPECT_EQ(a0.contended, false);
  EXPECT_EQ(a0.job_timing, TimingMode::Pass);
  // The baseline's runs come with the job's, with their own build; contended and unknown load kept.
  EXPECT_EQ(runs[1].build_id, mmq_b_);
  EXPECT_EQ(runs[1].arm, "B");
  EXPECT_EQ(runs[1].tokens_per_s, 360.0);
  EXPECT_FALSE(runs[1].contended.has_value());
  EXPECT_EQ(runs[3].build_id, mmq_b_);
  EXPECT_EQ(runs[3].pair_index, 1);
  EXPECT_EQ(runs[3].started_ms, 4000);
  EXPECT_EQ(runs[3].contended, true);
  EXPECT_EQ(store_->job_compare_runs(second_).at(0).job_timing, TimingMode::Gemm);
}

TEST_P(JobCompareRunsTest, AreCompareRunsOfTheJobsBuildsKeptForTheJob) {
  // What the job detail views read before: each build's compare_runs, kept for the job, sorted.
  std::vector<CompareRun> expected;
  for (RowId build : {mmq_a_, mmq_b_}) {
    CompareRunsQuery query;
    query.build_id = build;
    for (const CompareRun& r : store_->compare_runs(query))
      if (r.job_id == gate_) expected.push_back(r);
  }
  std::sort(expected.begin(), expected.end(), [](const CompareRun& a, const CompareRun& b) {
    return std::tie(a.started_ms, a.run_id) < std::tie(b.started_ms, b.run_id);
  });
  const auto runs = store_->job_compare_runs(gate_);
  ASSERT_EQ(runs.size(), expected.size());
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(fields(runs[i]), fields(expected[i])) << i;
}

TEST_P(JobCompareRunsTest, AJobWithoutRunsOrNoJobHasNone) {
  const RowId idle = store_->create_job(make_job(mmq_a_, 400));
  EXPECT_TRUE(store_->job_compare_runs(idle).empty());
  EXPECT_TRUE(store_->job_compare_runs(idle + 1000).empty());
}

/// SQLite's plan for the store's own SQL text, one line per step.
std::vector<std::string> query_plan(const std::filesystem::path& path, const std::string& sql) {
  SQLite::Database raw(path.string(), SQLite::OPEN_READONLY);
  SQLite::Statement explain(raw, "EXPLAIN QUERY PLAN " + sql);
  std::vector<std::string> steps;
  while (explain.executeStep()) steps.push_back(explain.getColumn(3).getString());
  return steps;
}

TEST_P(JobCompareRunsTest, PlanSearchesRunsByJobNotTheBuildsRuns) {
  if (GetParam() != testing::Engine::Sqlite) GTEST_SKIP() << "a check of SQLite's query plan";
  // A long history of mmq-a from other jobs, and statistics that say so: the planner still goes
  // through the job's index entries.
  std::vector<RunBundle> history;
  for (int i = 0; i < 300; ++i) {
    RunBundle bundle;
    bundle.run = arm_run(second_, mmq_a_, i % 2 ? "B" : "A", i / 2, 10000 + i, 400.0, false);
    history.push_back(bundle);
  }
  store_->record_runs(history);
  for (bool analyzed : {false, true}) {
    if (analyzed) SQLite::Database(path_.string(), SQLite::OPEN_READWRITE).exec("ANALYZE");
    const auto steps = query_plan(path_, detail::job_compare_runs_sql());
    std::string plan;
    for (const std::string& step : steps) plan += step + "\n";
    SCOPED_TRACE(plan);
    EXPECT_TRUE(std::any_of(steps.begin(), steps.end(), [](const std::string& s) {
      return s.rfind("SEARCH", 0) == 0 && s.find("USING INDEX runs_by_job (job_id=?)") != std::string::npos;
    })) << (analyzed ? "after ANALYZE" : "before ANALYZE");
    for (const std::string& step : steps) {
      EXPECT_NE(step.rfind("SCAN", 0), 0u) << "a table read whole: " << step;
      EXPECT_EQ(step.find("runs_by_build"), std::string::npos) << step;
    }
  }
  EXPECT_EQ(store_->job_compare_runs(gate_).size(), 4u);
}

}  // namespace
}  // namespace qgate::db
