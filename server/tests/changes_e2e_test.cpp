// `qgate trend --changes` and `qgate regressions` end to end: a real qgated over a seeded build history,
// driven through the real CLI. The 3% slowdown is found at its build with its ratio and p-value; the
// contended runs, the flat series and the step older than --since give no change. A dip of 2 slow builds
// is listed as a transient slowdown, one of 5 as a sustained one.
#include <gtest/gtest.h>

#include "change_history.h"
#include "daemon_under_test.h"
#include "qgate/db/sqlite_store.h"

namespace qgate::testing {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// Some line of `text` holds `first` and, after it, `second`.
bool line_with(const std::string& text, const std::string& first, const std::string& second) {
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    const size_t at = line.find(first);
    if (at != std::string::npos && line.find(second, at + first.size()) != std::string::npos) return true;
    begin = end + 1;
  }
  return false;
}

class ChangesE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      db::SqliteOptions options;
      options.path = daemon_.dir() + "/qgate.db";
      auto store = db::open_sqlite_store(options);
      history_ = seed_change_history(*store);
    }
    daemon_.start();
  }

  DaemonUnderTest daemon_;
  ChangeHistory history_;
};

TEST_F(ChangesE2eTest, TrendShowsEachSeriesChangesUnderTheTable) {
  const CliResult r = daemon_.cli(std::string("trend --profile ") + kChangeProfile + " --changes");
  ASSERT_EQ(r.code, 0) << r.err << daemon_.log();
  EXPECT_TRUE(contains(r.out, "MEDIAN tok/s")) << r.out;  // the trend table is still there
  EXPECT_TRUE(contains(r.out, "path mmq, gemm timing  (24 builds, 120 uncontended runs)")) << r.out;
  EXPECT_TRUE(contains(r.out, "path f16, gemm timing  (16 builds, 80 uncontended runs)")) << r.out;
  EXPECT_TRUE(contains(r.out, "  no changes")) << r.out;
  EXPECT_TRUE(line_with(r.out, history_.last_fast_build, history_.first_slow_build)) << r.out;

  const CliResult j = daemon_.cli(std::string("--json trend --profile ") + kChangeProfile + " --changes");
  ASSERT_EQ(j.code, 0) << j.err;
  // The same shape as without --changes: points at the top, changes beside them.
  const json doc = json::parse(j.out);
  EXPECT_FALSE(json_data(j, "points").empty());
  EXPECT_FALSE(doc.contains("trend")) << j.out;
  const json& series = doc["changes"]["series"];
  ASSERT_EQ(series.size(), 2u) << j.out;
  int with_changes = 0;
  for (const json& s : series) {
    if (s["changes"].empty()) continue;
    ++with_changes;
    // One change only: the contended runs at half speed on builds 3-6 do not count.
    ASSERT_EQ(s["changes"].size(), 1u) << s.dump();
    const json& c = s["changes"][0];
    EXPECT_EQ(c["build_name"], history_.first_slow_build);
    EXPECT_EQ(c["previous_build_name"], history_.last_fast_build);
    EXPECT_NEAR(c["ratio"].get<double>(), 0.97, 0.01);
    EXPECT_LT(c["ci_low"].get<double>(), 0.97);
    EXPECT_GT(c["ci_high"].get<double>(), 0.97);
    EXPECT_LT(c["p_value"].get<double>(), 0.01);
    EXPECT_EQ(c["builds_before"].get<int>(), kBuildsPerLevel);
    EXPECT_EQ(c["builds_after"].get<int>(), kBuildsPerLevel);
  }
  EXPECT_EQ(with_changes, 1);
}

TEST_F(ChangesE2eTest, RegressionsListSlowdownsAcrossSeriesSinceTheWindow) {
  CliResult r = daemon_.cli("regressions --since 30d");
  ASSERT_EQ(r.code, 0) << r.err << daemon_.log();
  EXPECT_TRUE(contains(r.out, history_.first_slow_build)) << r.out;
  EXPECT_FALSE(contains(r.out, "old-")) << r.out;  // its step is 40 days old

  r = daemon_.cli("regressions --since 60d");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, history_.first_slow_build)) << r.out;
  EXPECT_TRUE(line_with(r.out, "old-08", "old-09")) << r.out;

  const CliResult j = daemon_.cli("--json regressions --since 30d");
  ASSERT_EQ(j.code, 0) << j.err;
  const json doc = json_data(j, "regressions");
  ASSERT_EQ(doc["series"].size(), 1u) << j.out;  // only series with a slowdown
  EXPECT_EQ(doc["series"][0]["changes"][0]["build_name"], history_.first_slow_build);
  EXPECT_EQ(doc["permutations"].get<int>(), 499);

  r = daemon_.cli("regressions --since 30d --path f16");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "no slowdowns")) << r.out;
}

// Two series of 150 builds at 400 tok/s, 5 quiet runs a build with almost no noise, each with one dip
// 20% deep: on the MMQ path builds 143-144 (a burst of slow runs the co-tenant sampler missed looks like
// this), on the f16 path builds 71-75, back at the old level from build 76.
class TransientSlowdownE2eTest : public ::testing::Test {
 protected:
  static constexpr const char* kProfile = "llama-8b-q4_K_M";

  void SetUp() override {
    {
      db::SqliteOptions options;
      options.path = daemon_.dir() + "/qgate.db";
      auto store = db::open_sqlite_store(options);
      ChangeHistoryWriter w(*store, 20261202, days_ago_ms(5));
      for (int i = 1; i <= 150; ++i) {
        const bool burst = i == 143 || i == 144, dip = i >= 71 && i <= 75;
        w.measured_build(numbered("burst-", i), kProfile, "mmq", 5, burst ? 320.0 : 400.0, 1e-4, false);
        w.measured_build(numbered("dip-", i), kProfile, "f16", 5, dip ? 320.0 : 400.0, 1e-4, false);
      }
    }
    daemon_.start();
  }

  DaemonUnderTest daemon_;
};

TEST_F(TransientSlowdownE2eTest, ADipOfTwoSlowBuildsIsTransientAndOneOfFiveIsNot) {
  const CliResult j = daemon_.cli(std::string("--json regressions --since 30d --profile ") + kProfile);
  ASSERT_EQ(j.code, 0) << j.err << daemon_.log();
  const json doc = json_data(j, "regressions");
  ASSERT_EQ(doc["series"].size(), 2u) << j.out;
  for (const json& s : doc["series"]) {
    ASSERT_FALSE(s["changes"].empty()) << s.dump();
    const json& drop = s["changes"][0];
    EXPECT_LT(drop["ratio"].get<double>(), 1.0) << s.dump();
    if (s["path"] == "mmq") {
      // The detector's slow level is at least 5 builds; only the 2 of the burst are slow.
      EXPECT_EQ(drop["build_name"], "burst-143") << s.dump();
      EXPECT_EQ(drop.at("slow_builds").get<int>(), 2) << s.dump();
      EXPECT_TRUE(drop.at("transient").get<bool>()) << s.dump();
    } else {
      EXPECT_EQ(drop["build_name"], "dip-71") << s.dump();
      EXPECT_EQ(drop.at("slow_builds").get<int>(), 5) << s.dump();
      EXPECT_FALSE(drop.at("transient").get<bool>()) << s.dump();
      ASSERT_EQ(s["changes"].size(), 2u) << s.dump();
      EXPECT_TRUE(s["changes"][1].value("fixes_previous", false)) << s.dump();
      EXPECT_EQ(s["changes"][1]["build_name"], "dip-76") << s.dump();
    }
  }

  const CliResult r = daemon_.cli(std::string("regressions --since 30d --profile ") + kProfile);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(line_with(r.out, "burst-143", "2 transient")) << r.out;
  EXPECT_TRUE(line_with(r.out, "dip-71", "dip-76 (5 builds slow)")) << r.out;
  EXPECT_FALSE(line_with(r.out, "dip-71", "transient")) << r.out;
  EXPECT_TRUE(contains(r.out, "transient: fewer than 3 (1 of 2 slowdowns)")) << r.out;
}

}  // namespace
}  // namespace qgate::testing
