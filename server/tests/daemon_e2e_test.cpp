// qgated end to end: a real daemon on a temp socket with a temp database, driven through the real
// qgate CLI. Covers submit/watch/verdict, an A/A gate, trend and compare, kill -9 in the middle of a
// job with a restart, and bad requests (an unknown job, an empty upload, a wrong-type field).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "qgate/v1/harness.grpc.pb.h"

using namespace std::chrono_literals;
using nlohmann::json;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct CliResult {
  int code = -1;
  std::string out, err;
};

/// One qgated process with its own data dir; killed when the test ends.
class DaemonUnderTest {
 public:
  DaemonUnderTest() {
    char tpl[] = "/tmp/qgated-test-XXXXXX";
    dir_ = mkdtemp(tpl);
    socket_ = dir_ + "/qgated.sock";
  }
  ~DaemonUnderTest() {
    kill9();
    std::filesystem::remove_all(dir_);
  }

  void start() {
    const std::string log = dir_ + "/qgated.log";
    std::ofstream(log, std::ios::app) << "--- start\n";
    log_offset_ = std::filesystem::file_size(log);
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log.c_str(), O_WRONLY | O_APPEND);
      dup2(fd, 2);
      execl(QGATED_BINARY, QGATED_BINARY, "--backend", "cpu", "--threads", "2", "--data-dir", dir_.c_str(),
            "--listen", ("unix://" + socket_).c_str(), nullptr);
      _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (slurp(log).find("qgated: ready", log_offset_) != std::string::npos) return;
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL() << "qgated exited at start:\n" << slurp(log);
      }
      std::this_thread::sleep_for(50ms);
    }
    FAIL() << "qgated did not become ready:\n" << slurp(log);
  }

  void kill9() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  /// SIGTERM, then waits up to `limit` for the exit; returns false when it did not exit.
  bool terminate(std::chrono::seconds limit) {
    if (pid_ <= 0) return true;
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return true;
      }
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  CliResult cli(const std::string& args) const {
    const std::string out = dir_ + "/cli.out", err = dir_ + "/cli.err";
    const std::string cmd = std::string(QGATE_CLI_BINARY) + " --server unix://" + socket_ + " " + args + " >" + out +
                            " 2>" + err + " </dev/null";
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  }

  std::unique_ptr<qgate::v1::Harness::Stub> stub() const {
    return qgate::v1::Harness::NewStub(grpc::CreateChannel("unix://" + socket_, grpc::InsecureChannelCredentials()));
  }

  const std::string& dir() const { return dir_; }
  std::string log() const { return slurp(dir_ + "/qgated.log"); }

 private:
  std::string dir_, socket_;
  pid_t pid_ = -1;
  size_t log_offset_ = 0;
};

json show(const DaemonUnderTest& d, int64_t job) {
  auto r = d.cli("--json show " + std::to_string(job));
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(r.out);
}

int64_t submit_no_wait(const DaemonUnderTest& d, const std::string& args) {
  auto r = d.cli("--json submit --build " + std::string(QGATE_REF_LIBRARY) + " " + args);
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(r.out)["job_id"].get<int64_t>();
}

std::string state_of(const json& job) { return job.value("state", ""); }

}  // namespace

TEST(DaemonEndToEnd, AbJobSubmitWatchVerdictTrendCompare) {
  DaemonUnderTest d;
  d.start();
  // The MMQ/f16 A/B of the reference build, waited on: the exit code is the verdict's.
  auto r = d.cli("ab --build " + std::string(QGATE_REF_LIBRARY) + " --name ref --profile cpu-tiny --max-pairs 8");
  ASSERT_TRUE(r.code == 0 || r.code == 1 || r.code == 2) << r.err;
  EXPECT_NE(r.out.find("q4_K"), std::string::npos) << "per-type ratios: " << r.out;

  auto jobs = d.cli("--json jobs");
  ASSERT_EQ(jobs.code, 0) << jobs.err;
  auto list = json::parse(jobs.out);
  const auto& arr = list.is_array() ? list : list["jobs"];
  ASSERT_EQ(arr.size(), 1u);
  const int64_t job = std::stoll(arr[0]["id"].is_string() ? arr[0]["id"].get<std::string>()
                                                           : std::to_string(arr[0]["id"].get<int64_t>()));
  json j = show(d, job);
  EXPECT_EQ(state_of(j), "JOB_STATE_DONE") << j.dump();
  const auto& v = j["verdict"];
  EXPECT_GE(v["pairs"].get<int>(), 4);
  EXPECT_GT(v["arm_a"]["tokens_per_s"].get<double>(), 0);
  EXPECT_GT(v["arm_b"]["tokens_per_s"].get<double>(), 0);
  EXPECT_EQ(v["arm_a"]["label"], "mmq");
  EXPECT_GE(v["per_type"].size(), 3u) << "cpu-tiny mixes q4_0, q4_K and q6_K";
  EXPECT_LT(v["ci_low"].get<double>(), v["ratio"].get<double>());
  EXPECT_GT(v["ci_high"].get<double>(), v["ratio"].get<double>());

  // Watching a finished job replays its end and exits with the verdict's code.
  auto w = d.cli("watch " + std::to_string(job));
  EXPECT_EQ(w.code, r.code) << w.err;

  auto t = d.cli("--json trend --profile cpu-tiny");
  ASSERT_EQ(t.code, 0) << t.err;
  auto points = json::parse(t.out);
  const auto& pts = points.is_array() ? points : points["points"];
  EXPECT_EQ(int(pts.size()), 2 * v["pairs"].get<int>()) << "every run of both arms is in the history";
  auto human = d.cli("trend --profile cpu-tiny");
  EXPECT_EQ(human.code, 0) << human.err;
  EXPECT_NE(human.out.find("ref"), std::string::npos) << human.out;

  auto c = d.cli("--json compare ref ref");
  EXPECT_EQ(c.code, 0) << c.err;
  auto b = d.cli("--json builds");
  EXPECT_EQ(b.code, 0) << b.err;
  EXPECT_NE(b.out.find("ref"), std::string::npos);
  auto dev = d.cli("--json device");
  EXPECT_EQ(dev.code, 0) << dev.err;
  EXPECT_NE(dev.out.find("cpu"), std::string::npos);
}

TEST(DaemonEndToEnd, AnAaGateComesOutPassOrSame) {
  DaemonUnderTest d;
  d.start();
  // The baseline: the reference build, uploaded first (parity-only job keeps it quick to store).
  const int64_t first = submit_no_wait(d, "--name ref --kind parity");
  auto w = d.cli("watch " + std::to_string(first));
  ASSERT_EQ(w.code, 0) << "the reference build passes its parity sweep: " << w.err << w.out;
  json pj = show(d, first);
  EXPECT_EQ(pj["verdict"]["parity_passed"].get<int>(), 128) << pj.dump();

  // Gate the same bytes against themselves: an A/A run must not read as a slowdown. A shared
  // 2-core CPU swings runs of a few milliseconds by 10-20%, so this gate's policy allows a 25%
  // slowdown: the test is about the machinery (pairs, interval, verdict), not the CPU's precision.
  auto r = d.cli("submit --build " + std::string(QGATE_REF_LIBRARY) +
                 " --name ref --baseline ref --profile cpu-tiny --max-pairs 16 --threshold 0.25 --wait");
  EXPECT_EQ(r.code, 0) << "A/A gate must PASS: " << r.out << r.err;
  auto jobs = json::parse(d.cli("--json jobs").out);
  const auto& arr = jobs.is_array() ? jobs : jobs["jobs"];
  const auto& latest = arr[0];
  EXPECT_EQ(latest["verdict"]["verdict"], "VERDICT_PASS") << latest.dump();
  const std::string cmp = latest["verdict"].value("comparison", "");
  EXPECT_NE(cmp, "COMPARISON_DIFFERENT") << latest.dump();
}

TEST(DaemonEndToEnd, AJobInterruptedByKill9FinishesAfterRestart) {
  DaemonUnderTest d;
  d.start();
  const int64_t job = submit_no_wait(d, "--name ref --kind parity");
  // Wait until it is running (the parity phase takes tens of seconds on a small CPU).
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (state_of(show(d, job)) != "JOB_STATE_RUNNING" && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(100ms);
  ASSERT_EQ(state_of(show(d, job)), "JOB_STATE_RUNNING");
  std::this_thread::sleep_for(2s);
  d.kill9();
  d.start();
  EXPECT_NE(d.log().find("job " + std::to_string(job) + " was running when the daemon stopped; re-queued"),
            std::string::npos)
      << d.log();
  auto w = d.cli("watch " + std::to_string(job));
  EXPECT_EQ(w.code, 0) << w.err << w.out;
  json j = show(d, job);
  EXPECT_EQ(state_of(j), "JOB_STATE_DONE");
  EXPECT_EQ(j["attempts"].get<int>(), 1) << j.dump();
}

TEST(DaemonEndToEnd, BadRequestsGetClearErrorsAndLoseNothing) {
  DaemonUnderTest d;
  d.start();
  // An unknown job, through the CLI: one line, exit 3.
  auto r = d.cli("show 987654");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("no job 987654"), std::string::npos) << r.err;
  // An unknown profile.
  r = d.cli("submit --build " + std::string(QGATE_REF_LIBRARY) + " --name ref --kind ab --profile no-such-model");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("unknown profile 'no-such-model'"), std::string::npos) << r.err;
  // A path in a build name.
  r = d.cli("submit --build " + std::string(QGATE_REF_LIBRARY) + " --name ../../etc --kind ab");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("'../../etc'"), std::string::npos) << r.err;

  auto stub = d.stub();
  {
    // An empty upload: a header and no bytes.
    grpc::ClientContext ctx;
    qgate::v1::SubmitBuildResponse resp;
    auto writer = stub->SubmitBuild(&ctx, &resp);
    qgate::v1::SubmitBuildRequest req;
    req.mutable_header()->mutable_build()->set_name("empty");
    req.mutable_header()->mutable_job()->set_kind(qgate::v1::JOB_KIND_AB);
    ASSERT_TRUE(writer->Write(req));
    writer->WritesDone();
    auto status = writer->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("empty"), std::string::npos) << status.error_message();
  }
  {
    // A wrong-type field: an enum value the schema does not have.
    grpc::ClientContext ctx;
    qgate::v1::SubmitBuildResponse resp;
    auto writer = stub->SubmitBuild(&ctx, &resp);
    qgate::v1::SubmitBuildRequest req;
    req.mutable_header()->mutable_build()->set_name("odd");
    req.mutable_header()->mutable_job()->set_kind(static_cast<qgate::v1::JobKind>(99));
    writer->Write(req);
    writer->WritesDone();
    auto status = writer->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("kind"), std::string::npos) << status.error_message();
  }
  {
    // Bytes before the header, and bytes that are not a shared object.
    grpc::ClientContext ctx;
    qgate::v1::SubmitBuildResponse resp;
    auto writer = stub->SubmitBuild(&ctx, &resp);
    qgate::v1::SubmitBuildRequest chunk;
    chunk.set_chunk("#!/bin/sh\n");
    writer->Write(chunk);
    writer->WritesDone();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext ctx;
    qgate::v1::Job job;
    qgate::v1::ListJobsRequest req;
    req.set_state(static_cast<qgate::v1::JobState>(42));
    qgate::v1::ListJobsResponse resp;
    EXPECT_EQ(stub->ListJobs(&ctx, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  // Nothing of that was stored, and the daemon still serves a valid request.
  auto jobs = d.cli("--json jobs");
  ASSERT_EQ(jobs.code, 0) << jobs.err;
  auto list = json::parse(jobs.out);
  EXPECT_EQ((list.is_array() ? list : list["jobs"]).size(), 0u) << jobs.out;
  auto builds = d.cli("--json builds");
  EXPECT_EQ(builds.out.find("empty"), std::string::npos);
}

TEST(DaemonEndToEnd, SigtermStopsPromptlyAndARunningJobIsRunAgainAtRestart) {
  DaemonUnderTest d;
  d.start();
  EXPECT_TRUE(d.terminate(10s)) << "an idle daemon must stop on SIGTERM:\n" << d.log();
  d.start();
  const int64_t job = submit_no_wait(d, "--name ref --kind parity");
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (state_of(show(d, job)) != "JOB_STATE_RUNNING" && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(d.terminate(20s)) << "a busy daemon must stop on SIGTERM too:\n" << d.log();
  EXPECT_NE(d.log().find("qgated: stopped"), std::string::npos);
  d.start();
  auto w = d.cli("watch " + std::to_string(job));
  EXPECT_EQ(w.code, 0) << w.err << w.out;
  EXPECT_EQ(state_of(show(d, job)), "JOB_STATE_DONE");
}
