// Tests of the trend points kept at write time (build_rollups, migration 0006): after every kind of
// write (runs added and finished, co-tenant updates, job ends, interrupted jobs, imports) the rows
// equal a recomputation from the raw runs done here in C++; the migration runner fills them for a
// store that predates them (schema 4 and 5) and splits those of schema 6 by timing (0007);
// query_trend_summaries gives one point per build and
// series and picks the summary the co-tenant filter asks for. Every case but the migrations of old
// SQLite files runs on both engines.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "qgate/db/sqlite_store.h"
#include "schema_rewind.h"
#include "engine_fixtures.h"

namespace qgate::db {
namespace {

using testing::make_build;
using testing::make_done_run;
using testing::make_job;
using testing::make_job_run;
using testing::open_store;

// One rollup row as stored, or as recomputed; compared whole.
struct Summary {
  std::int64_t runs = 0, contended = 0, unknown = 0, quiet = 0, open = 0;
  std::optional<double> quiet_median, quiet_low, quiet_high;
  std::optional<double> open_median, open_low, open_high;
  double all_median = 0, all_low = 0, all_high = 0;
  std::int64_t first_ms = 0, last_ms = 0;
  std::int64_t jobs = 0, quiet_last_job = 0, open_last_job = 0, all_last_job = 0;
  std::string build_name;
  bool operator==(const Summary&) const = default;
};

// build, series key, profile, weight type, path, tokens, backend, GPU, week (its Monday 00:00 UTC),
// timing (the job's, "" for runs without a job), host.
using Key = std::tuple<std::int64_t, std::string, std::string, std::optional<std::string>, std::string,
                       std::int64_t, std::string, std::string, std::int64_t, std::string, std::string>;

constexpr std::int64_t kDayMs = 24LL * 3600 * 1000;
// Weeks start on Mondays 00:00 UTC; 1969-12-29 was the Monday before the epoch (a Thursday).
std::int64_t week_of(std::int64_t ms) {
  const std::int64_t monday = -3 * kDayMs, week = 7 * kDayMs;
  const std::int64_t since = ms - monday;
  return since / week * week + monday;  // ms >= 0, so since > 0 and the division is the floor
}
using Rollups = std::map<Key, Summary>;

std::optional<std::string> text_or_null(const detail::SqlStatement& row, int column) {
  if (row.is_null(column)) return std::nullopt;
  return row.text(column);
}
std::optional<double> real_or_null(const detail::SqlStatement& row, int column) {
  if (row.is_null(column)) return std::nullopt;
  return row.real(column);
}

std::optional<double> median_of(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

Rollups stored_rollups(detail::SqlConnection& raw) {
  detail::ScopedStatement statement(raw.prepared(
                           "SELECT build_id, series_key, profile, weight_type, path, tokens, backend, gpu_name, "
                           "runs, contended_runs, unknown_runs, quiet_runs, quiet_median, quiet_low, quiet_high, "
                           "open_runs, open_median, open_low, open_high, all_median, all_low, all_high, first_ms, "
                           "last_ms, build_name, jobs, quiet_last_job, open_last_job, all_last_job, week_ms, timing, host "
                           "FROM build_rollups"));
  detail::SqlStatement& select = *statement;
  Rollups rollups;
  while (select.step()) {
    Key key{select.int64(0), select.text(1), select.text(2),
            text_or_null(select, 3), select.text(4),  select.int64(5),
            select.text(6),   select.text(7),  select.int64(29),
            select.text(30),  select.text(31)};
    Summary s;
    s.runs = select.int64(8);
    s.contended = select.int64(9);
    s.unknown = select.int64(10);
    s.quiet = select.int64(11);
    s.quiet_median = real_or_null(select, 12);
    s.quiet_low = real_or_null(select, 13);
    s.quiet_high = real_or_null(select, 14);
    s.open = select.int64(15);
    s.open_median = real_or_null(select, 16);
    s.open_low = real_or_null(select, 17);
    s.open_high = real_or_null(select, 18);
    s.all_median = select.real(19);
    s.all_low = select.real(20);
    s.all_high = select.real(21);
    s.first_ms = select.int64(22);
    s.last_ms = select.int64(23);
    s.build_name = select.text(24);
    s.jobs = select.int64(25);
    s.quiet_last_job = select.int64(26);
    s.open_last_job = select.int64(27);
    s.all_last_job = select.int64(28);
    EXPECT_TRUE(rollups.emplace(key, s).second) << "two rollup rows for one build, series and week";
  }
  return rollups;
}

// The rollups as they should be, from the runs table alone (no SQL aggregation).
Rollups recomputed_rollups(detail::SqlConnection& raw) {
  detail::ScopedStatement statement(raw.prepared(
                           "SELECT r.job_id, r.build_id, r.series_key, r.profile, r.weight_type, r.path, r.tokens, "
                           "r.backend, r.gpu_name, r.state, r.tokens_per_s, r.contended, r.started_ms, b.name, "
                           "COALESCE(j.timing, ''), r.host "
                           "FROM runs r JOIN builds b ON b.id = r.build_id LEFT JOIN jobs j ON j.id = r.job_id"));
  detail::SqlStatement& select = *statement;
  struct Runs {
    std::vector<double> all, quiet, open;
    std::set<std::int64_t> jobs;  // every job among the runs (imported runs have none)
    std::int64_t quiet_job = 0, open_job = 0;
    Summary summary;
  };
  std::map<Key, Runs> groups;
  while (select.step()) {
    if (select.text(9) != "done" || select.is_null(10)) continue;
    Key key{select.int64(1),
            select.text(2),
            select.text(3),
            text_or_null(select, 4),
            select.text(5),
            select.int64(6),
            select.text(7),
            select.text(8),
            week_of(select.int64(12)),
            select.text(14),
            select.text(15)};
    const double value = select.real(10);
    const std::optional<int> contended =
        select.is_null(11) ? std::nullopt : std::optional<int>(select.int64(11));
    const std::int64_t started = select.int64(12);
    auto [it, added] = groups.try_emplace(key);
    Runs& g = it->second;
    if (added || started < g.summary.first_ms) g.summary.first_ms = started;
    if (added || started > g.summary.last_ms) g.summary.last_ms = started;
    g.summary.build_name = select.text(13);
    const std::int64_t job = select.is_null(0) ? 0 : select.int64(0);
    if (job != 0) g.jobs.insert(job);
    if (contended == 0) g.quiet_job = std::max(g.quiet_job, job);
    if (contended != 1) g.open_job = std::max(g.open_job, job);
    g.all.push_back(value);
    if (contended == 0) g.quiet.push_back(value);
    if (contended != 1) g.open.push_back(value);
    if (contended == 1) ++g.summary.contended;
    if (!contended) ++g.summary.unknown;
  }
  Rollups rollups;
  for (auto& [key, g] : groups) {
    Summary s = g.summary;
    s.jobs = static_cast<std::int64_t>(g.jobs.size());
    s.all_last_job = g.jobs.empty() ? 0 : *g.jobs.rbegin();
    s.quiet_last_job = g.quiet_job;
    s.open_last_job = g.open_job;
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

class TrendRollupsTest : public testing::TwoBuildsFixture {
 protected:
  void expect_consistent(const std::string& after) {
    const Rollups stored = stored_rollups(*raw());
    const Rollups expected = recomputed_rollups(*raw());
    EXPECT_EQ(stored.size(), expected.size()) << "after " << after;
    EXPECT_TRUE(stored == expected) << "rollups differ from the runs after " << after;
  }

  RowId start_job(RowId build_id, TimingMode timing = TimingMode::Gemm) {
    Job job = make_job(build_id);
    job.timing = timing;
    return store_->create_job(job);
  }
};
INSTANTIATE_FOR_BOTH_ENGINES(TrendRollupsTest);

TEST_P(TrendRollupsTest, FreshStoreHasNoRollups) {
  EXPECT_TRUE(stored_rollups(*raw()).empty());
  EXPECT_TRUE(store_->query_trend_summaries(TrendQuery{}).empty());
}

TEST_P(TrendRollupsTest, RunsAreSummarisedAsTheyFinish) {
  const RowId job = start_job(mmq_a_);
  // A run in progress is not in a trend yet.
  db::Run running = make_job_run(job, mmq_a_, "q4_K", 1000, 0, std::nullopt);
  running.state = RunState::Running;
  running.tokens_per_s.reset();
  const RowId first = store_->add_run(running);
  expect_consistent("a running run");
  EXPECT_TRUE(stored_rollups(*raw()).empty());

  RunResult result;
  result.tokens_per_s = 400;
  result.contended = false;
  store_->finish_run(first, result, {});
  expect_consistent("finish_run");
  ASSERT_EQ(stored_rollups(*raw()).size(), 1u);

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
  EXPECT_EQ(points[0].last_job_id, job);
  EXPECT_EQ(points[0].jobs, 1);
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

TEST_P(TrendRollupsTest, ABuildsJobsMakeOnePointPerSeries) {
  // A build measured by three jobs (its own gate, then as the baseline of two others): one point per
  // series over all their runs, naming the newest job; a job's runs are one query away.
  std::vector<RowId> jobs;
  std::vector<RunBundle> bundles;
  for (int j = 0; j < 3; ++j) {
    jobs.push_back(start_job(mmq_a_));
    for (int i = 0; i < 3; ++i)
      bundles.push_back({make_job_run(jobs.back(), mmq_a_, "q4_K", 1000 * (j + 1) + i, 100.0 * (j + 1) + i, false),
                         {}, {}, {}});
    bundles.push_back({make_job_run(jobs.back(), mmq_a_, "q8_0", 1000 * (j + 1) + 9, 50.0, false), {}, {}, {}});
  }
  store_->record_runs(bundles);
  expect_consistent("three jobs of one build");
  TrendQuery query;
  query.weight_type = "q4_K";
  const auto points = store_->query_trend_summaries(query);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].jobs, 3);
  EXPECT_EQ(points[0].last_job_id, jobs.back());
  EXPECT_EQ(points[0].runs, 9);
  EXPECT_DOUBLE_EQ(points[0].median_tokens_per_s, 201.0);
  EXPECT_DOUBLE_EQ(points[0].low_tokens_per_s, 100.0);
  EXPECT_DOUBLE_EQ(points[0].high_tokens_per_s, 302.0);
  EXPECT_EQ(points[0].first_ms, 1000);
  EXPECT_EQ(points[0].last_ms, 3002);
  EXPECT_EQ(store_->query_trend_summaries(TrendQuery{}).size(), 2u);  // q4_K and q8_0

  TrendQuery one_job;
  one_job.job_id = jobs[1];
  EXPECT_EQ(store_->query_trend(one_job).size(), 4u);
  EXPECT_THROW(store_->query_trend_summaries(one_job), StoreError);
}

TEST_P(TrendRollupsTest, APointKeepsOneTiming) {
  // One build gated GEMM-timed and pass-timed in one week: a point per timing, each the median of
  // its own runs, where one point would have mixed two measurements.
  const RowId gemm = start_job(mmq_a_, TimingMode::Gemm);
  const RowId pass = start_job(mmq_a_, TimingMode::Pass);
  std::vector<RunBundle> bundles;
  for (int i = 0; i < 3; ++i) {
    bundles.push_back({make_job_run(gemm, mmq_a_, "q4_K", 1000 + i, 100.0 + i, false), {}, {}, {}});
    bundles.push_back({make_job_run(pass, mmq_a_, "q4_K", 2000 + i, 200.0 + i, false), {}, {}, {}});
  }
  RunBundle imported;
  imported.run = make_done_run(mmq_a_, "llama-7b", "q4_K", 3000, 50.0, false);
  bundles.push_back(imported);
  store_->record_runs(bundles);
  expect_consistent("runs of both timings and an import");

  TrendQuery query;
  query.weight_type = "q4_K";
  const auto points = store_->query_trend_summaries(query);
  ASSERT_EQ(points.size(), 3u);
  std::map<std::optional<TimingMode>, const TrendSummary*> by_timing;
  for (const auto& p : points) EXPECT_TRUE(by_timing.emplace(p.timing, &p).second) << "two points of one timing";
  ASSERT_EQ(by_timing.size(), 3u);
  EXPECT_DOUBLE_EQ(by_timing[TimingMode::Gemm]->median_tokens_per_s, 101.0);
  EXPECT_EQ(by_timing[TimingMode::Gemm]->last_job_id, gemm);
  EXPECT_DOUBLE_EQ(by_timing[TimingMode::Pass]->median_tokens_per_s, 201.0);
  EXPECT_EQ(by_timing[TimingMode::Pass]->last_job_id, pass);
  EXPECT_DOUBLE_EQ(by_timing[std::nullopt]->median_tokens_per_s, 50.0);
  EXPECT_FALSE(by_timing[std::nullopt]->last_job_id.has_value());

  // The raw runs say their job's timing too.
  std::map<std::optional<TimingMode>, int> raw;
  for (const auto& row : store_->query_trend(query)) ++raw[row.timing];
  EXPECT_EQ(raw, (std::map<std::optional<TimingMode>, int>{{std::nullopt, 1}, {TimingMode::Gemm, 3}, {TimingMode::Pass, 3}}));
}

TEST_P(TrendRollupsTest, RunsOfTwoHostsArePointsOfTheirOwn) {
  // One build measured on the same GPU model by two hosts in one week: a point per host, each the
  // median of its own runs, and the point says its host.
  const RowId job = start_job(mmq_a_);
  std::vector<RunBundle> bundles;
  for (int i = 0; i < 3; ++i) {
    for (const char* host : {"gpu-host-a", "gpu-host-b"}) {
      RunBundle bundle{make_job_run(job, mmq_a_, "q4_K", 1000 + i, (host[9] == 'a' ? 100.0 : 300.0) + i, false), {}, {}, {}};
      bundle.run.host = host;
      bundles.push_back(bundle);
    }
  }
  store_->record_runs(bundles);
  expect_consistent("runs of two hosts");

  TrendQuery query;
  query.weight_type = "q4_K";
  const auto points = store_->query_trend_summaries(query);
  ASSERT_EQ(points.size(), 2u);
  std::map<std::string, double> median_by_host;
  for (const auto& p : points) median_by_host[p.host] = p.median_tokens_per_s;
  EXPECT_EQ(median_by_host, (std::map<std::string, double>{{"gpu-host-a", 101.0}, {"gpu-host-b", 301.0}}));
  // The raw runs and the compare runs say their host too.
  std::set<std::string> raw_hosts;
  for (const auto& row : store_->query_trend(query)) raw_hosts.insert(row.host);
  EXPECT_EQ(raw_hosts, (std::set<std::string>{"gpu-host-a", "gpu-host-b"}));
  CompareRunsQuery compare;
  compare.build_id = mmq_a_;
  compare.weight_type = "q4_K";
  std::set<std::string> compare_hosts;
  for (const auto& run : store_->compare_runs(compare)) compare_hosts.insert(run.host);
  EXPECT_EQ(compare_hosts, raw_hosts);
}

TEST_P(TrendRollupsTest, APointNamesTheNewestJobAmongTheRunsItKeeps) {
  // A quiet job, then a re-run of the same build that was contended throughout.
  const RowId quiet = start_job(mmq_a_);
  const RowId contended = start_job(mmq_a_);
  std::vector<RunBundle> bundles;
  for (int i = 0; i < 3; ++i) {
    bundles.push_back({make_job_run(quiet, mmq_a_, "q4_K", 1000 + i, 400 + i, false), {}, {}, {}});
    bundles.push_back({make_job_run(contended, mmq_a_, "q4_K", 2000 + i, 200 + i, true), {}, {}, {}});
  }
  store_->record_runs(bundles);
  expect_consistent("a quiet and a contended job");
  TrendQuery query;
  auto points = store_->query_trend_summaries(query);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].last_job_id, quiet);
  EXPECT_EQ(points[0].runs, 3);
  EXPECT_EQ(points[0].jobs, 2);
  query.include_contended = true;
  points = store_->query_trend_summaries(query);
  ASSERT_EQ(points.size(), 1u);
  EXPECT_EQ(points[0].last_job_id, contended);
  EXPECT_EQ(points[0].runs, 6);
}

TEST_P(TrendRollupsTest, ABuildsWeeksArePointsOfTheirOwn) {
  // Monday 2026-11-30 00:00 UTC; one job's runs on either side of it, and a week later.
  constexpr std::int64_t kMonday = 1'795'996'800'000;
  const RowId job = start_job(mmq_a_);
  std::vector<RunBundle> bundles;
  for (const std::int64_t started : {kMonday - 60'000, kMonday - 1, kMonday, kMonday + 60'000, kMonday + 7 * kDayMs})
    bundles.push_back({make_job_run(job, mmq_a_, "q4_K", started, 100.0 + double(started % 1000), false), {}, {}, {}});
  store_->record_runs(bundles);
  expect_consistent("runs in three weeks");
  const Rollups stored = stored_rollups(*raw());
  std::vector<std::pair<std::int64_t, std::int64_t>> weeks;  // week, runs
  for (const auto& [key, summary] : stored) weeks.emplace_back(std::get<8>(key), summary.runs);
  using W = std::vector<std::pair<std::int64_t, std::int64_t>>;
  EXPECT_EQ(weeks, (W{{kMonday - 7 * kDayMs, 2}, {kMonday, 2}, {kMonday + 7 * kDayMs, 1}}));

  // A trend window keeps the weeks with a run in it.
  TrendQuery query;
  query.since_ms = kMonday;
  EXPECT_EQ(store_->query_trend_summaries(query).size(), 2u);
  query.since_ms = kMonday + 60'001;
  EXPECT_EQ(store_->query_trend_summaries(query).size(), 1u);
}

TEST_P(TrendRollupsTest, AFinishThatSetsTheTokenCountMovesTheRunToItsSeries) {
  const RowId job = start_job(mmq_a_);
  db::Run running = make_job_run(job, mmq_a_, "q4_K", 1000, 0, false);
  running.state = RunState::Running;
  running.tokens_per_s.reset();
  const RowId first = store_->add_run(running);
  RunResult result;
  result.tokens_per_s = 400;
  store_->finish_run(first, result, {});
  running.started_ms = 2000;
  const RowId second = store_->add_run(running);
  result.tokens_per_s = 800;
  result.tokens = 128;  // measured at another token count than planned: another series
  store_->finish_run(second, result, {});
  expect_consistent("a finish with a token count");
  ASSERT_EQ(stored_rollups(*raw()).size(), 2u);
  // Re-finishing the first run at 128 tokens empties its old point, which goes away.
  store_->finish_run(first, result, {});
  expect_consistent("a run moved to another token count");
  ASSERT_EQ(stored_rollups(*raw()).size(), 1u);
  EXPECT_EQ(std::get<5>(stored_rollups(*raw()).begin()->first), 128);
}

TEST_P(TrendRollupsTest, FailedCancelledAndInterruptedJobsStayConsistent) {
  const RowId failed = start_job(mmq_a_);
  const RowId cancelled = start_job(mmq_b_);
  std::vector<RunBundle> bundles;
  for (int i = 0; i < 3; ++i) {
    bundles.push_back({make_job_run(failed, mmq_a_, "q4_K", 100 + i, 400 + i, false), {}, {}, {}});
    bundles.push_back({make_job_run(cancelled, mmq_b_, "q8_0", 200 + i, 300 + i, i == 0), {}, {}, {}});
  }
  db::Run failed_run = make_job_run(failed, mmq_a_, "q4_K", 150, 1, false);
  failed_run.state = RunState::Failed;  // a failed run never counts, whatever its figure
  bundles.push_back({failed_run, {}, {}, {}});
  store_->record_runs(bundles);
  expect_consistent("record_runs of two jobs");

  // A run left running by a daemon that died: requeued, the run interrupted, the point unchanged.
  ASSERT_TRUE(store_->claim_next_job(std::nullopt).has_value());
  db::Run running = make_job_run(failed, mmq_a_, "q4_K", 160, 0, std::nullopt);
  running.state = RunState::Running;
  running.tokens_per_s.reset();
  store_->add_run(running);
  const Rollups before_requeue = stored_rollups(*raw());
  store_->requeue_interrupted_jobs();
  expect_consistent("requeue_interrupted_jobs");
  EXPECT_TRUE(stored_rollups(*raw()) == before_requeue);

  ASSERT_TRUE(store_->claim_next_job(std::nullopt).has_value());
  ASSERT_TRUE(store_->claim_next_job(std::nullopt).has_value());
  EXPECT_TRUE(store_->end_job(failed, JobState::Failed, "worker crashed", {}, JobState::Running));
  EXPECT_TRUE(store_->end_job(cancelled, JobState::Cancelled, "", {}, JobState::Running));
  expect_consistent("end_job");
  EXPECT_TRUE(stored_rollups(*raw()) == before_requeue);  // a job's end changes no run, so no point

  const Rollups stored = stored_rollups(*raw());
  ASSERT_EQ(stored.size(), 2u);
  for (const auto& [key, summary] : stored) {
    if (std::get<0>(key) == mmq_a_) {
      EXPECT_EQ(summary.runs, 3);
      EXPECT_EQ(summary.all_median, 401.0);
      EXPECT_EQ(summary.all_last_job, failed);
    } else {
      EXPECT_EQ(std::get<0>(key), mmq_b_);
      EXPECT_EQ(summary.contended, 1);
      EXPECT_EQ(summary.quiet_median, 301.5);
      EXPECT_EQ(summary.all_last_job, cancelled);
    }
  }
}

TEST_P(TrendRollupsTest, ImportsAreSummarisedPerBuildAndSeries) {
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
  const Rollups before = stored_rollups(*raw());
  EXPECT_EQ(store_->import_external(batch).runs_already_stored, 5);
  EXPECT_TRUE(stored_rollups(*raw()) == before);

  // Imported runs have no co-tenant reading: they show only when unknown load is kept.
  TrendQuery query;
  EXPECT_TRUE(store_->query_trend_summaries(query).empty());
  query.include_unknown = true;
  const auto points = store_->query_trend_summaries(query);
  ASSERT_EQ(points.size(), 2u);
  EXPECT_FALSE(points[0].last_job_id.has_value());
  EXPECT_EQ(points[0].jobs, 0);
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

TEST_P(TrendRollupsTest, SummariesFilterLikeTheRawTrend) {
  const RowId job_a = start_job(mmq_a_);
  const RowId job_b = start_job(mmq_b_);
  std::vector<RunBundle> bundles;
  bundles.push_back({make_job_run(job_a, mmq_a_, "q4_K", 1000, 400, false), {}, {}, {}});
  bundles.push_back({make_job_run(job_a, mmq_a_, "q8_0", 1100, 300, true), {}, {}, {}});  // contended only
  bundles.push_back({make_job_run(job_b, mmq_b_, "q4_K", 5000, 440, std::nullopt), {}, {}, {}});
  db::Run other_profile = make_job_run(job_b, mmq_b_, "q4_K", 6000, 200, false);
  other_profile.profile = "llama-13b";
  other_profile.path = "f16";
  bundles.push_back({other_profile, {}, {}, {}});
  store_->record_runs(bundles);
  expect_consistent("record_runs");

  auto builds_of = [&](const TrendQuery& query) {
    std::vector<std::pair<RowId, std::string>> out;
    for (const TrendSummary& p : store_->query_trend_summaries(query))
      out.emplace_back(p.build_id, p.weight_type.value_or(""));
    return out;
  };
  using V = std::vector<std::pair<RowId, std::string>>;
  TrendQuery query;
  query.profile = "llama-7b";
  EXPECT_EQ(builds_of(query), (V{{mmq_a_, "q4_K"}}));
  query.include_unknown = true;
  EXPECT_EQ(builds_of(query), (V{{mmq_a_, "q4_K"}, {mmq_b_, "q4_K"}}));
  query.include_contended = true;
  EXPECT_EQ(builds_of(query), (V{{mmq_a_, "q4_K"}, {mmq_a_, "q8_0"}, {mmq_b_, "q4_K"}}));
  query.weight_type = "q4_K";
  query.since_ms = 2000;  // builds measured in the window: by their last run
  EXPECT_EQ(builds_of(query), (V{{mmq_b_, "q4_K"}}));
  query.since_ms = 1000;
  EXPECT_EQ(builds_of(query), (V{{mmq_a_, "q4_K"}, {mmq_b_, "q4_K"}}));
  query.since_ms = 0;
  query.build_name_glob = "mmq-a";
  EXPECT_EQ(builds_of(query), (V{{mmq_a_, "q4_K"}}));

  TrendQuery f16;
  f16.path = "f16";
  EXPECT_EQ(builds_of(f16), (V{{mmq_b_, "q4_K"}}));
  TrendQuery limited;
  limited.include_contended = true;
  limited.limit = 2;
  EXPECT_EQ(builds_of(limited), (V{{mmq_a_, "q4_K"}, {mmq_a_, "q8_0"}}));
}

/// A migration file's text, as the store embeds it.
std::string migration_text(const std::string& file_name) {
  std::ifstream in(std::filesystem::path(QGATE_DB_MIGRATIONS_DIR) / file_name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class TrendRollupsMigrationTest : public TrendRollupsTest {
 protected:
  /// A history of two jobs and an import, written by this store; the rows it kept.
  Rollups write_history() {
    const RowId job = start_job(mmq_a_);
    const RowId again = start_job(mmq_a_);
    std::vector<RunBundle> bundles;
    for (int i = 0; i < 7; ++i) {
      const std::optional<bool> contended =
          i == 3 ? std::optional<bool>(true) : i == 5 ? std::nullopt : std::optional<bool>(false);
      bundles.push_back({make_job_run(i < 4 ? job : again, mmq_a_, i % 2 ? "q4_K" : "q8_0", 1000 + i,
                                      100.0 + 37 * (i % 4), contended),
                         {}, {}, {}});
    }
    RunBundle imported;
    imported.run = make_done_run(mmq_b_, "llama-13b", "q4_0", 9000, 55.0, std::nullopt);
    bundles.push_back(imported);
    store_->record_runs(bundles);
    const Rollups written = stored_rollups(*raw());
    EXPECT_EQ(written.size(), 3u);
    store_.reset();
    return written;
  }

  /// Takes the file back to schema 4: without 0006's and 0005's tables and indexes.
  void back_to_schema_4() {
    SQLite::Database raw(path_.string(), SQLite::OPEN_READWRITE);
    testing::rewind_schema_to(raw, 7);
    raw.exec("DROP TABLE build_rollups");
    raw.exec("DROP INDEX runs_by_build_series");
    raw.exec("CREATE INDEX runs_by_build ON runs (build_id)");
    raw.exec("PRAGMA user_version = 4");
  }
};
// Files from before a migration are SQLite's alone: a PostgreSQL database starts at version 0.
INSTANTIATE_TEST_SUITE_P(SqliteFiles, TrendRollupsMigrationTest, ::testing::Values(testing::Engine::Sqlite),
                         testing::engine_name);

TEST_P(TrendRollupsMigrationTest, TheRunnerFillsTheRowsOfAStoreAtSchema4) {
  const Rollups written = write_history();
  back_to_schema_4();
  store_ = reopen();
  EXPECT_EQ(store_->schema_version(), schema_version_known());
  expect_consistent("migrating from schema 4");
  EXPECT_TRUE(stored_rollups(*raw()) == written);
  EXPECT_EQ(store_->integrity_check(), "ok");
}

TEST_P(TrendRollupsMigrationTest, TheRunnerReplacesThePerJobRowsOfAStoreAtSchema5) {
  const Rollups written = write_history();
  back_to_schema_4();
  {
    // Schema 5 as 0005 left it: its per-job table, filled by its own back-fill.
    SQLite::Database raw(path_.string(), SQLite::OPEN_READWRITE);
    raw.exec(migration_text("0005_trend_rollups.sql"));
    raw.exec("PRAGMA user_version = 5");
    ASSERT_EQ(raw.execAndGet("SELECT COUNT(*) FROM trend_rollups").getInt64(), 5);  // per job: 2 + 2, import 1
  }
  store_ = reopen();
  expect_consistent("migrating from schema 5");
  EXPECT_TRUE(stored_rollups(*raw()) == written);
  SQLite::Database raw(path_.string(), SQLite::OPEN_READONLY);
  EXPECT_FALSE(raw.tableExists("trend_rollups"));
}

TEST_P(TrendRollupsMigrationTest, TheRunnerSplitsTheHostsOfAStoreAtSchema11) {
  // Schema 11 kept one point for a build's runs on two hosts; 0012 recomputes them as a point per host.
  const RowId job = start_job(mmq_a_);
  std::vector<RunBundle> bundles;
  for (int i = 0; i < 4; ++i) {
    RunBundle bundle{make_job_run(job, mmq_a_, "q8_0", 1000 + i, 100.0 + 100 * (i % 2), false), {}, {}, {}};
    bundle.run.host = i % 2 ? "gpu-host-b" : "gpu-host-a";
    bundles.push_back(bundle);
  }
  store_->record_runs(bundles);
  const Rollups written = stored_rollups(*raw());
  ASSERT_EQ(written.size(), 2u);
  store_.reset();
  {
    // Schema 11 as 0011 left it: no host column, one row over the four runs.
    SQLite::Database raw(path_.string(), SQLite::OPEN_READWRITE);
    raw.exec("DELETE FROM build_rollups WHERE host = 'gpu-host-b'");
    raw.exec("UPDATE build_rollups SET runs = 4, all_median = 150, all_low = 100, all_high = 200");
    testing::rewind_schema_to(raw, 11);
  }
  store_ = reopen();
  EXPECT_EQ(store_->schema_version(), schema_version_known());
  expect_consistent("migrating from schema 11");
  EXPECT_TRUE(stored_rollups(*raw()) == written);
}

TEST_P(TrendRollupsMigrationTest, TheRunnerSplitsTheMixedTimingPointsOfAStoreAtSchema6) {
  // Schema 6 kept one point for a build's GEMM-timed and pass-timed runs of a week; 0007 recomputes
  // them as a point per timing.
  const RowId gemm = start_job(mmq_a_, TimingMode::Gemm);
  const RowId pass = start_job(mmq_a_, TimingMode::Pass);
  std::vector<RunBundle> bundles;
  for (int i = 0; i < 3; ++i) {
    bundles.push_back({make_job_run(gemm, mmq_a_, "q8_0", 1000 + i, 100.0 + i, false), {}, {}, {}});
    bundles.push_back({make_job_run(pass, mmq_a_, "q8_0", 2000 + i, 300.0 + i, false), {}, {}, {}});
  }
  store_->record_runs(bundles);
  const Rollups written = stored_rollups(*raw());
  ASSERT_EQ(written.size(), 2u);
  store_.reset();
  {
    // Schema 6 as 0006 left it: no timing column, one row over all six runs.
    SQLite::Database raw(path_.string(), SQLite::OPEN_READWRITE);
    raw.exec("DROP INDEX build_rollups_by_group");
    raw.exec("DELETE FROM build_rollups WHERE timing = 'pass'");
    raw.exec("UPDATE build_rollups SET runs = 6, all_median = 200.5, all_low = 100, all_high = 302");
    raw.exec("ALTER TABLE build_rollups DROP COLUMN timing");
    testing::rewind_schema_to(raw, 7);
    raw.exec("CREATE INDEX build_rollups_by_group ON build_rollups (build_id, series_key, tokens, week_ms)");
    raw.exec("PRAGMA user_version = 6");
  }
  store_ = reopen();
  EXPECT_EQ(store_->schema_version(), schema_version_known());
  expect_consistent("migrating from schema 6");
  EXPECT_TRUE(stored_rollups(*raw()) == written);
  EXPECT_EQ(store_->integrity_check(), "ok");
}

}  // namespace
}  // namespace qgate::db
