// The dashboard's HTTP layer on a real socket: HttpServer and DashboardSite in front of DashboardApi, which
// calls a real DashboardService over a seeded SQLite store and a recording Harness service (so each
// route's request fields can be checked) through an in-process gRPC channel. Bad paths, methods,
// sizes and hosts; the token rule of the RPC behind a route; the JSON of every endpoint, in its
// envelope and with 64-bit integers as numbers; /metrics and /healthz as the site serves them.
#include "qgate/dashboards/http_server.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>

#include <nlohmann/json.hpp>

#include "qgate/dashboards/dashboard_site.h"
#include "qgate/dashboards/prometheus_text.h"
#include "qgate/db/sqlite_store.h"
#include "qgate/server/dashboard_service.h"
#include "seeded_ab_job.h"
#include "store_test_support.h"

namespace qgate::dashboards {
namespace {

using nlohmann::json;

constexpr const char* kToken = "Bearer a-token-of-sixteen-chars";

/// Answers the Harness reads with fixed messages and remembers the last request of each. GetDevice
/// needs kToken, standing for an RPC whose token rule asks for one.
class RecordingHarness final : public v1::Harness::CallbackService {
 public:
  grpc::ServerUnaryReactor* GetDevice(grpc::CallbackServerContext* c, const v1::GetDeviceRequest*,
                                      v1::DeviceStatus* out) override {
    auto it = c->client_metadata().find("authorization");
    const bool ok = it != c->client_metadata().end() && std::string(it->second.data(), it->second.size()) == kToken;
    if (ok) {
      out->set_backend("cpu");
      out->set_name("cpu");
      out->set_queued_jobs(2);
    }
    return done(c, ok ? grpc::Status::OK : grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "a token is needed"));
  }
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* c, const v1::ListJobsRequest* in,
                                     v1::ListJobsResponse* out) override {
    remember([&] { list_jobs = *in; });
    for (int i = 1; i <= 3; ++i) {
      v1::Job* job = out->add_jobs();
      job->set_id(i);
      job->set_state(v1::JOB_STATE_DONE);
      job->set_disposition(v1::DISPOSITION_OK);
      job->mutable_verdict()->set_verdict(v1::VERDICT_PASS);
    }
    return done(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* c, const v1::GetJobRequest* in, v1::Job* out) override {
    if (in->job_id() != 7) return done(c, {grpc::StatusCode::NOT_FOUND, "no job " + std::to_string(in->job_id())});
    out->set_id(7);
    out->set_state(v1::JOB_STATE_RUNNING);
    return done(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* QueryTrend(grpc::CallbackServerContext* c, const v1::QueryTrendRequest* in,
                                       v1::QueryTrendResponse* out) override {
    remember([&] {
      trend = *in;
      ++trend_calls;
    });
    // Four points in two pages of two, as QueryTrend pages them: the route follows the token.
    if (!in->page_token().empty() && in->page_token() != "page-2")
      return done(c, {grpc::StatusCode::INVALID_ARGUMENT, "page_token is not a token this daemon wrote"});
    const int first = in->page_token().empty() ? 0 : 2;
    for (int i = first; i < first + 2; ++i) {
      v1::TrendPoint* p = out->add_points();
      p->set_build_name("b" + std::to_string(i));
      p->set_tokens_per_s(100 + i);
      p->set_contended(i == 2);
    }
    if (first == 0) out->set_next_page_token("page-2");
    return done(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* QueryChanges(grpc::CallbackServerContext* c, const v1::QueryChangesRequest* in,
                                         v1::QueryChangesResponse* out) override {
    remember([&] { changes = *in; });
    out->add_series()->set_profile("cpu-tiny");
    return done(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* Compare(grpc::CallbackServerContext* c, const v1::CompareRequest* in,
                                    v1::CompareResponse* out) override {
    remember([&] { compare = *in; });
    if (in->build_b() == "nothing-alike") return done(c, {grpc::StatusCode::FAILED_PRECONDITION, "no series in common"});
    out->mutable_a()->set_id(1LL << 40);
    out->mutable_a()->mutable_metadata()->set_name(in->build_a());
    v1::CompareRow* row = out->add_rows();
    row->set_ratio(0.91);
    row->set_comparison(v1::COMPARISON_DIFFERENT);
    row->set_settings("n_ubatch=1024 flash_attn=1");
    return done(c, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ListBuilds(grpc::CallbackServerContext* c, const v1::ListBuildsRequest*,
                                       v1::ListBuildsResponse* out) override {
    out->add_builds()->set_id(1);
    return done(c, grpc::Status::OK);
  }

  std::mutex mu;
  v1::ListJobsRequest list_jobs;
  v1::QueryTrendRequest trend;  // the last page's request
  int trend_calls = 0;
  v1::QueryChangesRequest changes;
  v1::CompareRequest compare;

 private:
  template <typename Fn>
  void remember(Fn&& fn) {
    std::lock_guard lock(mu);
    fn();
  }
  static grpc::ServerUnaryReactor* done(grpc::CallbackServerContext* c, const grpc::Status& s) {
    auto* r = c->DefaultReactor();
    r->Finish(s);
    return r;
  }
};

struct RawAnswer {
  int status = 0;    // 0: the server closed without answering; -1: no connection
  std::string head;  // status line and headers
  std::string body;
  std::string header(const std::string& name) const {
    const auto at = head.find("\r\n" + name + ": ");
    if (at == std::string::npos) return "";
    const auto start = at + 4 + name.size();
    return head.substr(start, head.find("\r\n", start) - start);
  }
};

/// Sends raw bytes to the server and reads its whole answer (it closes every connection).
RawAnswer raw(int port, const std::string& request) {
  RawAnswer out;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    out.status = -1;
    return out;
  }
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may answer and close before an oversized request is all sent
    sent += static_cast<size_t>(n);
  }
  std::string answer;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) answer.append(buf, static_cast<size_t>(n));
  close(fd);
  if (answer.rfind("HTTP/1.1 ", 0) != 0) return out;
  out.status = std::stoi(answer.substr(9, 3));
  const auto split = answer.find("\r\n\r\n");
  out.head = answer.substr(0, split);
  if (split != std::string::npos) out.body = answer.substr(split + 4);
  return out;
}

RawAnswer raw_get(int port, const std::string& target, const std::string& extra_headers = "Host: 127.0.0.1\r\n") {
  return raw(port, "GET " + target + " HTTP/1.1\r\n" + extra_headers + "\r\n");
}

class DashboardHttpTest : public ::testing::Test {
 protected:
  DashboardHttpTest() {
    db::SqliteOptions so;
    so.path = dir_.file("qgate.db").string();
    store_ = db::open_sqlite_store(so);
    seeded_ = testing::seed_ab_job(*store_);
    dashboard_ = std::make_unique<server::DashboardService>(*store_);
    grpc::ServerBuilder builder;
    builder.RegisterService(&harness_);
    builder.RegisterService(dashboard_.get());
    grpc_ = builder.BuildAndStart();
    api_ = std::make_unique<DashboardApi>(grpc_->InProcessChannel(grpc::ChannelArguments()));
    std::filesystem::create_directories(dir_.file("web"));
    std::ofstream(dir_.file("web/index.html")) << "<!doctype html><title>qgate</title>";
    std::ofstream(dir_.file("web/app.js")) << "console.log('qgate');";
    std::ofstream(dir_.file("secret.txt")) << "outside the web root";
    SiteOptions site;
    site.static_dir = dir_.file("web").string();
    site.metrics = [this] {
      if (metrics_fail_) throw std::runtime_error("the store is gone");
      PrometheusText text;
      text.family("qgate_test_scrapes_total", MetricType::Counter, "Scrapes of this test's site.");
      text.sample({}, double(++scrapes_));
      return text.text();
    };
    site.health = [this] {
      ServiceHealth h;
      h.healthy = healthy_;
      h.checks = {{"store", healthy_ ? "ok" : "the store does not answer"}};
      if (!healthy_) h.reason = "the store does not answer";
      return h;
    };
    site_ = std::make_unique<DashboardSite>(*api_, site);
    HttpServerOptions options;
    options.address = "127.0.0.1:0";
    options.read_timeout_ms = 1500;
    http_ = std::make_unique<HttpServer>(options, [this](const HttpRequest& r) { return site_->handle(r); });
    const std::string url = http_->start();
    port_ = std::stoi(url.substr(url.rfind(':') + 1));
  }
  ~DashboardHttpTest() override {
    http_->stop();
    grpc_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  /// GET `path`; the status, and the body parsed as JSON (null when it is not JSON).
  std::pair<int, json> get(const std::string& path, const std::string& headers = "Host: 127.0.0.1\r\n") {
    const RawAnswer a = raw_get(port_, path, headers);
    return {a.status, json::parse(a.body, nullptr, false)};
  }

  db::testing::TempDir dir_;
  std::unique_ptr<db::Store> store_;
  testing::SeededAbJob seeded_;
  RecordingHarness harness_;
  std::unique_ptr<server::DashboardService> dashboard_;
  std::unique_ptr<grpc::Server> grpc_;
  std::unique_ptr<DashboardApi> api_;
  std::unique_ptr<DashboardSite> site_;
  std::unique_ptr<HttpServer> http_;
  int port_ = 0;
  std::atomic<int> scrapes_{0};
  std::atomic<bool> metrics_fail_{false};
  std::atomic<bool> healthy_{true};
};

/// The envelope of every API answer: the CLI's schema_version and context keys, and `key`.
void expect_envelope(const json& body, const std::string& key) {
  EXPECT_EQ(body["schema_version"], 1) << body.dump();
  ASSERT_TRUE(body.contains("context")) << body.dump();
  for (const char* k : {"host", "backend", "device", "gpu_name", "driver_version", "qgate_version", "cli_version"})
    EXPECT_TRUE(body["context"].contains(k)) << k << " in " << body.dump();
  EXPECT_TRUE(body.contains(key)) << key << " in " << body.dump();
}

TEST_F(DashboardHttpTest, ServesThePageAndItsFiles) {
  const RawAnswer page = raw_get(port_, "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("<title>qgate</title>"), std::string::npos);
  EXPECT_EQ(page.header("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(page.header("Connection"), "close");
  const RawAnswer js = raw_get(port_, "/app.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_NE(js.header("Content-Type").find("javascript"), std::string::npos);
  EXPECT_EQ(js.body, "console.log('qgate');");
}

TEST_F(DashboardHttpTest, BadPathsAre404) {
  for (const char* path : {"/nope.html", "/api/nope", "/api/jobs/abc", "/api/jobs/1/other", "/api", "/../secret.txt",
                           "/%2e%2e/secret.txt", "/web/../secret.txt", "/vendor/"}) {
    auto [status, body] = get(path);
    EXPECT_EQ(status, 404) << path;
    if (std::string(path).rfind("/api", 0) == 0) expect_envelope(body, "error");
  }
}

TEST_F(DashboardHttpTest, MethodsOtherThanGetAndHeadAre405) {
  for (const std::string method : {"POST", "PUT", "DELETE", "PATCH", "OPTIONS"}) {
    const RawAnswer a = raw(port_, method + " /api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n");
    EXPECT_EQ(a.status, 405) << method;
    EXPECT_EQ(a.header("Allow"), "GET, HEAD") << method;
  }
  const RawAnswer head = raw(port_, "HEAD /api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty()) << "HEAD answers without a body";
  EXPECT_NE(head.header("Content-Length"), "0");
}

TEST_F(DashboardHttpTest, OversizedRequestsAreRefused) {
  // A target over 8 KiB, a head over 16 KiB (one long header, then many small ones), a body.
  EXPECT_EQ(raw_get(port_, "/" + std::string(9000, 'a')).status, 414);
  EXPECT_EQ(raw_get(port_, "/", "Host: 127.0.0.1\r\nX-Big: " + std::string(20000, 'b') + "\r\n").status, 431);
  std::string many;
  for (int i = 0; i < 5000; ++i) many += "X-H" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(raw_get(port_, "/", "Host: 127.0.0.1\r\n" + many).status, 431);
  EXPECT_EQ(
      raw(port_, "GET /api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4096\r\n\r\n" + std::string(4096, 'c'))
          .status,
      413);
  EXPECT_EQ(raw(port_, "GET /api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n").status, 413);
  // Just under the bounds is served.
  EXPECT_EQ(raw_get(port_, "/?" + std::string(8000, 'a')).status, 200);
}

TEST_F(DashboardHttpTest, MalformedAndSlowRequestsAreRefused) {
  EXPECT_EQ(raw(port_, "GARBAGE\r\n\r\n").status, 400);
  EXPECT_EQ(raw(port_, "get / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status, 400);
  EXPECT_EQ(raw(port_, "GET / HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n").status, 505);
  EXPECT_EQ(raw(port_, "GET nothing HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status, 400);
  EXPECT_EQ(raw(port_, "GET /%zz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status, 400);
  EXPECT_EQ(raw(port_, "GET / HTTP/1.1\r\nno colon here\r\n\r\n").status, 400);
  // A head that never ends is cut at the read timeout (1.5 s here) with 408.
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(raw(port_, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n").status, 408);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(DashboardHttpTest, ALoopbackListenerRefusesAForeignHost) {
  auto [status, body] = get("/api/jobs", "Host: attacker.example:8080\r\n");
  EXPECT_EQ(status, 403);
  EXPECT_EQ(body["error"]["code"], "HOST_NOT_ALLOWED");
  EXPECT_EQ(get("/", "").first, 403) << "no Host at all";
  EXPECT_EQ(get("/api/jobs", "Host: localhost:1234\r\n").first, 200);
  EXPECT_EQ(get("/api/jobs", "Host: [::1]:1234\r\n").first, 200);
  EXPECT_FALSE(is_loopback_host_header("127.0.0.1.attacker.example"));
  EXPECT_FALSE(is_loopback_host_header("localhost.attacker.example"));
}

TEST_F(DashboardHttpTest, ARouteWhoseRpcNeedsTheTokenAsksForIt) {
  // The Authorization header travels to the RPC, which applies its own rule.
  auto [missing, error] = get("/api/device");
  EXPECT_EQ(missing, 401);
  expect_envelope(error, "error");
  EXPECT_EQ(error["error"]["code"], "UNAUTHENTICATED");
  EXPECT_NE(error["context"]["error"].get<std::string>().find("a token is needed"), std::string::npos)
      << "without the token the context says why the daemon's facts are missing: " << error.dump();
  EXPECT_EQ(get("/api/device", "Host: 127.0.0.1\r\nAuthorization: Bearer wrong-token-of-16-chars\r\n").first, 401);
  auto [ok, device] = get("/api/device", std::string("Host: 127.0.0.1\r\nAuthorization: ") + kToken + "\r\n");
  EXPECT_EQ(ok, 200);
  expect_envelope(device, "device");
  EXPECT_EQ(device["device"]["backend"], "cpu");
  EXPECT_EQ(device["device"]["queued_jobs"], 2);
  EXPECT_EQ(device["context"]["backend"], "cpu") << "the context is the daemon's GetDevice answer";
  EXPECT_FALSE(device["context"].contains("error"));
}

TEST_F(DashboardHttpTest, JobsListMapsItsParameters) {
  auto [status, body] = get("/api/jobs?limit=20&state=JOB_STATE_DONE");
  ASSERT_EQ(status, 200);
  expect_envelope(body, "jobs");
  ASSERT_TRUE(body["jobs"].is_array()) << "the list itself, as the CLI's --json jobs";
  ASSERT_EQ(body["jobs"].size(), 3u);
  EXPECT_TRUE(body["jobs"][0]["id"].is_number_integer()) << "int64 is a JSON number: " << body.dump();
  EXPECT_EQ(body["jobs"][0]["id"], 1);
  EXPECT_EQ(body["jobs"][0]["verdict"]["verdict"], "VERDICT_PASS");
  EXPECT_EQ(body["jobs"][0]["disposition"], "DISPOSITION_OK");
  std::lock_guard lock(harness_.mu);
  EXPECT_EQ(harness_.list_jobs.limit(), 20);
  EXPECT_EQ(harness_.list_jobs.state(), v1::JOB_STATE_DONE);
}

TEST_F(DashboardHttpTest, BadParametersAre400) {
  EXPECT_EQ(get("/api/jobs?limit=abc").first, 400);
  EXPECT_EQ(get("/api/jobs?limit=1&limit=2").first, 400);
  EXPECT_EQ(get("/api/jobs?state=JOB_STATE_NOPE").first, 400);
  EXPECT_EQ(get("/api/jobs?colour=red").first, 400);
  EXPECT_EQ(get("/api/trend?include_contended=maybe").first, 400);
  EXPECT_EQ(get("/api/changes?alpha=x").first, 400);
  EXPECT_EQ(get("/api/jobs/1/ab?x=1").first, 400);
}

TEST_F(DashboardHttpTest, TrendAndChangesMapTheirParameters) {
  auto [status, body] = get("/api/trend?profile=cpu-tiny&weight_type=q4_K&since_unix_ms=5&include_contended=true");
  ASSERT_EQ(status, 200);
  expect_envelope(body, "points");
  ASSERT_EQ(body["points"].size(), 4u) << "both pages, followed by the route";
  for (int i = 0; i < 4; ++i) EXPECT_EQ(body["points"][i]["build_name"], "b" + std::to_string(i));
  EXPECT_EQ(body["points"][2]["contended"], true);
  EXPECT_EQ(body["points"][0]["contended"], false) << "fields at their defaults are shown";
  {
    std::lock_guard lock(harness_.mu);
    EXPECT_EQ(harness_.trend_calls, 2);
    EXPECT_EQ(harness_.trend.page_token(), "page-2") << "the second page asked with the first's token";
    EXPECT_EQ(harness_.trend.profile(), "cpu-tiny") << "and the same filters";
    EXPECT_EQ(harness_.trend.weight_type(), "q4_K");
    EXPECT_EQ(harness_.trend.since_unix_ms(), 5);
    EXPECT_TRUE(harness_.trend.include_contended());
  }
  auto [changes_status, changes] = get("/api/changes?profile=cpu-tiny&slowdowns_only=1&alpha=0.05");
  ASSERT_EQ(changes_status, 200);
  expect_envelope(changes, "changes");
  EXPECT_EQ(changes["changes"]["series"][0]["profile"], "cpu-tiny");
  std::lock_guard lock(harness_.mu);
  EXPECT_TRUE(harness_.changes.slowdowns_only());
  EXPECT_DOUBLE_EQ(harness_.changes.alpha(), 0.05);
}

TEST_F(DashboardHttpTest, RegressionsAndCompareAreTheCliQueries) {
  auto [status, regressions] = get("/api/regressions?profile=cpu-tiny&since_unix_ms=9");
  ASSERT_EQ(status, 200);
  expect_envelope(regressions, "regressions");
  EXPECT_EQ(regressions["regressions"]["series"][0]["profile"], "cpu-tiny");
  {
    std::lock_guard lock(harness_.mu);
    EXPECT_TRUE(harness_.changes.slowdowns_only()) << "regressions are the slowdowns, as `qgate regressions` asks";
    EXPECT_EQ(harness_.changes.since_unix_ms(), 9);
  }
  EXPECT_EQ(get("/api/regressions?slowdowns_only=0").first, 400) << "regressions are always slowdowns";

  auto [compared, compare] = get("/api/compare?build_a=mmq%20new&build_b=2&include_contended=1&tokens=512&same_margin=0.05");
  ASSERT_EQ(compared, 200);
  expect_envelope(compare, "compare");
  EXPECT_EQ(compare["compare"]["a"]["id"], 1LL << 40) << "ids are numbers";
  EXPECT_EQ(compare["compare"]["rows"][0]["comparison"], "COMPARISON_DIFFERENT");
  EXPECT_EQ(compare["compare"]["rows"][0]["settings"], "n_ubatch=1024 flash_attn=1");
  {
    std::lock_guard lock(harness_.mu);
    EXPECT_EQ(harness_.compare.build_a(), "mmq new");
    EXPECT_EQ(harness_.compare.build_b(), "2");
    EXPECT_TRUE(harness_.compare.include_contended());
    EXPECT_EQ(harness_.compare.tokens(), 512);
    EXPECT_DOUBLE_EQ(harness_.compare.same_margin(), 0.05);
  }
  EXPECT_EQ(get("/api/compare?build_a=x").first, 400) << "both builds are needed";
  auto [refused, error] = get("/api/compare?build_a=x&build_b=nothing-alike");
  EXPECT_EQ(refused, 409) << "nothing comparable is FAILED_PRECONDITION";
  expect_envelope(error, "error");
}

TEST_F(DashboardHttpTest, AJobAndARefusedJob) {
  auto [status, job] = get("/api/jobs/7");
  ASSERT_EQ(status, 200);
  expect_envelope(job, "job");
  EXPECT_EQ(job["job"]["state"], "JOB_STATE_RUNNING");
  EXPECT_EQ(job["job"]["id"], 7);
  auto [missing, error] = get("/api/jobs/8");
  EXPECT_EQ(missing, 404);
  expect_envelope(error, "error");
  EXPECT_EQ(error["error"]["code"], "NOT_FOUND");
  const json builds = get("/api/builds").second;
  expect_envelope(builds, "builds");
  ASSERT_EQ(builds["builds"].size(), 1u);
  EXPECT_EQ(builds["builds"][0]["id"], 1);
}

TEST_F(DashboardHttpTest, AbDetailJson) {
  auto [status, answer] = get("/api/jobs/" + std::to_string(seeded_.job_id) + "/ab");
  ASSERT_EQ(status, 200) << answer.dump();
  expect_envelope(answer, "ab");
  const json& ab = answer["ab"];
  ASSERT_EQ(ab["pairs"].size(), static_cast<size_t>(seeded_.pairs));
  ASSERT_EQ(ab["runs"].size(), static_cast<size_t>(2 * seeded_.pairs));
  ASSERT_EQ(ab["looks"].size(), 2u);
  EXPECT_NEAR(ab["pairs"][0]["ratio"].get<double>(), 1.10, 1e-12);
  EXPECT_EQ(ab["looks"][1]["reached"], true);
  EXPECT_EQ(ab["looks"][1]["verdict"], "VERDICT_PASS");
  EXPECT_EQ(ab["runs"][0]["arm"], "A");
  EXPECT_EQ(get("/api/jobs/999/ab").first, 404);
}

TEST_F(DashboardHttpTest, ParityJson) {
  auto [status, answer] = get("/api/jobs/" + std::to_string(seeded_.job_id) + "/parity");
  ASSERT_EQ(status, 200);
  expect_envelope(answer, "parity");
  const json& parity = answer["parity"];
  ASSERT_EQ(parity["cases"].size(), static_cast<size_t>(seeded_.parity_cases));
  for (const auto& c : parity["cases"]) {
    EXPECT_TRUE(c.contains("max_abs_diff"));
    EXPECT_TRUE(c.contains("tolerance"));
    EXPECT_TRUE(c.contains("weight_type"));
    EXPECT_TRUE(c.contains("od"));
  }
}

TEST_F(DashboardHttpTest, CotenantJson) {
  auto [status, answer] = get("/api/jobs/" + std::to_string(seeded_.job_id) + "/cotenant");
  ASSERT_EQ(status, 200);
  expect_envelope(answer, "cotenant");
  const json& t = answer["cotenant"];
  ASSERT_EQ(t["readings"].size(), static_cast<size_t>(seeded_.readings));
  ASSERT_EQ(t["runs"].size(), static_cast<size_t>(2 * seeded_.pairs));
  int throttled = 0;
  for (const auto& r : t["readings"]) {
    EXPECT_TRUE(r.contains("foreign_sm_percent"));
    EXPECT_TRUE(r.contains("sm_clock_mhz"));
    throttled += static_cast<int>(r["throttle_reasons"].size());
  }
  EXPECT_EQ(throttled, 4);
}

TEST(ApiJson, SixtyFourBitIntegersAreNumbersUpTo2To53) {
  v1::Job job;
  job.set_id(int64_t(1) << 53);
  job.set_created_unix_ms(1767225600123);
  job.mutable_build()->set_id(5);
  json out = DashboardApi::to_json(job);
  EXPECT_EQ(out["id"], int64_t(1) << 53);
  EXPECT_EQ(out["created_unix_ms"], 1767225600123);
  EXPECT_EQ(out["build"]["id"], 5) << "nested messages too";
  job.set_id((int64_t(1) << 53) + 1);
  job.set_created_unix_ms(-(int64_t(1) << 53) - 1);
  out = DashboardApi::to_json(job);
  EXPECT_EQ(out["id"], "9007199254740993") << "beyond 2^53 a double would round it: a string, as proto's mapping";
  EXPECT_EQ(out["created_unix_ms"], "-9007199254740993");
}

TEST_F(DashboardHttpTest, MetricsAreTextOnTheSameListenerAndChecks) {
  const RawAnswer first = raw_get(port_, "/metrics");
  ASSERT_EQ(first.status, 200);
  EXPECT_EQ(first.header("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(first.header("Cache-Control"), "no-store");
  EXPECT_EQ(first.body,
            "# HELP qgate_test_scrapes_total Scrapes of this test's site.\n"
            "# TYPE qgate_test_scrapes_total counter\nqgate_test_scrapes_total 1\n");
  EXPECT_NE(raw_get(port_, "/metrics").body.find("qgate_test_scrapes_total 2\n"), std::string::npos)
      << "each scrape is collected anew";
  EXPECT_EQ(raw_get(port_, "/metrics", "Host: attacker.example\r\n").status, 403) << "the Host rule holds here too";
  EXPECT_EQ(raw(port_, "POST /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status, 405);
  metrics_fail_ = true;
  const RawAnswer failed = raw_get(port_, "/metrics");
  EXPECT_EQ(failed.status, 500);
  EXPECT_NE(failed.body.find("the store is gone"), std::string::npos) << failed.body;
}

TEST_F(DashboardHttpTest, HealthzIs200WhenHealthyAnd503WithTheReasonOtherwise) {
  auto [ok, body] = get("/healthz");
  EXPECT_EQ(ok, 200);
  EXPECT_EQ(body["status"], "ok");
  EXPECT_EQ(body["checks"]["store"], "ok");
  EXPECT_FALSE(body.contains("reason"));
  healthy_ = false;
  auto [down, why] = get("/healthz");
  EXPECT_EQ(down, 503);
  EXPECT_EQ(why["status"], "unavailable");
  EXPECT_EQ(why["reason"], "the store does not answer");
  EXPECT_EQ(get("/healthz", "Host: attacker.example\r\n").first, 403);
}

TEST(HostPort, SplitsAndRefuses) {
  EXPECT_EQ(split_host_port("127.0.0.1:8080"), (std::pair<std::string, int>{"127.0.0.1", 8080}));
  EXPECT_EQ(split_host_port("[::1]:0"), (std::pair<std::string, int>{"::1", 0}));
  for (const char* bad : {"8080", "host:", ":80", "host:99999", "::1:80", "[::1]80", "host:8a"})
    EXPECT_THROW(split_host_port(bad), std::invalid_argument) << bad;
}

}  // namespace
}  // namespace qgate::dashboards
