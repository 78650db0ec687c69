// Tests the CLI against a fake qgated on a unix socket in a temp dir: the upload stream (header
// first, 1 MiB chunks, size_bytes), watch's exit codes per verdict and the read commands' output.
// The fake answers from canned messages; the real daemon's behaviour is not modelled here.
#include "qgate/client/harness_client.h"

#include <sys/wait.h>
#include <unistd.h>

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

  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest*,
                        v1::ListJobsResponse* response) override {
    *response->add_jobs() = job();
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

}  // namespace
}  // namespace qgate::client
