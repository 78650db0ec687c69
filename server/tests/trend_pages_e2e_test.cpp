// QueryTrend in pages end to end (docs/trends.md, "Pages"): a real qgated over a store seeded with
// 5,160 points (and as many runs; 1,720 of each profile), read through a gRPC stub and the real CLI. Pages joined are one
// read of the maximum page, in order; limit counts every page; a damaged, altered or foreign token
// and a negative page size are refused with INVALID_ARGUMENT; a page size over the maximum is taken
// as the maximum; `qgate trend` and `qgate export` follow the pages to the whole answer.
#include <gtest/gtest.h>

#include <chrono>

#include "daemon_under_test.h"
#include "qgate/db/sqlite_store.h"

namespace qgate::testing {
namespace {

constexpr int kBuilds = 860, kProfiles = 3;
constexpr int kPoints = kBuilds * kProfiles * 2;  // two paths: 5,160, over the 5,000 of a page

class TrendPagesE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch()).count();
    {
      db::SqliteOptions options;
      options.path = daemon_.dir() + "/qgate.db";
      auto store = db::open_sqlite_store(options);
      std::vector<db::RunBundle> bundles;
      for (int b = 0; b < kBuilds; ++b) {
        db::Build build;
        build.name = "mmq-" + std::to_string(b);
        build.sha256 = std::string(60, 'a') + std::to_string(1000 + b);
        const db::RowId id = store->insert_build(build).id;
        for (int p = 0; p < kProfiles; ++p) {
          for (const char* path : {"mmq", "f16"}) {
            db::RunBundle bundle;
            db::Run& r = bundle.run;
            r.build_id = id;
            r.path = path;
            r.profile = "p" + std::to_string(p);
            r.weight_type = "q4_K";
            // One run a second, from an hour ago: several points share a start (the id orders them).
            r.started_ms = now - 3600'000 + (b * kProfiles + p) * 1000;
            r.finished_ms = r.started_ms + 500;
            r.state = db::RunState::Done;
            r.backend = "cpu";
            r.tokens = 512;
            r.tokens_per_s = 100 + b + p * 0.5;
            r.contended = false;
            bundles.push_back(bundle);
          }
        }
      }
      store->record_runs(bundles);
    }
    daemon_.start();
    stub_ = daemon_.stub();
  }

  grpc::Status page(const v1::QueryTrendRequest& request, v1::QueryTrendResponse& response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return stub_->QueryTrend(&context, request, &response);
  }

  /// Every page of `request`, joined; the sizes of the pages in `sizes`.
  std::vector<v1::TrendPoint> all_pages(v1::QueryTrendRequest request, std::vector<int>* sizes = nullptr) {
    std::vector<v1::TrendPoint> points;
    for (int calls = 0; calls < 10000; ++calls) {
      v1::QueryTrendResponse response;
      const grpc::Status status = page(request, response);
      EXPECT_TRUE(status.ok()) << status.error_message();
      if (!status.ok()) break;
      if (sizes) sizes->push_back(response.points_size());
      points.insert(points.end(), response.points().begin(), response.points().end());
      if (response.next_page_token().empty()) break;
      request.set_page_token(response.next_page_token());
    }
    return points;
  }

  static v1::QueryTrendRequest everything() {
    v1::QueryTrendRequest request;
    request.set_since_unix_ms(1);
    return request;
  }

  static std::string key(const v1::TrendPoint& p) {
    return p.build_name() + " " + p.profile() + " " + p.path() + " " + std::to_string(p.started_unix_ms()) + " " +
           std::to_string(p.run_id());
  }

  DaemonUnderTest daemon_;
  std::unique_ptr<v1::Harness::Stub> stub_;
};

TEST_F(TrendPagesE2eTest, PagesJoinedAreOneReadInOrder) {
  for (const bool raw : {false, true}) {
    v1::QueryTrendRequest request = everything();
    request.set_raw_runs(raw);
    // The maximum page holds 5,000: the whole answer needs two.
    std::vector<int> max_sizes;
    request.set_page_size(5000);
    const auto reference = all_pages(request, &max_sizes);
    ASSERT_EQ(reference.size(), std::size_t(kPoints)) << (raw ? "runs" : "points");
    EXPECT_EQ(max_sizes, (std::vector<int>{5000, kPoints - 5000}));
    for (const int size : {1000, 333, 0}) {
      request.set_page_size(size);
      std::vector<int> sizes;
      const auto paged = all_pages(request, &sizes);
      ASSERT_EQ(paged.size(), reference.size()) << "page_size " << size;
      for (std::size_t i = 0; i < paged.size(); ++i)
        ASSERT_EQ(key(paged[i]), key(reference[i])) << "page_size " << size << ", point " << i;
      const int expected = size == 0 ? 1000 : size;  // 0: the default
      EXPECT_EQ(sizes.front(), expected);
      EXPECT_EQ(int(sizes.size()), (kPoints + expected - 1) / expected) << "no empty page at the end";
    }
  }
}

TEST_F(TrendPagesE2eTest, APageSizeOverTheMaximumIsTheMaximumAndANegativeOneIsRefused) {
  v1::QueryTrendRequest request = everything();
  request.set_page_size(1'000'000);
  v1::QueryTrendResponse response;
  ASSERT_TRUE(page(request, response).ok());
  EXPECT_EQ(response.points_size(), 5000);
  EXPECT_FALSE(response.next_page_token().empty());
  request.set_page_size(-1);
  const grpc::Status refused = page(request, response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(refused.error_message().find("page_size"), std::string::npos) << refused.error_message();
}

TEST_F(TrendPagesE2eTest, LimitCountsEveryPage) {
  v1::QueryTrendRequest request = everything();
  request.set_limit(2500);
  std::vector<int> sizes;
  const auto points = all_pages(request, &sizes);
  EXPECT_EQ(sizes, (std::vector<int>{1000, 1000, 500}));
  request.set_limit(0);
  request.set_page_size(5000);
  const auto first = all_pages(request);
  ASSERT_GE(first.size(), points.size());
  for (std::size_t i = 0; i < points.size(); ++i) ASSERT_EQ(key(points[i]), key(first[i])) << i;
  request.set_limit(2000);  // a limit that ends on a page's end: no token for an empty page
  request.set_page_size(1000);
  sizes.clear();
  all_pages(request, &sizes);
  EXPECT_EQ(sizes, (std::vector<int>{1000, 1000}));
}

TEST_F(TrendPagesE2eTest, ADamagedAlteredOrForeignTokenIsRefused) {
  v1::QueryTrendRequest request = everything();
  v1::QueryTrendResponse response;
  ASSERT_TRUE(page(request, response).ok());
  const std::string token = response.next_page_token();
  ASSERT_FALSE(token.empty());
  auto refusal = [&](const v1::QueryTrendRequest& r) {
    v1::QueryTrendResponse out;
    const grpc::Status status = page(r, out);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_EQ(out.points_size(), 0);
    return status.error_message();
  };
  // Every single character changed, one at a time, is refused: the check covers the whole token.
  for (std::size_t i = 0; i < token.size(); ++i) {
    std::string altered = token;
    altered[i] = altered[i] == 'A' ? 'B' : 'A';
    request.set_page_token(altered);
    EXPECT_NE(refusal(request).find("damaged or altered"), std::string::npos) << "character " << i;
  }
  for (const std::string bad : {std::string("x"), std::string("not a token!"), token + "AA", token.substr(1),
                                std::string(4000, 'A')}) {
    request.set_page_token(bad);
    EXPECT_NE(refusal(request).find("page_token"), std::string::npos);
  }
  // The token of one query is refused by another (another profile, or raw runs).
  request.set_page_token(token);
  request.set_profile("p1");
  EXPECT_NE(refusal(request).find("another query"), std::string::npos);
  request.set_profile("");
  request.set_raw_runs(true);
  EXPECT_NE(refusal(request).find("another query"), std::string::npos);
  // The same query with another page size takes it.
  request.set_raw_runs(false);
  request.set_page_size(10);
  ASSERT_TRUE(page(request, response).ok());
  EXPECT_EQ(response.points_size(), 10);
}

TEST_F(TrendPagesE2eTest, TheCliFollowsThePages) {
  v1::QueryTrendRequest request = everything();
  request.set_page_size(5000);
  request.set_profile("p1");  // the CLI asks for one profile: 1,720 points, two pages
  const auto reference = all_pages(request);
  ASSERT_EQ(reference.size(), std::size_t(kPoints / kProfiles));
  const CliResult r = daemon_.cli("--json trend --profile p1 --since 1d");
  ASSERT_EQ(r.code, 0) << r.err;
  const json points = json_data(r, "points");
  ASSERT_EQ(points.size(), reference.size());
  for (std::size_t i = 0; i < points.size(); ++i) {
    ASSERT_EQ(points[i]["build_name"], reference[i].build_name()) << i;
    ASSERT_EQ(points[i]["profile"], reference[i].profile()) << i;
    ASSERT_EQ(points[i]["path"], reference[i].path()) << i;
  }
  // The table has a row for every point.
  const CliResult table = daemon_.cli("trend --profile p1 --since 1d");
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_GE(std::count(table.out.begin(), table.out.end(), '\n'), kPoints / kProfiles);
  // export reads runs, from the start of history.
  const CliResult exported = daemon_.cli("export --format csv");
  ASSERT_EQ(exported.code, 0) << exported.err;
  EXPECT_EQ(std::count(exported.out.begin(), exported.out.end(), '\n'), kPoints + 1) << "a header and every run";
}

}  // namespace
}  // namespace qgate::testing
