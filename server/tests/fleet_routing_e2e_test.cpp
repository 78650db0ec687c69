// Three real qgated daemons on one PostgreSQL database, on the CPU backend with fake GPUs of three
// models and with their own labels, and 200 jobs submitted to them: each job runs once, on a daemon
// whose GPU is of the model it asks for and that carries every label it asks for; the jobs nobody
// constrains spread over the fleet; any daemon lists every host's GPUs; a job running on one daemon
// is cancelled through another (docs/fleet.md). Each daemon answers for a host of its own
// (--host-name), as daemons on three machines would: jobs, runs and GPUs are recorded under it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "daemon_under_test.h"
#include "qgate/common/gpu_routing.h"
#include "test_postgres.h"

using namespace std::chrono_literals;
using namespace qgate::testing;

namespace {

/// What a job asks of the daemon that runs it.
struct Routing {
  std::string gpu_model;
  std::vector<std::string> labels;
};

/// Submits an A/B of the reference build through the gRPC API (one connection for every submit),
/// of `pairs` pairs.
int64_t submit(qgate::v1::Harness::Stub& stub, const std::string& library, const Routing& routing, int pairs = 2) {
  grpc::ClientContext context;
  qgate::v1::SubmitBuildResponse response;
  auto writer = stub.SubmitBuild(&context, &response);
  qgate::v1::SubmitBuildRequest header;
  header.mutable_header()->mutable_build()->set_name("ref");
  qgate::v1::JobSpec& job = *header.mutable_header()->mutable_job();
  job.set_kind(qgate::v1::JOB_KIND_AB);
  job.set_profile("cpu-tiny");
  job.mutable_policy()->set_min_pairs(pairs);
  job.mutable_policy()->set_max_pairs(pairs);
  job.set_gpu_model(routing.gpu_model);
  for (const std::string& label : routing.labels) job.add_labels(label);
  header.mutable_header()->set_size_bytes(int64_t(library.size()));
  EXPECT_TRUE(writer->Write(header));
  for (std::size_t at = 0; at < library.size(); at += 1 << 20) {
    qgate::v1::SubmitBuildRequest chunk;
    chunk.set_chunk(library.substr(at, 1 << 20));
    EXPECT_TRUE(writer->Write(chunk));
  }
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.job_id();
}

TEST(FleetRoutingE2e, TwoHundredJobsRunOnceEachOnADaemonOfTheirModelAndLabels) {
  auto& server = qgate::test_support::TestPostgres::for_process();
  if (!server.available()) GTEST_SKIP() << "no PostgreSQL server: " << server.why_unavailable();
  const auto database = server.fresh_database();
  const std::string store = database.store_address();

  // h200: one H200, sm90. h100s: two H100s, sm90 and rack2. a100: one A100, sm80.
  struct Member {
    std::vector<std::string> flags;
    std::string model;               // its GPUs' model
    std::vector<std::string> labels;
    std::string host;                // its --host-name
  };
  const std::vector<Member> members = {
      {{"--gpus", "0", "--cpu-device-names", "NVIDIA H200", "--label", "sm90"}, "H200", {"sm90"}, "node-h200"},
      {{"--gpus", "0,1", "--cpu-device-names", "NVIDIA H100 80GB HBM3,NVIDIA H100 80GB HBM3", "--label", "sm90",
        "--label", "rack2"},
       "H100",
       {"rack2", "sm90"},
       "node-h100.rack2"},
      {{"--gpus", "0", "--cpu-device-names", "NVIDIA A100-SXM4-80GB", "--label", "sm80"}, "A100", {"sm80"}, "node-a100"},
  };
  std::vector<std::unique_ptr<DaemonUnderTest>> daemons;
  for (const Member& member : members) {
    auto daemon = std::make_unique<DaemonUnderTest>();
    daemon->threads = "1";
    std::vector<std::string> flags = {"--store", store, "--lease-s", "4", "--host-name", member.host};
    flags.insert(flags.end(), member.flags.begin(), member.flags.end());
    std::string why;
    ASSERT_TRUE(daemon->try_start(flags, "", &why)) << why;
    daemons.push_back(std::move(daemon));
  }

  // Six kinds of routing, each one daemon or more can honour, submitted round robin to the daemons.
  const std::vector<Routing> routings = {
      {"H200", {}}, {"h100", {}}, {"", {"sm80"}}, {"", {"rack2"}}, {"", {"sm90"}}, {"", {}},
  };
  std::ifstream in(QGATE_REF_LIBRARY, std::ios::binary);
  const std::string library((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(library.empty());
  std::vector<std::unique_ptr<qgate::v1::Harness::Stub>> stubs;
  for (const auto& daemon : daemons) stubs.push_back(daemon->stub());
  // A long job that only the A100's daemon may take, cancelled through another daemon while it
  // runs: the daemon running it hears of it at its next lease renewal (a second at --lease-s 4).
  const int64_t long_job = submit(*stubs[0], library, Routing{"", {"sm80"}}, 40);
  const std::string long_id = std::to_string(long_job);
  const auto under_way = std::chrono::steady_clock::now() + 120s;
  while (std::chrono::steady_clock::now() < under_way &&
         database.query("SELECT state FROM jobs WHERE id = " + long_id)[0][0] != "running")
    std::this_thread::sleep_for(100ms);
  ASSERT_EQ(database.query("SELECT state FROM jobs WHERE id = " + long_id)[0][0], "running");
  const auto cancel = daemons[0]->cli("cancel " + long_id);
  EXPECT_EQ(cancel.code, 0) << cancel.err;
  std::string long_state;
  const auto stopped = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < stopped) {
    long_state = database.query("SELECT state FROM jobs WHERE id = " + long_id)[0][0];
    if (long_state != "running") break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(long_state, "cancelled") << daemons[2]->log();
  EXPECT_NE(daemons[2]->log().find("cancelled from another daemon"), std::string::npos) << daemons[2]->log();

  constexpr int kJobs = 200;
  std::map<int64_t, Routing> asked;
  for (int i = 0; i < kJobs; ++i) {
    const Routing& routing = routings[i % routings.size()];
    const int64_t id = submit(*stubs[i % stubs.size()], library, routing);
    ASSERT_GT(id, 0);
    asked[id] = routing;
  }

  // Every daemon lists the fleet's four GPUs, each with its daemon's labels.
  const json listed = json_data(daemons[2]->cli("--json device"), "devices");
  std::map<std::string, int> names;
  for (const json& device : listed) ++names[device.value("name", "")];
  EXPECT_EQ(names["NVIDIA H200"], 1) << listed.dump();
  EXPECT_EQ(names["NVIDIA H100 80GB HBM3"], 2) << listed.dump();
  EXPECT_EQ(names["NVIDIA A100-SXM4-80GB"], 1) << listed.dump();
  std::map<std::string, std::string> host_of;  // GPU name -> host
  for (const json& device : listed) host_of[device.value("name", "")] = device.value("host", "");
  EXPECT_EQ(host_of["NVIDIA H200"], "node-h200") << listed.dump();
  EXPECT_EQ(host_of["NVIDIA H100 80GB HBM3"], "node-h100.rack2") << listed.dump();
  EXPECT_EQ(host_of["NVIDIA A100-SXM4-80GB"], "node-a100") << listed.dump();
  EXPECT_EQ(json_data(daemons[0]->cli("--json device --host node-h100.rack2"), "devices").size(), 2u);

  const auto all_ended = std::chrono::steady_clock::now() + 480s;
  std::string open = "?";
  while (std::chrono::steady_clock::now() < all_ended) {
    open = database.query("SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')")[0][0];
    if (open == "0") break;
    std::this_thread::sleep_for(500ms);
  }
  ASSERT_EQ(open, "0") << daemons[0]->log();

  // Each job: done once, one verdict, run on a GPU of its model by a daemon with its labels.
  const auto jobs = database.query(
                               "SELECT j.id, j.state, j.attempts, j.claimed_by, "
                               "(SELECT count(*) FROM verdicts v WHERE v.job_id = j.id), "
                               "(SELECT string_agg(DISTINCT r.gpu_name, ',') FROM runs r WHERE r.job_id = j.id), "
                               "COALESCE(j.error, '') || ' ' || j.disposition || ' ' || j.disposition_detail, "
                               "j.host, (SELECT string_agg(DISTINCT r.host, ',') FROM runs r WHERE r.job_id = j.id) "
                               "FROM jobs j WHERE j.id <> " + long_id + " ORDER BY j.id");
  ASSERT_EQ(jobs.size(), std::size_t(kJobs));
  std::map<std::string, int> ran_by;  // claimant -> jobs
  int unconstrained_spread = 0;
  for (const auto& row : jobs) {
    const int64_t id = std::stoll(row[0]);
    ASSERT_TRUE(asked.count(id)) << id;
    const Routing& routing = asked[id];
    EXPECT_EQ(row[1], "done") << "job " << id << ": " << row[6];
    EXPECT_EQ(row[2], "0") << "job " << id << " was taken back from a daemon";
    EXPECT_EQ(row[4], "1") << "job " << id << ": one verdict";
    int member = -1;
    for (std::size_t m = 0; m < daemons.size(); ++m)
      if (row[3].find(daemons[m]->dir()) != std::string::npos) member = int(m);
    ASSERT_GE(member, 0) << "job " << id << " claimed by " << row[3];
    ++ran_by[row[3]];
    const Member& by = members[member];
    EXPECT_EQ(row[3].rfind(by.host + ":", 0), 0u) << "job " << id << " claimed by " << row[3];
    EXPECT_EQ(row[7], by.host) << "job " << id << ": the claiming daemon's --host-name";
    EXPECT_EQ(row[8], by.host) << "job " << id << ": its runs' host";
    if (!routing.gpu_model.empty()) {
      EXPECT_EQ(qgate::normalize_gpu_model(by.model), qgate::normalize_gpu_model(routing.gpu_model)) << "job " << id;
      EXPECT_NE(row[5].find(by.model), std::string::npos) << "job " << id << " ran on " << row[5];
    }
    for (const std::string& label : routing.labels)
      EXPECT_NE(std::find(by.labels.begin(), by.labels.end(), label), by.labels.end())
          << "job " << id << " asks for " << label << " and ran on a daemon without it";
    if (routing.gpu_model.empty() && routing.labels.empty()) unconstrained_spread |= 1 << member;
  }
  EXPECT_EQ(ran_by.size(), daemons.size()) << "every daemon ran jobs";
  EXPECT_GT(__builtin_popcount(unconstrained_spread), 1) << "the jobs anyone may take went to more than one daemon";
  EXPECT_EQ(database.query("SELECT count(*) FROM runs WHERE state <> 'done' AND job_id <> " + long_id)[0][0],
            "0");
}

}  // namespace
