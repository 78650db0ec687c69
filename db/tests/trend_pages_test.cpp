// Trend reads in pages (docs/trends.md, "Pages"): a read after a keyset cursor, limit rows at a
// time, gives exactly the rows of one unpaged read, in the same order, on both engines, for the
// trend points (query_trend_summaries) and the raw runs (query_trend), with rows that share a time.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "engine_fixtures.h"

namespace qgate::db {
namespace {

using testing::make_build;
using testing::make_done_run;

constexpr std::int64_t kDayMs = 24LL * 3600 * 1000;

class TrendPagesTest : public testing::TwoBuildsFixture {
 protected:
  void SetUp() override {
    TwoBuildsFixture::SetUp();
    if (IsSkipped()) return;
    const RowId f16 = store_->insert_build(make_build("f16-x", "sha-f", 30)).id;
    const RowId builds[] = {mmq_a_, mmq_b_, f16};
    const char* profiles[] = {"llama-7b", "llama-13b"};
    const char* types[] = {"q4_K", "q8_0", "q6_K"};
    std::vector<RunBundle> bundles;
    // 180 runs over about 9 weeks, three at each start time (different series or builds), so that
    // runs and points share times and only the id orders them.
    for (int i = 0; i < 180; ++i) {
      RunBundle bundle;
      const std::int64_t started = 1'735'689'600'000 + (i / 3) * (kDayMs + 7);
      std::optional<bool> contended = i % 5 == 0 ? std::optional<bool>(true) : std::optional<bool>(false);
      if (i % 7 == 0) contended.reset();
      bundle.run = make_done_run(builds[i % 3], profiles[(i / 3) % 2], types[(i / 2) % 3], started,
                                 100.0 + (i * 37) % 101, contended);
      bundle.run.path = i % 4 == 0 ? "f16" : "mmq";
      bundles.push_back(bundle);
    }
    store_->record_runs(bundles);
  }

  /// Every query shape the daemon sends: each filter alone and together, each co-tenant filter.
  std::vector<TrendQuery> queries() const {
    std::vector<TrendQuery> out;
    for (int shape = 0; shape < 16; ++shape) {
      TrendQuery q;
      if (shape & 1) q.profile = "llama-7b";
      if (shape & 2) q.weight_type = "q4_K";
      if (shape & 4) q.path = "mmq";
      if (shape & 8) q.since_ms = 1'735'689'600'000 + 20 * kDayMs;
      for (int filter = 0; filter < 3; ++filter) {
        q.include_unknown = filter >= 1;
        q.include_contended = filter == 2;
        out.push_back(q);
      }
    }
    TrendQuery glob;
    glob.build_name_glob = "mmq-*";
    glob.include_contended = true;
    out.push_back(glob);
    return out;
  }

  /// The rows of `query` read `page` at a time, each read after the previous page's last row.
  template <typename Row>
  std::vector<Row> paged(TrendQuery query, int page, const std::function<std::vector<Row>(const TrendQuery&)>& read,
                         const std::function<TrendQuery::Position(const Row&)>& position) {
    std::vector<Row> all;
    query.limit = page;
    for (int reads = 0; reads < 1000; ++reads) {
      const std::vector<Row> rows = read(query);
      EXPECT_LE(rows.size(), std::size_t(page));
      all.insert(all.end(), rows.begin(), rows.end());
      if (rows.size() < std::size_t(page)) return all;
      query.after = position(rows.back());
    }
    ADD_FAILURE() << "the pages never ended";
    return all;
  }
};
INSTANTIATE_FOR_BOTH_ENGINES(TrendPagesTest);

TEST_P(TrendPagesTest, PagesOfPointsAreTheUnpagedReadInOrder) {
  auto read = [&](const TrendQuery& q) { return store_->query_trend_summaries(q); };
  auto position = [](const TrendSummary& row) { return TrendQuery::Position{row.first_ms, row.id}; };
  bool shared_time = false;
  for (const TrendQuery& query : queries()) {
    const std::vector<TrendSummary> whole = read(query);
    for (std::size_t i = 1; i < whole.size(); ++i) shared_time |= whole[i].first_ms == whole[i - 1].first_ms;
    for (int page : {1, 2, 7, 50}) {
      const std::vector<TrendSummary> pages = paged<TrendSummary>(query, page, read, position);
      ASSERT_EQ(pages.size(), whole.size()) << "page " << page;
      for (std::size_t i = 0; i < whole.size(); ++i) {
        EXPECT_EQ(pages[i].id, whole[i].id) << "page " << page << ", point " << i;
        EXPECT_EQ(pages[i].median_tokens_per_s, whole[i].median_tokens_per_s);
        EXPECT_EQ(pages[i].runs, whole[i].runs);
      }
    }
  }
  EXPECT_TRUE(shared_time) << "no two points share a first run's time: the test would not see the id order";
  TrendQuery all;
  all.include_contended = true;
  EXPECT_GT(read(all).size(), 60u);
}

TEST_P(TrendPagesTest, PagesOfRunsAreTheUnpagedReadInOrder) {
  auto read = [&](const TrendQuery& q) { return store_->query_trend(q); };
  auto position = [](const TrendRow& row) { return TrendQuery::Position{row.started_ms, row.run_id}; };
  for (const TrendQuery& query : queries()) {
    const std::vector<TrendRow> whole = read(query);
    for (int page : {1, 2, 7, 50}) {
      const std::vector<TrendRow> pages = paged<TrendRow>(query, page, read, position);
      ASSERT_EQ(pages.size(), whole.size()) << "page " << page;
      for (std::size_t i = 0; i < whole.size(); ++i) EXPECT_EQ(pages[i].run_id, whole[i].run_id) << "page " << page;
    }
  }
  TrendQuery all;
  all.include_contended = true;
  EXPECT_EQ(read(all).size(), 180u);
}

TEST_P(TrendPagesTest, APageAfterTheLastRowIsEmpty) {
  TrendQuery query;
  query.include_contended = true;
  const auto points = store_->query_trend_summaries(query);
  ASSERT_FALSE(points.empty());
  query.after = TrendQuery::Position{points.back().first_ms, points.back().id};
  EXPECT_TRUE(store_->query_trend_summaries(query).empty());
  query.after.reset();
  const auto runs = store_->query_trend(query);
  ASSERT_FALSE(runs.empty());
  query.after = TrendQuery::Position{runs.back().started_ms, runs.back().run_id};
  EXPECT_TRUE(store_->query_trend(query).empty());
}

}  // namespace
}  // namespace qgate::db
