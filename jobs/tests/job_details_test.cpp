// JobDetails against a real SQLite store holding a seeded A/B job (seeded_ab_job.h): the pairs and
// their ratios, every planned look judged from the pairs, the parity cases and the co-tenant
// readings, and NotFound for a job that does not exist.
#include "qgate/jobs/job_details.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "qgate/db/sqlite_store.h"
#include "seeded_ab_job.h"
#include "store_test_support.h"

namespace qgate::jobs {
namespace {

class JobDetailsTest : public ::testing::Test {
 protected:
  JobDetailsTest() : seeded_(testing::seed_ab_job(*store_)) {}

  static std::unique_ptr<db::Store> open(const db::testing::TempDir& dir) {
    db::SqliteOptions options;
    options.path = dir.file("qgate.db").string();
    return db::open_sqlite_store(options);
  }

  db::testing::TempDir dir_;
  std::unique_ptr<db::Store> store_ = open(dir_);
  testing::SeededAbJob seeded_;
};

TEST_F(JobDetailsTest, PairsAreArmAOverArmBPerPairIndex) {
  const v1::AbDetail ab = JobDetails(*store_).ab(seeded_.job_id);
  ASSERT_EQ(ab.runs_size(), 2 * seeded_.pairs);
  ASSERT_EQ(ab.pairs_size(), seeded_.pairs);
  for (const v1::AbPair& p : ab.pairs()) {
    EXPECT_DOUBLE_EQ(p.tokens_per_s_a(), testing::seeded_tokens_per_s('A', p.index()));
    EXPECT_DOUBLE_EQ(p.tokens_per_s_b(), testing::seeded_tokens_per_s('B', p.index()));
    EXPECT_NEAR(p.ratio(), 1.10, 1e-12);
    EXPECT_EQ(p.contended(), p.index() == seeded_.contended_pair) << p.index();
  }
  // Runs come in the order they ran: ABBA.
  EXPECT_EQ(ab.runs(0).arm(), "A");
  EXPECT_EQ(ab.runs(2).arm(), "B");
  EXPECT_EQ(ab.max_pairs(), 10);
}

TEST_F(JobDetailsTest, EveryPlannedLookIsListedAndTheReachedOnesAreJudged) {
  const v1::AbDetail ab = JobDetails(*store_).ab(seeded_.job_id);
  // A 4..10 budget plans looks at 5 and 10 pairs; the job has 10, so both are reached.
  ASSERT_EQ(ab.looks_size(), 2);
  EXPECT_EQ(ab.looks(0).pairs(), 5);
  EXPECT_EQ(ab.looks(1).pairs(), 10);
  for (const v1::AbLook& look : ab.looks()) {
    EXPECT_TRUE(look.reached());
    EXPECT_NEAR(look.ratio(), 1.10, 1e-9) << "every pair's ratio is 1.10";
    if (look.bounded()) {
      EXPECT_LE(look.ci_low(), look.ratio());
      EXPECT_GE(look.ci_high(), look.ratio());
    }
  }
  EXPECT_EQ(ab.looks(1).verdict(), v1::VERDICT_PASS) << "A 10% faster with no spread passes";
}

TEST_F(JobDetailsTest, ALookBeyondThePairsIsNotReached) {
  // A second job of the same build whose pairs stop at 6: the 10-pair look is planned, not reached.
  db::Job job;
  job.kind = "ab";
  job.build_id = seeded_.build_id;
  job.backend = "cpu";
  job.spec_json = R"({"policy":{"min_pairs":4,"max_pairs":10}})";
  const db::RowId id = store_->create_job(job);
  std::vector<db::RunBundle> bundles;
  for (int i = 0; i < 6; ++i)
    for (const char* arm : {"A", "B"}) {
      db::RunBundle b;
      b.run.job_id = id;
      b.run.build_id = seeded_.build_id;
      b.run.arm = arm;
      b.run.pair_index = i;
      b.run.path = "mmq";
      b.run.state = db::RunState::Done;
      b.run.started_ms = 1'790'000'000'000 + 10 * static_cast<std::int64_t>(bundles.size());
      b.run.tokens_per_s = std::string(arm) == "A" ? 900.0 + i : 1000.0 + i;
      bundles.push_back(b);
    }
  store_->record_runs(bundles);
  const v1::AbDetail ab = JobDetails(*store_).ab(id);
  ASSERT_EQ(ab.pairs_size(), 6);
  ASSERT_EQ(ab.looks_size(), 2);
  EXPECT_TRUE(ab.looks(0).reached());
  EXPECT_FALSE(ab.looks(1).reached());
  EXPECT_LT(ab.looks(0).ratio(), 0.95);
}

TEST_F(JobDetailsTest, ASplitJobsLooksJudgeBlocksOfTwoPairs) {
  // Arms on swapped GPUs, the first 1.2x faster: pair ratios alternate 1.1 * 1.2 and 1.1 / 1.2. Each
  // block of two is exactly 1.1, so the looks (in blocks, as the split A/B phase judges them) pass;
  // judged pair by pair the GPU's swing would leave them undecided.
  db::Job job;
  job.kind = "ab";
  job.build_id = seeded_.build_id;
  job.backend = "cpu";
  job.spec_json = R"({"split_gpus":true,"policy":{"min_pairs":4,"max_pairs":8}})";
  const db::RowId id = store_->create_job(job);
  std::vector<db::RunBundle> bundles;
  for (int i = 0; i < 8; ++i)
    for (const char* arm : {"A", "B"}) {
      db::RunBundle b;
      b.run.job_id = id;
      b.run.build_id = seeded_.build_id;
      b.run.arm = arm;
      b.run.pair_index = i;
      b.run.path = "mmq";
      b.run.state = db::RunState::Done;
      b.run.started_ms = 1'795'000'000'000 + 10 * static_cast<std::int64_t>(bundles.size());
      const double gpu = i % 2 == 0 ? 1.2 : 1 / 1.2;
      b.run.tokens_per_s = std::string(arm) == "A" ? 1100.0 * gpu : 1000.0;
      bundles.push_back(b);
    }
  store_->record_runs(bundles);
  const v1::AbDetail ab = JobDetails(*store_).ab(id);
  EXPECT_TRUE(ab.split_gpus());
  ASSERT_EQ(ab.pairs_size(), 8);
  ASSERT_EQ(ab.looks_size(), 2);
  EXPECT_EQ(ab.looks(0).pairs(), 4);
  EXPECT_EQ(ab.looks(1).pairs(), 8);
  for (const v1::AbLook& look : ab.looks()) {
    EXPECT_TRUE(look.reached());
    EXPECT_NEAR(look.ratio(), 1.10, 1e-9);
  }
  EXPECT_EQ(ab.looks(1).verdict(), v1::VERDICT_PASS);
}

TEST_F(JobDetailsTest, ParityCasesCarryDiffAndTolerance) {
  const v1::ParityResults parity = JobDetails(*store_).parity(seeded_.job_id);
  ASSERT_EQ(parity.cases_size(), seeded_.parity_cases);
  std::set<std::string> types;
  for (const v1::ParityResult& c : parity.cases()) {
    types.insert(c.weight_type());
    ASSERT_TRUE(c.has_max_abs_diff());
    ASSERT_TRUE(c.has_tolerance());
    EXPECT_LT(c.max_abs_diff(), c.tolerance());
    EXPECT_EQ(c.outcome(), "passed");
  }
  EXPECT_EQ(types, (std::set<std::string>{"q4_0", "q4_K", "q6_K"}));
}

TEST_F(JobDetailsTest, CotenantReadingsAreOrderedAndNameTheirThrottleReasons) {
  const v1::CotenantTimeline t = JobDetails(*store_).cotenant(seeded_.job_id);
  ASSERT_EQ(t.readings_size(), seeded_.readings);
  ASSERT_EQ(t.runs_size(), 2 * seeded_.pairs);
  for (int i = 1; i < t.readings_size(); ++i) EXPECT_LE(t.readings(i - 1).t_unix_ms(), t.readings(i).t_unix_ms());
  int busy = 0;
  for (const v1::CotenantReading& r : t.readings()) {
    ASSERT_TRUE(r.has_foreign_sm_percent());
    if (r.pair_index() == seeded_.contended_pair) {
      ++busy;
      EXPECT_DOUBLE_EQ(r.foreign_sm_percent(), 96.0);
      ASSERT_EQ(r.throttle_reasons_size(), 1);
      EXPECT_EQ(r.throttle_reasons(0), "sw_thermal_slowdown");
    } else {
      EXPECT_EQ(r.throttle_reasons_size(), 0);
    }
  }
  EXPECT_EQ(busy, 4) << "two runs of the contended pair, two readings each";
}

TEST_F(JobDetailsTest, AnUnknownJobIsNotFound) {
  for (auto read : {+[](JobDetails& d) { d.ab(999); }, +[](JobDetails& d) { d.parity(999); },
                    +[](JobDetails& d) { d.cotenant(999); }}) {
    JobDetails details(*store_);
    try {
      read(details);
      ADD_FAILURE() << "no error for job 999";
    } catch (const ApplicationError& e) {
      EXPECT_EQ(e.kind(), ApplicationErrorKind::NotFound);
    }
  }
}

}  // namespace
}  // namespace qgate::jobs
