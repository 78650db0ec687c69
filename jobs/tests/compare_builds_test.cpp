// CompareBuilds on a seeded history in a real SQLite store: only matching quiet runs are compared, n per
// side is right, a known 5% difference is estimated within its interval, the jobs that ran both builds
// give their pairs, and incomparable histories are refused with what differed.
#include "qgate/jobs/compare_builds.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include "compare_history.h"
#include "qgate/db/sqlite_store.h"

namespace qgate::jobs {
namespace {

using testing::SeededHistory;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class CompareBuildsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("qgate-compare-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    db::SqliteOptions options;
    options.path = dir_ / "qgate.db";
    store_ = db::open_sqlite_store(options);
    history_ = testing::seed_history(*store_);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  db::Build build(db::RowId id) { return *store_->find_build(id); }
  BuildComparison compare(db::RowId a, db::RowId b, CompareOptions options = {}) {
    return CompareBuilds(*store_).compare(build(a), build(b), options);
  }
  /// The refusal's message; fails the test when the comparison is not refused.
  std::string refusal(db::RowId a, db::RowId b, CompareOptions options = {}) {
    try {
      compare(a, b, options);
    } catch (const NothingComparable& e) {
      return e.what();
    }
    ADD_FAILURE() << "compare(" << a << ", " << b << ") was not refused";
    return "";
  }

  std::filesystem::path dir_;
  std::unique_ptr<db::Store> store_;
  SeededHistory history_;
};

TEST_F(CompareBuildsTest, ComparesOnlyTheSharedSeriesWithItsQuietRuns) {
  const BuildComparison c = compare(history_.tile64, history_.tile128);
  ASSERT_EQ(c.series.size(), 1u);
  const SeriesComparison& s = c.series[0];
  EXPECT_EQ(s.key.backend, "cuda");
  EXPECT_EQ(s.key.gpu_name, testing::kH200);
  EXPECT_EQ(s.key.gpu_uuid, testing::kUuid1);
  EXPECT_EQ(s.key.tokens, 512);
  EXPECT_EQ(s.key.profile, testing::kProfile);
  EXPECT_EQ(s.key.path, "mmq");
  EXPECT_EQ(s.key.timing, "gemm");
  // n per side: the quiet runs of the shared series, from the jobs they were measured in.
  EXPECT_EQ(int(s.a.tokens_per_s.size()), history_.tile64_runs);
  EXPECT_EQ(int(s.b.tokens_per_s.size()), history_.tile128_runs);
  EXPECT_EQ(s.a.job_ids, history_.tile64_jobs);
  EXPECT_EQ(s.b.job_ids, history_.tile128_jobs);
  EXPECT_EQ(s.a.contended_left_out, history_.tile64_contended);
  EXPECT_EQ(s.a.contended_runs, 0);
  // Nothing from the other series got in: every run of the shared series is near its median.
  for (double v : s.a.tokens_per_s) EXPECT_NEAR(v, 420.0, 40.0);
  for (double v : s.b.tokens_per_s) EXPECT_NEAR(v, 400.0, 40.0);
}

TEST_F(CompareBuildsTest, EstimatesTheKnownFivePercentWithinItsInterval) {
  const SeriesComparison s = compare(history_.tile64, history_.tile128).series.at(0);
  ASSERT_TRUE(s.unpaired.has_value());
  // Judged on its jobs: 4 of A (3 A/Bs and the gate) and 3 of B, each job's runs summarised.
  EXPECT_TRUE(s.on_units);
  EXPECT_EQ(s.unpaired->n_a, history_.tile64_jobs.size());
  EXPECT_EQ(s.unpaired->n_b, history_.tile128_jobs.size());
  EXPECT_LT(s.unpaired->lower, 1.05);
  EXPECT_GT(s.unpaired->upper, 1.05);
  EXPECT_NEAR(s.unpaired->ratio, 1.05, 0.01);
  EXPECT_GT(s.unpaired->lower, 1.02);  // job means of 8 to 10 runs at 1.5% noise agree to well under 1%
  EXPECT_LT(s.unpaired->welch_p, 1e-3);
  EXPECT_TRUE(s.significant);
  EXPECT_EQ(s.answer, Answer::different);
  // B against A reads the reciprocal.
  const SeriesComparison r = compare(history_.tile128, history_.tile64).series.at(0);
  EXPECT_NEAR(r.unpaired->ratio * s.unpaired->ratio, 1.0, 1e-12);
}

TEST_F(CompareBuildsTest, TheJobThatRanBothBuildsGivesItsOwnVerdictAsAOverB) {
  const SeriesComparison s = compare(history_.tile64, history_.tile128).series.at(0);
  ASSERT_EQ(s.paired_jobs.size(), 1u);
  const PairedJob& j = s.paired_jobs[0];
  EXPECT_EQ(j.job_id, history_.gate_job);
  EXPECT_EQ(j.quiet_pairs, 6);
  EXPECT_EQ(j.pairs, 6);
  EXPECT_EQ(j.ratio, testing::kGateRatio);
  EXPECT_EQ(j.lower, testing::kGateLow);
  EXPECT_EQ(j.upper, testing::kGateHigh);
  EXPECT_EQ(j.answer, Answer::different);
  // tile128 was the job's arm B: as A here, the job's ratio is read the other way round.
  const PairedJob r = compare(history_.tile128, history_.tile64).series.at(0).paired_jobs.at(0);
  EXPECT_DOUBLE_EQ(r.ratio, 1 / testing::kGateRatio);
  EXPECT_DOUBLE_EQ(r.lower, 1 / testing::kGateHigh);
  EXPECT_DOUBLE_EQ(r.upper, 1 / testing::kGateLow);
}

TEST_F(CompareBuildsTest, ContendedRunsOnlyOnRequest) {
  CompareOptions options;
  options.include_contended = true;
  const SeriesComparison s = compare(history_.tile64, history_.tile128, options).series.at(0);
  EXPECT_EQ(int(s.a.tokens_per_s.size()), history_.tile64_runs + history_.tile64_contended);
  EXPECT_EQ(s.a.contended_runs, history_.tile64_contended);
  EXPECT_EQ(s.a.contended_left_out, 0);
  // Three runs at half speed drag their job's mean, and so A's, down.
  EXPECT_LT(s.unpaired->ratio, compare(history_.tile64, history_.tile128).series.at(0).unpaired->ratio - 0.03);
}

TEST_F(CompareBuildsTest, NotesNameTheSeriesOnlyOneBuildHas) {
  const BuildComparison c = compare(history_.tile64, history_.tile128);
  std::string notes;
  for (const auto& n : c.notes) notes += n + "\n";
  EXPECT_TRUE(contains(notes, "A also has runs on 2 series")) << notes;  // cpu at 64 tokens, pass timing
  EXPECT_TRUE(contains(notes, "B also has runs on 3 series")) << notes;  // other GPU, 256 tokens, imported
  EXPECT_TRUE(contains(notes, "3 contended run(s) of A")) << notes;
}

TEST_F(CompareBuildsTest, EqualBuildsAreSameWithinTheMargin) {
  const SeriesComparison s = compare(history_.steady, history_.tile128).series.at(0);
  ASSERT_TRUE(s.unpaired.has_value());
  EXPECT_EQ(s.answer, Answer::same) << s.unpaired->lower << " " << s.unpaired->upper;
  CompareOptions tight;
  tight.same_margin = 0.001;  // narrower than the interval: no longer SAME
  EXPECT_NE(compare(history_.steady, history_.tile128, tight).series.at(0).answer, Answer::same);
}

TEST_F(CompareBuildsTest, FiltersNarrowTheRuns) {
  CompareOptions options;
  options.tokens = 256;
  const std::string why = refusal(history_.tile64, history_.tile128, options);
  EXPECT_TRUE(contains(why, "A (tile64, build")) << why;
  EXPECT_TRUE(contains(why, "has no finished timed runs with 256 tokens")) << why;
  options = {};
  options.profile = "cpu-tiny";
  EXPECT_TRUE(contains(refusal(history_.tile64, history_.tile128, options), "B (tile128, build"));
}

TEST_F(CompareBuildsTest, RefusesDifferentBackendsAndTokensNamingWhatDiffered) {
  const std::string why = refusal(history_.cpu_only, history_.tile64);
  // cpu-only has cpu runs at 128 tokens; tile64 has cpu runs at 64 and cuda runs at 512.
  EXPECT_TRUE(contains(why, "nothing to compare")) << why;
  EXPECT_TRUE(contains(why, "A (cpu-only, build")) << why;
  EXPECT_TRUE(contains(why, "has runs on cpu at 128 tokens")) << why;
  EXPECT_TRUE(contains(why, "only on ")) << why;
  EXPECT_TRUE(contains(why, "cuda on NVIDIA H200")) << why;
  EXPECT_TRUE(contains(why, "cpu at 64 tokens")) << why;
  EXPECT_TRUE(contains(why, "They differ in tokens.")) << why;
}

TEST_F(CompareBuildsTest, RefusesContendedOnlyAndEmptyHistories) {
  std::string why = refusal(history_.contended_only, history_.tile128);
  EXPECT_TRUE(contains(why, "A (contended-only, build")) << why;
  EXPECT_TRUE(contains(why, "has only contended runs (6")) << why;
  EXPECT_TRUE(contains(why, "--include-contended")) << why;
  CompareOptions options;
  options.include_contended = true;
  EXPECT_EQ(compare(history_.contended_only, history_.tile128, options).series.size(), 1u);

  why = refusal(history_.tile64, history_.no_runs);
  EXPECT_TRUE(contains(why, "B (no-runs, build")) << why;
  EXPECT_TRUE(contains(why, "has no finished timed runs")) << why;
}

TEST_F(CompareBuildsTest, RefusesOneBuildAgainstItselfAndBadOptions) {
  EXPECT_THROW(compare(history_.tile64, history_.tile64), std::invalid_argument);
  CompareOptions options;
  options.same_margin = 0;
  EXPECT_THROW(compare(history_.tile64, history_.tile128, options), std::invalid_argument);
}

TEST_F(CompareBuildsTest, OneJobASideIsNoVerdictHoweverTightItsRuns) {
  // Two builds of equal speed, one job each, the second job 3% slow for reasons of its own (another
  // day's clocks): their runs differ clearly, but one job a side cannot tell a build from its job.
  testing::HistoryWriter w(*store_, 7);
  const db::RowId x = w.build("one-job-x"), y = w.build("one-job-y");
  w.runs(x, w.job(x, std::nullopt), testing::Where{}, 12, 400.0, 0.005, false);
  w.runs(y, w.job(y, std::nullopt), testing::Where{}, 12, 388.0, 0.005, false);
  const BuildComparison c = compare(x, y);
  const SeriesComparison& s = c.series.at(0);
  ASSERT_TRUE(s.unpaired.has_value()) << "the runs' interval is still shown";
  EXPECT_FALSE(s.on_units);
  EXPECT_GT(s.unpaired->lower, 1.0) << "on runs alone it would read DIFFERENT";
  EXPECT_EQ(s.answer, Answer::unknown);
  std::string notes;
  for (const auto& n : s.notes) notes += n + "\n";
  EXPECT_TRUE(contains(notes, "no verdict: it needs at least 3 jobs a side (A has 1, B 1)")) << notes;
}

TEST(JudgeUnpaired, SameInsideTheMarginDifferentOnlyWhenSignificantAfterHolm) {
  stats::UnpairedRatio r;
  r.lower = 0.99;
  r.upper = 1.015;
  EXPECT_EQ(judge_unpaired(r, 0.02, false), Answer::same);
  r.lower = 1.01;
  r.upper = 1.09;
  EXPECT_EQ(judge_unpaired(r, 0.02, true), Answer::different);
  EXPECT_EQ(judge_unpaired(r, 0.02, false), Answer::unknown) << "the interval excludes 1, Holm does not reject";
  r.lower = 0.97;
  EXPECT_EQ(judge_unpaired(r, 0.02, true), Answer::unknown);
}

}  // namespace
}  // namespace qgate::jobs
