// Tests the CLI against a fake qgated on a unix socket in a temp dir: the upload stream (header
// first, 1 MiB chunks, size_bytes), watch's exit codes per verdict, the read commands' output, and
// what a fleet's flags put in the requests (--host, --gpu-model, --gpu-uuid, --label).
// The fake answers from canned messages; the real daemon's behaviour is not modelled here.
#include "qgate/client/harness_client.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace qgate::client {
namespace {

namespace fs = std::filesystem;

class FakeHarness final : public v1::Harness::Service {
 public:
  grpc::Status SubmitBuild(grpc::ServerContext*, grpc::ServerReader<v1::SubmitBuildRequest>* reader,
                           v1::SubmitBuildResponse* response) override {
    std::lock_guard lock(mu_);
    v1::SubmitBuildRequest request;
    chunks_.clear();
    bytes_.clear();
    bool first = true;
    while (reader->Read(&request)) {
      if (first) {
        if (!request.has_header()) return {grpc::INVALID_ARGUMENT, "header must come first"};
        header_ = request.header();
        first = false;
        continue;
      }
      if (!request.has_chunk()) return {grpc::INVALID_ARGUMENT, "second header"};
      chunks_.push_back(request.chunk().size());
      bytes_ += request.chunk();
    }
    if (static_cast<std::int64_t>(bytes_.size()) != header_.size_bytes())
      return {grpc::INVALID_ARGUMENT, "size mismatch"};
    response->set_job_id(7);
    response->mutable_build()->set_id(2);
    *response->mutable_build()->mutable_metadata() = header_.build();
    response->mutable_build()->set_sha256("0123456789abcdef0123");
    return grpc::Status::OK;
  }

  grpc::Status WatchJob(grpc::ServerContext*, const v1::WatchJobRequest* request,
                        grpc::ServerWriter<v1::JobEvent>* writer) override {
    if (request->job_id() != 7) return {grpc::NOT_FOUND, "no job 99"};
    v1::JobEvent event;
    event.set_job_id(7);
    event.set_state(v1::JOB_STATE_RUNNING);
    event.mutable_progress()->set_phase("parity");
    event.mutable_progress()->set_parity_done(64);
    event.mutable_progress()->set_parity_total(64);
    writer->Write(event);
    event.set_state(v1::JOB_STATE_DONE);
    *event.mutable_verdict() = job().verdict();
    writer->Write(event);
    return grpc::Status::OK;
  }

  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* request,
                      v1::Job* job_out) override {
    if (request->job_id() != 7) return {grpc::NOT_FOUND, "no job 99"};
    *job_out = job();
    return grpc::Status::OK;
  }

  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest* request,
                        v1::ListJobsResponse* response) override {
    std::lock_guard lock(mu_);
    list_jobs_ = *request;
    v1::Job j = job_locked();
    j.set_host(job_host);
    *response->add_jobs() = j;
    return grpc::Status::OK;
  }

  grpc::Status QueryTrend(grpc::ServerContext*, const v1::QueryTrendRequest* request,
                          v1::QueryTrendResponse* response) override {
    std::lock_guard lock(mu_);
    trend_ = *request;
    trend_tokens_.push_back(request->page_token());
    // trend_pages pages of one point each, the token naming the next page ("page-N"); or, with
    // trend_stuck, the same token for ever.
    const int page = request->page_token().empty() ? 0 : std::stoi(request->page_token().substr(5));
    auto* p = response->add_points();
    p->set_build_name(page == 0 ? "mmq-x" : "mmq-x" + std::to_string(page));
    p->set_profile(request->profile());
    p->set_tokens_per_s(100 + page);
    p->set_started_unix_ms(1'764'468'000'000 + page);
    p->set_host(request->host());
    if (trend_stuck) response->set_next_page_token("page-1");
    else if (page + 1 < trend_pages) response->set_next_page_token("page-" + std::to_string(page + 1));
    return grpc::Status::OK;
  }

  grpc::Status QueryChanges(grpc::ServerContext*, const v1::QueryChangesRequest* request,
                            v1::QueryChangesResponse*) override {
    std::lock_guard lock(mu_);
    changes_ = *request;
    return grpc::Status::OK;
  }

  grpc::Status Compare(grpc::ServerContext*, const v1::CompareRequest* request, v1::CompareResponse*) override {
    std::lock_guard lock(mu_);
    compare_ = *request;
    return grpc::Status::OK;
  }

  grpc::Status ListDevices(grpc::ServerContext*, const v1::ListDevicesRequest* request,
                           v1::ListDevicesResponse* response) override {
    std::lock_guard lock(mu_);
    if (!lists_devices) return {grpc::UNIMPLEMENTED, "ListDevices is not served here"};
    list_devices_ = *request;
    for (const auto& d : fleet)
      if (request->host().empty() || d.host() == request->host()) *response->add_devices() = d;
    return grpc::Status::OK;
  }

  grpc::Status GetDevice(grpc::ServerContext*, const v1::GetDeviceRequest*, v1::DeviceStatus* response) override {
    if (!describes_device) return {grpc::UNIMPLEMENTED, "GetDevice is not served here"};
    response->set_host("gpu-host-1");
    response->set_backend("cuda");
    response->set_name("NVIDIA H200");
    response->set_driver_version("560.35.03");
    response->set_qgate_version("0.0.9");
    return grpc::Status::OK;
  }

  v1::Job job() const {
    std::lock_guard lock(mu_);
    return job_locked();
  }
  v1::Job job_locked() const {
    v1::Job j;
    j.set_id(7);
    j.mutable_spec()->set_kind(v1::JOB_KIND_AB);
    j.set_state(v1::JOB_STATE_DONE);
    j.mutable_build()->mutable_metadata()->set_name("mmq-x");
    j.set_created_unix_ms(1'764'468'000'000);
    j.mutable_verdict()->set_verdict(verdict);
    j.mutable_verdict()->set_ratio(1.25);
    return j;
  }

  v1::Verdict verdict = v1::VERDICT_FAIL;
  bool describes_device = true;
  bool lists_devices = true;
  std::string job_host;                // the host ListJobs' job says claimed it
  std::vector<v1::DeviceStatus> fleet;  // what ListDevices answers (before its host filter)
  v1::ListJobsRequest list_jobs_;
  v1::QueryTrendRequest trend_;  // the last page's request
  std::vector<std::string> trend_tokens_;  // each QueryTrend's page_token
  int trend_pages = 1;
  bool trend_stuck = false;
  v1::QueryChangesRequest changes_;
  v1::CompareRequest compare_;
  v1::ListDevicesRequest list_devices_;
  mutable std::mutex mu_;
  v1::SubmitHeader header_;
  std::vector<std::size_t> chunks_;
  std::string bytes_;
};

class FakeServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("qgate_fake_qgated." + std::to_string(::getpid()));
    fs::create_directories(dir_);
    address_ = "unix://" + (dir_ / "qgated.sock").string();
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address_, grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    server_->Shutdown();
    fs::remove_all(dir_);
  }

  int run_cli(const std::string& args, std::string* out) {
    const fs::path out_path = dir_ / "stdout";
    const std::string command = std::string(QGATE_CLI_PATH) + " --server " + address_ + " " +
                                args + " >" + out_path.string() + " 2>" +
                                (dir_ / "stderr").string();
    const int status = std::system(command.c_str());
    std::ifstream in(out_path);
    std::ostringstream text;
    text << in.rdbuf();
    *out = text.str();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string last_stderr() const {
    std::ifstream in(dir_ / "stderr");
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

  fs::path dir_;
  std::string address_;
  FakeHarness service_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(FakeServerTest, UploadIsHeaderThenMiBChunksWithTheFileSize) {
  const fs::path so = dir_ / "k.so";
  std::string bytes(2 * 1024 * 1024 + 5, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 31);
  std::ofstream(so, std::ios::binary) << bytes;

  HarnessClient client({address_, std::chrono::milliseconds(10'000)});
  v1::SubmitHeader header;
  header.mutable_build()->set_name("mmq-x");
  header.mutable_job()->set_kind(v1::JOB_KIND_AB);
  const auto response = client.submit_build(header, so.string());
  EXPECT_EQ(response.job_id(), 7);
  EXPECT_EQ(service_.header_.size_bytes(), static_cast<std::int64_t>(bytes.size()));
  EXPECT_EQ(service_.chunks_, (std::vector<std::size_t>{1 << 20, 1 << 20, 5}));
  EXPECT_EQ(service_.bytes_, bytes);
}

TEST_F(FakeServerTest, ServerMessagesComeThroughAsTheyAre) {
  HarnessClient client({address_, std::chrono::milliseconds(10'000)});
  try {
    client.get_job(99);
    FAIL() << "no throw";
  } catch (const RpcError& e) {
    EXPECT_EQ(e.code(), grpc::NOT_FOUND);
    EXPECT_STREQ(e.what(), "no job 99");
  }
}

TEST_F(FakeServerTest, TrendFollowsEveryPageInOrder) {
  service_.trend_pages = 3;
  HarnessClient client({address_, std::chrono::milliseconds(10'000)});
  v1::QueryTrendRequest request;
  request.set_profile("cpu-tiny");
  const auto whole = client.query_trend(request);
  ASSERT_EQ(whole.points_size(), 3);
  EXPECT_EQ(whole.points(0).build_name(), "mmq-x");
  EXPECT_EQ(whole.points(1).build_name(), "mmq-x1");
  EXPECT_EQ(whole.points(2).build_name(), "mmq-x2");
  EXPECT_TRUE(whole.next_page_token().empty());
  EXPECT_EQ(service_.trend_tokens_, (std::vector<std::string>{"", "page-1", "page-2"}));
  EXPECT_EQ(service_.trend_.profile(), "cpu-tiny") << "each page asks the same query";
  // One page alone, its token kept.
  const auto first = client.query_trend_page(request);
  EXPECT_EQ(first.points_size(), 1);
  EXPECT_EQ(first.next_page_token(), "page-1");

  // The CLI's table and JSON are the whole answer.
  std::string out;
  ASSERT_EQ(run_cli("--json trend --profile cpu-tiny", &out), 0) << last_stderr();
  const auto doc = nlohmann::json::parse(out);
  ASSERT_EQ(doc["points"].size(), 3u) << out;
  EXPECT_EQ(doc["points"][2]["build_name"], "mmq-x2");
  ASSERT_EQ(run_cli("trend --profile cpu-tiny", &out), 0) << last_stderr();
  EXPECT_NE(out.find("mmq-x2"), std::string::npos) << out;
}

TEST_F(FakeServerTest, TrendStopsOnATokenThatComesBackTheSame) {
  service_.trend_stuck = true;
  HarnessClient client({address_, std::chrono::milliseconds(10'000)});
  EXPECT_THROW(client.query_trend(v1::QueryTrendRequest()), std::runtime_error);
  EXPECT_EQ(service_.trend_tokens_.size(), 2u);
}

TEST_F(FakeServerTest, SubmitWaitExitsWithTheVerdict) {
  const fs::path so = dir_ / "k.so";
  std::ofstream(so, std::ios::binary) << "ELF";
  std::string out;
  service_.verdict = v1::VERDICT_FAIL;
  EXPECT_EQ(run_cli("submit --build " + so.string() + " --name mmq-x --wait", &out), 1);
  EXPECT_NE(out.find("verdict    FAIL"), std::string::npos) << out;
  EXPECT_NE(out.find("arm A = MMQ"), std::string::npos) << out;
  std::ifstream err_file(dir_ / "stderr");
  std::ostringstream err;
  err << err_file.rdbuf();
  // Not a terminal: one progress line per event, after the "submitted" line.
  EXPECT_NE(err.str().find("\njob 7 running (parity sweep): parity 64/64\njob 7 done (parity sweep): parity 64/64\n"),
            std::string::npos)
      << err.str();
  service_.verdict = v1::VERDICT_INCONCLUSIVE;
  EXPECT_EQ(run_cli("watch 7", &out), 2);
  service_.verdict = v1::VERDICT_PASS;
  EXPECT_EQ(run_cli("ab --build " + so.string() + " --name mmq-x", &out), 0);
  EXPECT_EQ(run_cli("submit --build " + so.string() + " --name mmq-x", &out), 0);
  EXPECT_EQ(out, "7\n");
  EXPECT_EQ(run_cli("submit --json --build " + so.string() + " --name mmq-x", &out), 0);
  const auto submitted = nlohmann::json::parse(out);
  EXPECT_EQ(submitted["schema_version"], 1) << out;
  EXPECT_EQ(submitted["submission"]["job_id"], 7) << out;
  EXPECT_EQ(submitted["context"]["gpu_name"], "NVIDIA H200") << out;
  EXPECT_EQ(run_cli("watch 99", &out), 3);
}

TEST_F(FakeServerTest, JobsTableAndJson) {
  std::string out;
  ASSERT_EQ(run_cli("jobs", &out), 0);
  EXPECT_EQ(out.rfind("ID  KIND  STATE  BUILD  PROFILE  VERDICT  RATIO", 0), 0u) << out;
  EXPECT_NE(out.find(" 7  ab    done   mmq-x  default  FAIL     1.250"), std::string::npos) << out;
  ASSERT_EQ(run_cli("jobs --json", &out), 0);
  EXPECT_NE(out.find("\"state\": \"JOB_STATE_DONE\""), std::string::npos) << out;
}

// Every --json document: the schema version, the context from the daemon's GetDevice and this
// CLI's version, the data under the command's key.
TEST_F(FakeServerTest, JsonIsVersionedWithTheDaemonsContext) {
  std::string out;
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"jobs --json", "jobs"}, {"--json show 7", "job"}, {"--json watch 7", "job"}};
  for (const auto& [command, key] : commands) {
    run_cli(command, &out);
    const auto doc = nlohmann::json::parse(out);
    EXPECT_EQ(doc["schema_version"], 1) << command << ": " << out;
    const auto& c = doc["context"];
    EXPECT_EQ(c["host"], "gpu-host-1") << command;
    EXPECT_EQ(c["gpu_name"], "NVIDIA H200") << command;
    EXPECT_EQ(c["driver_version"], "560.35.03") << command;
    EXPECT_EQ(c["qgate_version"], "0.0.9") << command;
    EXPECT_FALSE(c["cli_version"].get<std::string>().empty()) << command;
    EXPECT_FALSE(c.contains("error")) << command;
    ASSERT_TRUE(doc.contains(key)) << command << ": " << out;
  }
  EXPECT_EQ(nlohmann::json::parse(out)["job"]["id"], 7);
}

TEST_F(FakeServerTest, JsonContextSaysWhyWhenTheDaemonDoesNotDescribeItsDevice) {
  service_.describes_device = false;
  std::string out;
  ASSERT_EQ(run_cli("jobs --json", &out), 0);
  const auto doc = nlohmann::json::parse(out);
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["context"]["gpu_name"], "");
  EXPECT_NE(doc["context"]["error"].get<std::string>().find("GetDevice is not served here"), std::string::npos) << out;
  EXPECT_EQ(doc["jobs"][0]["id"], 7);
}

TEST_F(FakeServerTest, SubmitSendsTheFleetRoutingAndSaysIt) {
  const fs::path so = dir_ / "k.so";
  std::ofstream(so, std::ios::binary) << "ELF";
  std::string out;
  ASSERT_EQ(run_cli("submit --build " + so.string() +
                        " --name mmq-x --gpu-model 'RTX 4090' --gpu-uuid GPU-5a8e --label sm90,rack2 --label sm90",
                    &out),
            0)
      << last_stderr();
  EXPECT_EQ(out, "7\n");
  const v1::JobSpec& spec = service_.header_.job();
  EXPECT_EQ(spec.gpu_model(), "RTX 4090");
  EXPECT_EQ(spec.gpu_uuid(), "GPU-5a8e");
  EXPECT_EQ(std::vector<std::string>(spec.labels().begin(), spec.labels().end()),
            (std::vector<std::string>{"rack2", "sm90"}));
  EXPECT_EQ(last_stderr(), "job 7 queued to run on an RTX 4090 GPU with uuid GPU-5a8e and labels rack2, sm90\n");
  // ab and command take the same flags.
  ASSERT_EQ(run_cli("ab --no-wait --build " + so.string() + " --name mmq-x --gpu-model H200 --label rack2", &out), 0)
      << last_stderr();
  EXPECT_EQ(service_.header_.job().gpu_model(), "H200");
  EXPECT_EQ(service_.header_.job().gpu_uuid(), "");
  ASSERT_EQ(service_.header_.job().labels_size(), 1);
  ASSERT_EQ(run_cli("command --name cmd-x --run 'true' --label rack2,sm90", &out), 0) << last_stderr();
  EXPECT_EQ(service_.header_.job().labels_size(), 2);
  // Without the flags: nothing routed, and no extra line.
  ASSERT_EQ(run_cli("submit --build " + so.string() + " --name mmq-x", &out), 0);
  EXPECT_EQ(service_.header_.job().gpu_model(), "");
  EXPECT_EQ(service_.header_.job().labels_size(), 0);
  EXPECT_EQ(last_stderr(), "");
  // --wait says it on the submitted line.
  ASSERT_EQ(run_cli("submit --build " + so.string() + " --name mmq-x --gpu-model H200 --label sm90 --wait", &out), 1);
  EXPECT_NE(last_stderr().find("submitted job 7: build mmq-x (sha256 0123456789ab), to run on an H200 GPU with label "
                               "sm90\n"),
            std::string::npos)
      << last_stderr();
}

TEST_F(FakeServerTest, HostFilterGoesIntoEveryReadRequest) {
  std::string out;
  ASSERT_EQ(run_cli("jobs --host gpu-host-b", &out), 0) << last_stderr();
  EXPECT_EQ(service_.list_jobs_.host(), "gpu-host-b");
  ASSERT_EQ(run_cli("trend --profile p --host gpu-host-b --changes", &out), 0) << last_stderr();
  EXPECT_EQ(service_.trend_.host(), "gpu-host-b");
  EXPECT_EQ(service_.changes_.host(), "gpu-host-b");
  ASSERT_EQ(run_cli("regressions --host gpu-host-c", &out), 0) << last_stderr();
  EXPECT_EQ(service_.changes_.host(), "gpu-host-c");
  EXPECT_TRUE(service_.changes_.slowdowns_only());
  ASSERT_EQ(run_cli("compare a b --host gpu-host-d", &out), 0) << last_stderr();
  EXPECT_EQ(service_.compare_.host(), "gpu-host-d");
  ASSERT_EQ(run_cli("export --format csv --host gpu-host-e", &out), 0) << last_stderr();
  EXPECT_EQ(service_.trend_.host(), "gpu-host-e");
  service_.fleet = {v1::DeviceStatus()};
  service_.fleet[0].set_host("gpu-host-f");
  ASSERT_EQ(run_cli("device --host gpu-host-f", &out), 0) << last_stderr();
  EXPECT_EQ(service_.list_devices_.host(), "gpu-host-f");
  // Without --host: every host.
  ASSERT_EQ(run_cli("jobs", &out), 0);
  EXPECT_EQ(service_.list_jobs_.host(), "");
  ASSERT_EQ(run_cli("device", &out), 0);
  EXPECT_EQ(service_.list_devices_.host(), "");
}

TEST_F(FakeServerTest, JobsShowTheirHostInTheTableAndTheJson) {
  service_.job_host = "gpu-host-b";
  std::string out;
  ASSERT_EQ(run_cli("jobs", &out), 0);
  EXPECT_NE(out.find("DISPOSITION  HOST\n"), std::string::npos) << out;
  EXPECT_NE(out.find("  gpu-host-b\n"), std::string::npos) << out;
  ASSERT_EQ(run_cli("jobs --json", &out), 0);
  EXPECT_EQ(nlohmann::json::parse(out)["jobs"][0]["host"], "gpu-host-b") << out;
}

TEST_F(FakeServerTest, DeviceShowsTheFleetAndItsJsonCarriesHostsLabelsAndWhenPublished) {
  const std::int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count();
  v1::DeviceStatus own;
  own.set_host("gpu-host-1");
  own.set_name("NVIDIA H200");
  own.add_labels("sm90");
  v1::DeviceStatus other = own;
  other.set_host("gpu-host-2");
  other.set_device(1);
  other.add_labels("rack2");
  other.set_published_unix_ms(now_ms - 600'000);
  service_.fleet = {own, other};
  std::string out;
  ASSERT_EQ(run_cli("device", &out), 0) << last_stderr();
  EXPECT_EQ(out.rfind("HOST        GPU  NAME         UUID  LABELS", 0), 0u) << out;
  EXPECT_NE(out.find(" live\n"), std::string::npos) << out;
  EXPECT_NE(out.find(" 10m "), std::string::npos) << out;  // 10m 0s, or 10m 1s on a slow machine
  EXPECT_NE(out.find("s ago\n"), std::string::npos) << out;
  ASSERT_EQ(run_cli("device --json", &out), 0) << last_stderr();
  const auto doc = nlohmann::json::parse(out);
  ASSERT_EQ(doc["devices"].size(), 2u) << out;
  EXPECT_EQ(doc["devices"][1]["host"], "gpu-host-2");
  EXPECT_EQ(doc["devices"][1]["labels"], (nlohmann::json{"sm90", "rack2"}));
  EXPECT_EQ(doc["devices"][1]["published_unix_ms"], now_ms - 600'000);
  EXPECT_EQ(doc["devices"][0]["published_unix_ms"], 0);
  // Only another daemon's GPU: the context still describes the answering daemon (GetDevice).
  ASSERT_EQ(run_cli("device --json --host gpu-host-2", &out), 0) << last_stderr();
  const auto only_other = nlohmann::json::parse(out);
  EXPECT_EQ(only_other["device"]["host"], "gpu-host-2") << out;
  EXPECT_EQ(only_other["context"]["host"], "gpu-host-1") << out;
  // A host no daemon published: exit 3, named.
  EXPECT_EQ(run_cli("device --host gpu-host-9", &out), 3);
  EXPECT_EQ(last_stderr(), "qgate: no GPU of host gpu-host-9 is known to the daemon\n");
}

TEST_F(FakeServerTest, DeviceOnADaemonWithoutListDevicesKeepsItsOneGpuUnderAHostFilterOfItsHost) {
  service_.lists_devices = false;
  std::string out;
  ASSERT_EQ(run_cli("device", &out), 0) << last_stderr();
  EXPECT_EQ(out.rfind("host           gpu-host-1\n", 0), 0u) << out;
  ASSERT_EQ(run_cli("device --host gpu-host-1", &out), 0) << last_stderr();
  EXPECT_EQ(out.rfind("host           gpu-host-1\n", 0), 0u) << out;
  EXPECT_EQ(run_cli("device --host gpu-host-2", &out), 3);
  EXPECT_EQ(last_stderr(), "qgate: no GPU of host gpu-host-2 is known to the daemon\n");
}

}  // namespace
}  // namespace qgate::client
