// DashboardSnapshot over a real DashboardService on a seeded store and a small Harness: the page's
// files are copied, snapshot.js holds an answer for every request the page makes (its own and each
// listed job's), and a failed request fails the snapshot with its name.
#include "qgate/dashboards/snapshot.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "qgate/db/sqlite_store.h"
#include "qgate/server/dashboard_service.h"
#include "seeded_ab_job.h"
#include "store_test_support.h"

namespace qgate::dashboards {
namespace {

/// The Harness reads a snapshot makes: one GPU, one job (the seeded one), a trend point, no changes.
class SmallHarness final : public v1::Harness::CallbackService {
 public:
  explicit SmallHarness(std::int64_t job_id, bool fail_trend) : job_id_(job_id), fail_trend_(fail_trend) {}
  grpc::ServerUnaryReactor* GetDevice(grpc::CallbackServerContext* c, const v1::GetDeviceRequest*,
                                      v1::DeviceStatus* out) override {
    out->set_backend("cpu");
    return done(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* c, const v1::ListDevicesRequest*,
                                        v1::ListDevicesResponse* out) override {
    out->add_devices()->set_host("gpu-host-1");
    return done(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* c, const v1::ListJobsRequest* in,
                                     v1::ListJobsResponse* out) override {
    limit = in->limit();
    out->add_jobs()->set_id(job_id_);
    return done(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* QueryTrend(grpc::CallbackServerContext* c, const v1::QueryTrendRequest*,
                                       v1::QueryTrendResponse* out) override {
    if (fail_trend_) return done(c, {grpc::StatusCode::UNAVAILABLE, "the store is busy"});
    out->add_points()->set_tokens_per_s(12.5);
    return done(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* QueryChanges(grpc::CallbackServerContext* c, const v1::QueryChangesRequest*,
                                         v1::QueryChangesResponse*) override {
    return done(c, grpc::Status::OK);
  }
  int limit = 0;

 private:
  static grpc::ServerUnaryReactor* done(grpc::CallbackServerContext* c, const grpc::Status& s) {
    auto* r = c->DefaultReactor();
    r->Finish(s);
    return r;
  }
  std::int64_t job_id_;
  bool fail_trend_;
};

class SnapshotTest : public ::testing::Test {
 protected:
  void serve(bool fail_trend) {
    db::SqliteOptions so;
    so.path = dir_.file("qgate.db").string();
    store_ = db::open_sqlite_store(so);
    seeded_ = testing::seed_ab_job(*store_);
    harness_ = std::make_unique<SmallHarness>(seeded_.job_id, fail_trend);
    dashboard_ = std::make_unique<server::DashboardService>(*store_);
    grpc::ServerBuilder builder;
    builder.RegisterService(harness_.get());
    builder.RegisterService(dashboard_.get());
    server_ = builder.BuildAndStart();
    api_ = std::make_unique<DashboardApi>(server_->InProcessChannel(grpc::ChannelArguments()));
    std::filesystem::create_directories(dir_.file("assets/vendor"));
    std::ofstream(dir_.file("assets/index.html")) << "<!doctype html>";
    std::ofstream(dir_.file("assets/vendor/vega.min.js")) << "/* vega */";
  }
  ~SnapshotTest() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  db::testing::TempDir dir_;
  std::unique_ptr<db::Store> store_;
  testing::SeededAbJob seeded_;
  std::unique_ptr<SmallHarness> harness_;
  std::unique_ptr<server::DashboardService> dashboard_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<DashboardApi> api_;
};

TEST_F(SnapshotTest, WritesThePageAndAnAnswerForEveryRequest) {
  serve(false);
  SnapshotOptions options;
  options.assets_dir = dir_.file("assets").string();
  options.out_dir = dir_.file("out").string();
  options.jobs = 7;
  const SnapshotResult result = DashboardSnapshot(*api_).write(options);
  EXPECT_EQ(result.jobs, 1);
  EXPECT_EQ(harness_->limit, 7);
  EXPECT_TRUE(std::filesystem::exists(dir_.file("out/index.html")));
  EXPECT_TRUE(std::filesystem::exists(dir_.file("out/vendor/vega.min.js")));

  std::ifstream in(dir_.file("out/snapshot.js"));
  std::stringstream text;
  text << in.rdbuf();
  const std::string js = text.str();
  const std::string prefix = "window.QGATE_SNAPSHOT = ";
  const auto at = js.find(prefix);
  ASSERT_NE(at, std::string::npos) << js.substr(0, 200);
  const std::string body = js.substr(at + prefix.size(), js.rfind(';') - at - prefix.size());
  const auto answers = nlohmann::json::parse(body);
  std::vector<std::string> expected = page_requests(7);
  for (const std::string& r : job_requests(seeded_.job_id)) expected.push_back(r);
  EXPECT_EQ(result.requests, expected);
  for (const std::string& request : expected) {
    ASSERT_TRUE(answers.contains(request)) << request;
    EXPECT_EQ(answers[request]["schema_version"], 1) << request << ": each answer as the API writes it, enveloped";
  }
  EXPECT_EQ(answers["/api/jobs/" + std::to_string(seeded_.job_id) + "/ab"]["ab"]["pairs"].size(),
            static_cast<size_t>(seeded_.pairs));
  EXPECT_EQ(answers["/api/trend?include_contended=true"]["points"].size(), 1u);
  // The fleet's GPUs, for the devices page and the host filter's hosts.
  ASSERT_EQ(answers["/api/devices"]["devices"].size(), 1u);
  EXPECT_EQ(answers["/api/devices"]["devices"][0]["host"], "gpu-host-1");
}

TEST_F(SnapshotTest, AFailedRequestFailsTheSnapshotByName) {
  serve(true);
  SnapshotOptions options;
  options.assets_dir = dir_.file("assets").string();
  options.out_dir = dir_.file("out").string();
  try {
    DashboardSnapshot(*api_).write(options);
    ADD_FAILURE() << "the snapshot was written without its trend";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("/api/trend"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("busy"), std::string::npos) << e.what();
  }
}

TEST(SnapshotRequests, ACompareRequestIsEncodedAsThePageEncodesIt) {
  // The page writes encodeURIComponent(name): letters, digits and -_.!~*'() stay, the rest is %XX.
  EXPECT_EQ(compare_request("llama.cpp@c01/CUDA/NVIDIA H200", "mmq-tile_1.x!~*'()"),
            "/api/compare?build_a=llama.cpp%40c01%2FCUDA%2FNVIDIA%20H200&build_b=mmq-tile_1.x!~*'()");
}

TEST_F(SnapshotTest, MissingAssetsAreRefused) {
  serve(false);
  SnapshotOptions options;
  options.assets_dir = dir_.file("nowhere").string();
  options.out_dir = dir_.file("out").string();
  EXPECT_THROW(DashboardSnapshot(*api_).write(options), std::runtime_error);
}

}  // namespace
}  // namespace qgate::dashboards
