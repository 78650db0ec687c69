// Builds on every host (docs/fleet.md): two real qgated daemons on one PostgreSQL database, each with
// its own data dir. A build is submitted to daemon A alone, as a job that waits for a quiet GPU,
// which A never sees (its sampler replays a busy trace), so A never claims it. A stops, and its own
// file of the build is removed. Daemon B (a quiet GPU) claims the job, fetches the build from the
// database's copy into its own data dir, checks it by sha256 and runs the job to done.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "daemon_under_test.h"
#include "qgate/common/sha256.h"
#include "test_postgres.h"

using namespace std::chrono_literals;
using namespace qgate::testing;

namespace {

/// A co-tenant trace for --replay-samples, a sample every 100 ms for 2 s: a foreign process at 90%
/// SM throughout (replay holds the last line, so busy stays busy), or nobody.
void write_trace(const std::string& path, bool busy) {
  std::ofstream out(path);
  for (int t = 0; t <= 2000; t += 100)
    out << R"({"t_ms":)" << t << R"(,"device_util":)" << (busy ? 97 : 0)
        << R"(,"sm_clock_mhz":1980,"max_sm_clock_mhz":1980,"clock_event_reasons":0,"foreign":)"
        << (busy ? R"([{"pid":4242,"name":"sglang","sm_percent":90,"used_memory_bytes":1073741824}])" : "[]") << "}\n";
}

/// Uploads the reference library through daemon's gRPC stub as a small A/B that waits for a quiet GPU;
/// the new job's id (0 when the submit failed).
int64_t submit_waiting_for_quiet(const DaemonUnderTest& daemon, const std::string& bytes) {
  auto stub = daemon.stub();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 60s);
  qgate::v1::SubmitBuildResponse response;
  auto writer = stub->SubmitBuild(&context, &response);
  qgate::v1::SubmitBuildRequest request;
  qgate::v1::SubmitHeader& header = *request.mutable_header();
  header.mutable_build()->set_name("travelling");
  header.mutable_job()->set_kind(qgate::v1::JOB_KIND_AB);
  header.mutable_job()->set_profile("cpu-tiny");
  header.mutable_job()->mutable_policy()->set_min_pairs(2);
  header.mutable_job()->mutable_policy()->set_max_pairs(2);
  header.mutable_job()->set_repetitions(3);
  header.mutable_job()->set_wait_for_quiet(true);
  header.set_size_bytes(static_cast<int64_t>(bytes.size()));
  writer->Write(request);
  for (size_t at = 0; at < bytes.size(); at += 64 << 10) {
    request.set_chunk(bytes.substr(at, 64 << 10));
    if (!writer->Write(request)) break;
  }
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  return status.ok() ? response.job_id() : 0;
}

TEST(FleetBuildsE2e, ABuildSubmittedToOneDaemonRunsOnAnotherFromTheDatabasesCopy) {
  auto& server = qgate::test_support::TestPostgres::for_process();
  if (!server.available()) GTEST_SKIP() << "no PostgreSQL server: " << server.why_unavailable();
  const auto database = server.fresh_database();
  const std::string store = database.store_address();

  DaemonUnderTest a, b;
  write_trace(a.dir() + "/busy.jsonl", true);
  write_trace(b.dir() + "/quiet.jsonl", false);
  std::string why;
  ASSERT_TRUE(a.try_start({"--store", store, "--replay-samples", a.dir() + "/busy.jsonl", "--quiet-hold", "1"}, "",
                          &why))
      << why;

  const std::string bytes = slurp(QGATE_REF_LIBRARY);
  const std::string sha256 = qgate::common::sha256_hex(bytes.data(), bytes.size());
  const int64_t job = submit_waiting_for_quiet(a, bytes);
  ASSERT_GT(job, 0);
  const std::string id = std::to_string(job);
  // The content is in the database by the time the submit is answered.
  EXPECT_EQ(database.query_value("SELECT size_bytes FROM build_contents WHERE sha256 = '" + sha256 + "'"),
            std::to_string(bytes.size()));
  const std::string a_file = a.dir() + "/artifacts/" + sha256 + ".so";
  ASSERT_TRUE(std::filesystem::exists(a_file));
  // A's GPU stays busy: the job waits.
  std::this_thread::sleep_for(2s);
  ASSERT_EQ(database.query_value("SELECT state FROM jobs WHERE id = " + id), "queued") << a.log();
  ASSERT_TRUE(a.terminate(30s)) << a.log();
  ASSERT_EQ(database.query_value("SELECT claimed_by FROM jobs WHERE id = " + id), "");
  std::filesystem::remove_all(a.dir() + "/artifacts");  // nothing of A's is left to read

  ASSERT_TRUE(b.try_start({"--store", store, "--replay-samples", b.dir() + "/quiet.jsonl", "--quiet-hold", "1"}, "",
                          &why))
      << why;
  const auto deadline = std::chrono::steady_clock::now() + 240s;
  std::string state;
  while (std::chrono::steady_clock::now() < deadline) {
    state = database.query_value("SELECT state FROM jobs WHERE id = " + id);
    if (state == "done" || state == "failed" || state == "cancelled" || state == "expired") break;
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_EQ(state, "done") << database.query_value("SELECT error FROM jobs WHERE id = " + id) << "\n"
                           << b.log();
  EXPECT_NE(database.query_value("SELECT claimed_by FROM jobs WHERE id = " + id).find(b.dir()),
            std::string::npos);
  const std::string b_file = b.dir() + "/artifacts/" + sha256 + ".so";
  ASSERT_TRUE(std::filesystem::exists(b_file)) << b.log();
  EXPECT_EQ(qgate::common::sha256_file_hex(b_file), sha256);
  EXPECT_NE(b.log().find("fetched from the database"), std::string::npos) << b.log();
  EXPECT_FALSE(std::filesystem::exists(a.dir() + "/artifacts"));
  // Nothing is left half fetched beside it.
  for (const auto& entry : std::filesystem::directory_iterator(b.dir() + "/artifacts"))
    EXPECT_EQ(entry.path().filename().string(), sha256 + ".so");
}

}  // namespace
