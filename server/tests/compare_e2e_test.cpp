// `qgate compare` end to end: a real qgated over a seeded database, driven through the real CLI. The
// comparable pair prints its matched series with n per side; an incomparable pair exits 3 with the
// daemon's reason.
#include <gtest/gtest.h>

#include "compare_history.h"
#include "daemon_under_test.h"
#include "qgate/db/sqlite_store.h"

namespace qgate::testing {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class CompareE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      db::SqliteOptions options;
      options.path = daemon_.dir() + "/qgate.db";
      auto store = db::open_sqlite_store(options);
      history_ = seed_history(*store);
    }
    daemon_.start();
  }

  DaemonUnderTest daemon_;
  SeededHistory history_;
};

TEST_F(CompareE2eTest, ComparableBuildsPrintTheSeriesAndNPerSide) {
  const CliResult r = daemon_.cli("compare tile64 tile128");
  ASSERT_EQ(r.code, 0) << r.err << daemon_.log();
  EXPECT_TRUE(contains(r.out, "series  cuda on NVIDIA H200")) << r.out;
  EXPECT_TRUE(contains(r.out, "at 512 tokens, profile llama-7b-q4_K_M, path mmq, gemm timing")) << r.out;
  EXPECT_TRUE(contains(r.out, std::to_string(history_.tile64_runs) + " runs from 4 jobs")) << r.out;
  EXPECT_TRUE(contains(r.out, std::to_string(history_.tile128_runs) + " runs from 3 jobs")) << r.out;
  EXPECT_TRUE(contains(r.out, "DIFFERENT")) << r.out;
  EXPECT_TRUE(contains(r.out, "within one job, paired")) << r.out;
  EXPECT_TRUE(contains(r.out, "3 contended run(s) of A")) << r.out;

  const CliResult j = daemon_.cli("--json compare tile64 tile128 --tokens 512");
  ASSERT_EQ(j.code, 0) << j.err;
  const json doc = json_data(j, "compare");
  ASSERT_EQ(doc["rows"].size(), 1u);
  const json& row = doc["rows"][0];
  EXPECT_EQ(row["a"]["runs"].get<int>(), history_.tile64_runs);
  EXPECT_EQ(row["b"]["runs"].get<int>(), history_.tile128_runs);
  EXPECT_EQ(row["a"]["contended_left_out"].get<int>(), 3);
  EXPECT_LT(row["ci_low"].get<double>(), 1.05);
  EXPECT_GT(row["ci_high"].get<double>(), 1.05);
  EXPECT_EQ(row["paired_jobs"][0]["job_id"].get<int64_t>(), history_.gate_job);
}

TEST_F(CompareE2eTest, IncomparableBuildsExitThreeWithWhatDiffered) {
  CliResult r = daemon_.cli("compare cpu-only tile64");
  EXPECT_EQ(r.code, 3) << r.out;
  EXPECT_TRUE(contains(r.err, "qgate: nothing to compare")) << r.err;
  EXPECT_TRUE(contains(r.err, "They differ in tokens.")) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;

  r = daemon_.cli("compare contended-only tile128");
  EXPECT_EQ(r.code, 3);
  EXPECT_TRUE(contains(r.err, "--include-contended")) << r.err;
  EXPECT_EQ(daemon_.cli("compare contended-only tile128 --include-contended").code, 0);

  r = daemon_.cli("compare tile64 no-such-build");
  EXPECT_EQ(r.code, 3);
  EXPECT_TRUE(contains(r.err, "no build named or numbered 'no-such-build'")) << r.err;
}

}  // namespace
}  // namespace qgate::testing
