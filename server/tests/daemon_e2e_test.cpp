// qgated end to end: a real daemon on a temp socket with a temp database, driven through the real
// qgate CLI. Covers submit/watch/verdict, an A/A gate, trend and compare, kill -9 in the middle of a
// job with a restart, and bad requests (an unknown job, an empty upload, a wrong-type field).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "qgate/profiles/gguf.h"
#include "qgate/v1/harness.grpc.pb.h"
#include "daemon_under_test.h"

using namespace std::chrono_literals;
using nlohmann::json;

using namespace qgate::testing;

namespace {
// The runs behind trend points: each point summarises a job's runs of one series.
int run_count(const json& points) {
  int runs = 0;
  for (const auto& p : points) runs += p["runs"].get<int>();
  return runs;
}
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
  auto list = json_data(jobs, "jobs");
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
  auto points = json_data(t, "points");
  const auto& pts = points.is_array() ? points : points["points"];
  // A point per build, series (each arm's path) and week, summarising that arm's runs: one job here.
  EXPECT_EQ(run_count(pts), 2 * v["pairs"].get<int>()) << "every run of both arms is in the history";
  EXPECT_LE(pts.size(), 2u) << pts.dump();
  for (const auto& p : pts) {
    EXPECT_EQ(p["job_id"], job) << p.dump();
    EXPECT_LE(p["tokens_per_s_low"].get<double>(), p["tokens_per_s"].get<double>()) << p.dump();
    EXPECT_GE(p["tokens_per_s_high"].get<double>(), p["tokens_per_s"].get<double>()) << p.dump();
    EXPECT_EQ(p["backend"], "cpu") << p.dump();
  }
  // The runs behind the points, one query away.
  auto raw = json_data(d.cli("--json trend --profile cpu-tiny --job " + std::to_string(job)), "points");
  EXPECT_EQ(int(raw.size()), 2 * v["pairs"].get<int>()) << raw.dump();
  auto human = d.cli("trend --profile cpu-tiny");
  EXPECT_EQ(human.code, 0) << human.err;
  EXPECT_NE(human.out.find("ref"), std::string::npos) << human.out;
  {  // each weight type of the profile is a series of its own: a run's q4_K GEMMs, timed apart
    auto typed = d.cli("--json trend --profile cpu-tiny --type q4_K");
    ASSERT_EQ(typed.code, 0) << typed.err;
    const auto typed_points = json_data(typed, "points");
    ASSERT_FALSE(typed_points.empty()) << typed.out;
    EXPECT_EQ(run_count(typed_points), 2 * v["pairs"].get<int>()) << "every run has a q4_K part";
    for (const auto& p : typed_points) {
      EXPECT_EQ(p["weight_type"], "q4_K") << p.dump();
      EXPECT_GT(p["tokens_per_s"].get<double>(), 0) << p.dump();
    }
    // Each part is its own series: the q4_K share of a run is faster than the whole run.
    double whole = 0, part = 0;
    for (const auto& p : pts) whole = std::max(whole, p["tokens_per_s"].get<double>());
    for (const auto& p : typed_points) part = std::max(part, p["tokens_per_s"].get<double>());
    EXPECT_GT(part, whole) << typed.out;
    auto table = d.cli("trend --profile cpu-tiny --type q4_K");
    EXPECT_EQ(table.code, 0) << table.err;
    EXPECT_NE(table.out.find("q4_K"), std::string::npos) << table.out;
  }

  auto csv = d.cli("export --format csv --profile cpu-tiny");
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 1 + 2 * v["pairs"].get<int>()) << "a header and a row per run";
  EXPECT_NE(csv.out.find("tokens_per_s"), std::string::npos) << csv.out.substr(0, 200);
  {  // each row names its tokens and GPU (columns looked up by the header's names)
    std::istringstream lines(csv.out);
    std::string header, row;
    std::getline(lines, header);
    std::getline(lines, row);
    auto fields = [](const std::string& line) {
      std::vector<std::string> out;
      std::istringstream in(line);
      for (std::string field; std::getline(in, field, ',');) out.push_back(field);
      if (!line.empty() && line.back() == ',') out.emplace_back();  // getline drops an empty last field
      return out;
    };
    const auto names = fields(header), values = fields(row);
    ASSERT_EQ(names.size(), values.size()) << header << "\n" << row;
    auto value_of = [&](const std::string& name) {
      const auto at = std::find(names.begin(), names.end(), name);
      return at == names.end() ? std::string("<no column " + name + ">") : values[size_t(at - names.begin())];
    };
    EXPECT_GT(std::stoll(value_of("tokens")), 0) << row;
    EXPECT_FALSE(value_of("gpu").empty()) << row;
    EXPECT_EQ(value_of("runs"), "1") << row;
  }
  auto exported = d.cli("export --format json --profile cpu-tiny");
  ASSERT_EQ(exported.code, 0) << exported.err;
  EXPECT_EQ(int(json_data(exported, "points").size()), 2 * v["pairs"].get<int>())
      << "export writes the --json envelope too, a point per run";

  // One build against itself would compare its runs with themselves: refused (compare_e2e_test covers compare).
  auto c = d.cli("--json compare ref ref");
  EXPECT_EQ(c.code, 3) << c.out;
  EXPECT_NE(c.err.find("the same build"), std::string::npos) << c.err;
  auto b = d.cli("--json builds");
  EXPECT_EQ(b.code, 0) << b.err;
  EXPECT_EQ(json_data(b, "builds")[0]["metadata"]["name"], "ref") << b.out;
  auto dev = d.cli("--json device");
  EXPECT_EQ(dev.code, 0) << dev.err;
  EXPECT_EQ(json_data(dev, "device")["backend"], "cpu") << dev.out;

  // Every read command's context block names the daemon's host, device and version and the CLI's.
  for (const std::string& command : std::vector<std::string>{"jobs", "show " + std::to_string(job), "trend --profile cpu-tiny",
                                                              "builds", "device", "watch " + std::to_string(job)}) {
    const auto out = d.cli("--json " + command);
    const json context = json::parse(out.out)["context"];
    EXPECT_FALSE(context.value("host", "").empty()) << command << ": " << out.out;
    EXPECT_EQ(context.value("backend", ""), "cpu") << command;
    EXPECT_EQ(context.value("gpu_name", ""), "cpu") << command;
    EXPECT_EQ(context.value("driver_version", "?"), "") << command << ": the CPU backend has no driver";
    EXPECT_FALSE(context.value("qgate_version", "").empty()) << command;
    EXPECT_FALSE(context.value("cli_version", "").empty()) << command;
    EXPECT_FALSE(context.contains("error")) << command << ": " << out.out;
  }
  const json exported_context = json::parse(exported.out)["context"];
  EXPECT_EQ(exported_context.value("backend", ""), "cpu") << exported.out;
}

TEST(DaemonEndToEnd, AnAaGateComesOutPassOrSame) {
  DaemonUnderTest d;
  d.start();
  // The baseline: the reference build, uploaded first (parity-only job keeps it quick to store).
  // The quick set: the daemon's machinery is under test here; the full standard sweep runs in
  // qgate_parity_sweep_cpu_test and in the main job.
  const int64_t first = submit_no_wait(d, "--name ref --kind parity --parity-shapes quick");
  auto w = d.cli("watch " + std::to_string(first));
  ASSERT_EQ(w.code, 0) << "the reference build passes its parity sweep: " << w.err << w.out;
  json pj = show(d, first);
  EXPECT_EQ(pj["verdict"]["parity_passed"].get<int>(), 192) << "8 types x (7 shapes + 5 edge rows) x 2 paths" << pj.dump();

  // Gate the same bytes against themselves: an A/A run must not read as a slowdown. A shared
  // 2-core CPU swings runs of a few milliseconds by 10-20%, so this gate's policy allows a 25%
  // slowdown: the test is about the machinery (pairs, interval, verdict), not the CPU's precision.
  auto r = d.cli("submit --build " + std::string(QGATE_REF_LIBRARY) +
                 " --name ref --baseline ref --profile cpu-tiny --max-pairs 24 --reps 9 --threshold 0.25 "
                 "--parity-shapes quick --wait");
  EXPECT_EQ(r.code, 0) << "A/A gate must PASS: " << r.out << r.err;
  auto jobs = json_data(d.cli("--json jobs"), "jobs");
  const auto& arr = jobs.is_array() ? jobs : jobs["jobs"];
  const auto& latest = arr[0];
  EXPECT_EQ(latest["verdict"]["verdict"], "VERDICT_PASS") << latest.dump();
  const std::string cmp = latest["verdict"].value("comparison", "");
  EXPECT_NE(cmp, "COMPARISON_DIFFERENT") << latest.dump();
}

TEST(DaemonEndToEnd, AJobInterruptedByKill9FinishesAfterRestart) {
  DaemonUnderTest d;
  d.start();
  const int64_t job = submit_no_wait(d, "--name ref --kind parity --parity-shapes quick");
  // Kill it mid-sweep: as soon as it is running and has finished a parity case. A fixed sleep
  // raced the job's own length (192 cases take 2 s on a fast CPU and minutes on a slow one).
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  json j = show(d, job);
  while ((state_of(j) != "JOB_STATE_RUNNING" || j["progress"]["parity_done"].get<int>() == 0) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
    j = show(d, job);
  }
  ASSERT_EQ(state_of(j), "JOB_STATE_RUNNING") << j.dump();
  ASSERT_LT(j["progress"]["parity_done"].get<int>(), j["progress"]["parity_total"].get<int>()) << j.dump();
  d.kill9();
  d.start();
  EXPECT_NE(d.log().find("job " + std::to_string(job) + " was running when the daemon stopped; re-queued"),
            std::string::npos)
      << d.log();
  auto w = d.cli("watch " + std::to_string(job));
  EXPECT_EQ(w.code, 0) << w.err << w.out;
  j = show(d, job);
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
    req.mutable_header()->set_size_bytes(4096);
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
  auto list = json_data(jobs, "jobs");
  EXPECT_EQ((list.is_array() ? list : list["jobs"]).size(), 0u) << jobs.out;
  auto builds = d.cli("--json builds");
  EXPECT_EQ(builds.out.find("empty"), std::string::npos);
}

TEST(DaemonEndToEnd, SigtermStopsPromptlyAndARunningJobIsRunAgainAtRestart) {
  DaemonUnderTest d;
  d.start();
  EXPECT_TRUE(d.terminate(10s)) << "an idle daemon must stop on SIGTERM:\n" << d.log();
  d.start();
  const int64_t job = submit_no_wait(d, "--name ref --kind parity --parity-shapes quick");
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

TEST(DaemonEndToEnd, AProfileReadFromAGgufHeader) {
  DaemonUnderTest d;
  d.start();
  // A small GGUF written here: two layers of a toy model, q4_0 attention, q4_K/q6_K FFN, an f32
  // norm and an embedding that are not GEMMs.
  using qgate::profiles::GgufKeyValue;
  using qgate::profiles::GgufTensorInfo;
  using qgate::profiles::GgufValue;
  auto tensor = [](std::string name, uint32_t type, std::vector<uint64_t> ne) {
    GgufTensorInfo t;
    t.name = std::move(name);
    t.type = type;
    t.n_dims = uint32_t(ne.size());
    for (size_t i = 0; i < ne.size(); ++i) t.ne[i] = ne[i];
    return t;
  };
  std::vector<GgufTensorInfo> tensors = {tensor("token_embd.weight", 2, {256, 512})};
  for (int l = 0; l < 2; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    tensors.push_back(tensor(b + "attn_norm.weight", 0, {256}));
    tensors.push_back(tensor(b + "attn_q.weight", 2, {256, 256}));
    tensors.push_back(tensor(b + "ffn_up.weight", 12, {256, 512}));
    tensors.push_back(tensor(b + "ffn_down.weight", 14, {512, 256}));
  }
  std::vector<GgufKeyValue> metadata = {{"general.name", GgufValue::of_string("toy-2l")}};
  const auto bytes = qgate::profiles::write_gguf_header(tensors, metadata);
  const std::string path = d.dir() + "/toy.gguf";
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));

  auto r = d.cli("--json submit --build " + std::string(QGATE_REF_LIBRARY) + " --name ref --kind ab --gguf " + path +
                 " --tokens 16 --max-pairs 4 --wait");
  ASSERT_LE(r.code, 2) << r.err;
  auto jobs = json_data(d.cli("--json jobs"), "jobs");
  const auto& job = (jobs.is_array() ? jobs : jobs["jobs"])[0];
  EXPECT_EQ(job["verdict"]["profile"], "toy-2l") << job.dump();
  EXPECT_EQ(job["verdict"]["tokens"].get<int>(), 16);
  EXPECT_EQ(job["spec"]["custom_profile"]["gemms"].size(), 3u) << "q, up and down, merged over the two layers";
  std::set<std::string> types;
  for (const auto& t : job["verdict"]["per_type"]) types.insert(t["weight_type"].get<std::string>());
  EXPECT_EQ(types, (std::set<std::string>{"q4_0", "q4_K", "q6_K"}));

  // A file that is not GGUF is refused by the CLI before anything is sent.
  std::ofstream(d.dir() + "/bad.gguf") << "not a gguf file";
  r = d.cli("submit --build " + std::string(QGATE_REF_LIBRARY) + " --name ref --kind ab --gguf " + d.dir() + "/bad.gguf");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("cannot read a profile"), std::string::npos) << r.err;
}

TEST(DaemonEndToEnd, AWorkerThatDiesIsRestartedAndItsRunRetriedOnce) {
  DaemonUnderTest d;
  // Without the worker sandbox: the crash_once build's marker file lies in the build tree, which the
  // sandbox keeps read-only.
  std::string why;
  ASSERT_TRUE(d.try_start({"--worker-sandbox", "off"}, "", &why)) << why;
  std::filesystem::remove(std::string(QGATE_FAULT_CRASH_ONCE_MARKER));
  // The first timed run anywhere segfaults; the restarted worker's retry works.
  auto r = d.cli("submit --build " + std::string(QGATE_FAULT_CRASH_ONCE) +
                 " --name crash-once --kind ab --profile cpu-tiny --max-pairs 4 --wait");
  EXPECT_LE(r.code, 2) << "the job must survive one worker death: " << r.out << r.err;
  EXPECT_TRUE(std::filesystem::exists(std::string(QGATE_FAULT_CRASH_ONCE_MARKER))) << "the fault fired";
  auto jobs = json_data(d.cli("--json jobs"), "jobs");
  const auto& job = (jobs.is_array() ? jobs : jobs["jobs"])[0];
  EXPECT_EQ(job["state"], "JOB_STATE_DONE") << job.dump();
  std::filesystem::remove(std::string(QGATE_FAULT_CRASH_ONCE_MARKER));

  // A build that always crashes: one retry, then the job fails with the signal in its reason, and
  // the daemon goes on serving.
  r = d.cli("submit --build " + std::string(QGATE_FAULT_CRASH_RUN) +
            " --name crash-run --kind ab --profile cpu-tiny --max-pairs 4 --wait");
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  jobs = json_data(d.cli("--json jobs"), "jobs");
  const auto& failed = (jobs.is_array() ? jobs : jobs["jobs"])[0];
  EXPECT_EQ(failed["state"], "JOB_STATE_FAILED") << failed.dump();
  const std::string error = failed["error"].get<std::string>();
  EXPECT_NE(error.find("failed twice"), std::string::npos) << error;
  EXPECT_NE(error.find("signal 11"), std::string::npos) << error;
  auto dev = d.cli("device");
  EXPECT_EQ(dev.code, 0) << dev.err;
}

namespace {

/// argv[1] of process `pid` ("parity" for a parity worker, "judge" for its judge), "" when gone.
std::string subcommand_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string argv0, argv1;
  std::getline(in, argv0, '\0');
  std::getline(in, argv1, '\0');
  return argv1;
}

/// The first child of `parent` that is a parity worker (qgate-worker parity), 0 when there is none.
/// A killed worker's judge is adopted by qgated too: it is not one.
pid_t worker_child_of(pid_t parent) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string text;
    if (!std::getline(stat, text)) continue;
    const size_t open = text.find('('), close = text.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    long ppid = 0;
    char state = 0;
    if (std::sscanf(text.c_str() + close + 1, " %c %ld", &state, &ppid) != 2) continue;
    if (ppid == parent && state != 'Z' && text.compare(open + 1, close - open - 1, "qgate-worker") == 0 &&
        subcommand_of(pid_t(std::stol(name))) == "parity")
      return pid_t(std::stol(name));
  }
  return 0;
}

}  // namespace

// Something other than qgated (the OOM killer, an operator) kills the parity worker: the sweep runs
// again once, from its start, and the job ends as the build deserves.
TEST(DaemonEndToEnd, AParityWorkerKilledFromOutsideIsRunAgainOnce) {
  DaemonUnderTest d;
  d.start();
  auto submitted = d.cli("--json submit --build " + std::string(QGATE_REF_LIBRARY) +
                         " --name ref --kind parity --parity-shapes quick");
  ASSERT_EQ(submitted.code, 0) << submitted.err;
  const int64_t id = json_data(submitted, "submission")["job_id"].get<int64_t>();
  pid_t worker = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (worker == 0 && std::chrono::steady_clock::now() < deadline) {
    worker = worker_child_of(d.pid());
    if (worker == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GT(worker, 0) << "no parity worker appeared";
  ASSERT_EQ(::kill(worker, SIGKILL), 0);
  EXPECT_EQ(d.cli("watch " + std::to_string(id)).code, 0) << d.log();
  const json job = show(d, id);
  EXPECT_EQ(job.value("disposition", ""), "DISPOSITION_OK") << job.dump();
  EXPECT_EQ(job["verdict"].value("parity_passed", 0), 192) << job.dump();

  // Killed from outside on the retry too: the job ends CRASHED with the signal, not a third run.
  // The standard sweep: long enough that both kills land while a sweep is running.
  submitted = d.cli("--json submit --build " + std::string(QGATE_REF_LIBRARY) +
                    " --name ref --kind parity --parity-shapes standard");
  ASSERT_EQ(submitted.code, 0) << submitted.err;
  const int64_t twice = json_data(submitted, "submission")["job_id"].get<int64_t>();
  for (int kill_number = 0; kill_number < 2; ++kill_number) {
    pid_t w = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while ((w == 0 || w == worker) && std::chrono::steady_clock::now() < until) {
      w = worker_child_of(d.pid());
      if (w == 0 || w == worker) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_GT(w, 0) << "no parity worker for kill " << kill_number;
    ASSERT_EQ(::kill(w, SIGKILL), 0);
    worker = w;
  }
  d.cli("watch " + std::to_string(twice));
  const json failed = show(d, twice);
  EXPECT_EQ(failed.value("disposition", ""), "DISPOSITION_CRASHED") << failed.dump();
  EXPECT_NE(failed.value("error", "").find("signal 9"), std::string::npos) << failed.dump();
}

TEST(DaemonEndToEnd, CancelAQueuedAndARunningJob) {
  DaemonUnderTest d;
  d.start();
  const int64_t running = submit_no_wait(d, "--name ref --kind parity");
  const int64_t queued = submit_no_wait(d, "--name ref --kind parity");
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (state_of(show(d, running)) != "JOB_STATE_RUNNING" && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(100ms);
  auto r = d.cli("cancel " + std::to_string(queued));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(state_of(show(d, queued)), "JOB_STATE_CANCELLED");
  r = d.cli("cancel " + std::to_string(running));
  EXPECT_EQ(r.code, 0) << r.err;
  auto w = d.cli("watch " + std::to_string(running));
  EXPECT_EQ(w.code, 3) << "a cancelled job is no verdict: " << w.out << w.err;
  EXPECT_EQ(state_of(show(d, running)), "JOB_STATE_CANCELLED");
  r = d.cli("cancel " + std::to_string(running));
  EXPECT_EQ(r.code, 3) << "a job that has ended cannot be cancelled";
  EXPECT_NE(r.err.find("already ended"), std::string::npos) << r.err;
}

TEST(DaemonEndToEnd, OnTcpSubmitAndCancelNeedTheToken) {
  DaemonUnderTest d;
  const std::string token_file = d.dir() + "/token";
  std::ofstream(token_file) << "s3cret-token-0123456789\n";
  std::string why;
  ASSERT_TRUE(d.try_start({"--auth-token-file", token_file}, "127.0.0.1:0", &why)) << why;
  const std::string server = d.address();
  ASSERT_NE(server.find("127.0.0.1:"), std::string::npos) << server;
  const std::string submit = "submit --build " + std::string(QGATE_REF_LIBRARY) + " --name ref --kind parity --parity-shapes quick";

  auto r = d.cli_at(server, submit);
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("need a token"), std::string::npos) << r.err;
  const std::string wrong = d.dir() + "/wrong";
  std::ofstream(wrong) << "not-the-token-at-all-000";
  r = d.cli_at(server, "--token-file " + wrong + " " + submit);
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("not the one"), std::string::npos) << r.err;
  r = d.cli_at(server, "--token-file " + token_file + " " + submit);
  EXPECT_EQ(r.code, 0) << r.err;
  // Reads stay open; cancel needs the token too.
  auto jobs = d.cli_at(server, "--json jobs");
  EXPECT_EQ(jobs.code, 0) << jobs.err;
  r = d.cli_at(server, "cancel 1");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("token"), std::string::npos) << r.err;
}

TEST(DaemonEndToEnd, ANonLoopbackAddressNeedsTlsAndATokenOrInsecure) {
  DaemonUnderTest d;
  std::string why;
  EXPECT_FALSE(d.try_start({}, "0.0.0.0:0", &why));
  EXPECT_NE(why.find("refusing to listen on 0.0.0.0:0 without TLS and a token"), std::string::npos) << why;

  // With TLS and a token it listens, and a client that trusts the certificate gets through.
  const std::string cert = d.dir() + "/cert.pem", key = d.dir() + "/key.pem", token = d.dir() + "/token";
  const std::string openssl = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
                              "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " + key + " -out " + cert +
                              " >/dev/null 2>&1";
  ASSERT_EQ(std::system(openssl.c_str()), 0) << "openssl could not make a test certificate";
  std::ofstream(token) << "tls-token-0123456789abcdef";
  ASSERT_TRUE(d.try_start({"--tls-cert", cert, "--tls-key", key, "--auth-token-file", token}, "0.0.0.0:0", &why)) << why;
  const std::string port = d.address().substr(d.address().rfind(':'));
  auto r = d.cli_at("localhost" + port, "--tls-ca " + cert + " --token-file " + token + " --json device");
  EXPECT_EQ(r.code, 0) << r.err;
  r = d.cli_at("localhost" + port, "--json device");
  EXPECT_EQ(r.code, 3) << "a plaintext client cannot talk to a TLS daemon";
  d.kill9();
  // --insecure is the explicit opt-out.
  ASSERT_TRUE(d.try_start({"--insecure"}, "0.0.0.0:0", &why)) << why;
}

TEST(DaemonEndToEnd, HostNameNamesTheHostItsGpusAreListedUnder) {
  DaemonUnderTest d;
  std::string why;
  EXPECT_FALSE(d.try_start({"--host-name", "two words"}, "", &why));
  EXPECT_NE(why.find("host name 'two words' must be"), std::string::npos) << why;
  ASSERT_TRUE(d.try_start({"--host-name", "gpu-node-7"}, "", &why)) << why;
  EXPECT_EQ(json_data(d.cli("--json device"), "device").value("host", ""), "gpu-node-7");
  EXPECT_EQ(json_data(d.cli("--json device --host gpu-node-7"), "device").value("host", ""), "gpu-node-7");
  const auto elsewhere = d.cli("device --host another-node");
  EXPECT_EQ(elsewhere.code, 3);
  EXPECT_NE(elsewhere.err.find("no GPU of host another-node"), std::string::npos) << elsewhere.err;
}

TEST(DaemonEndToEnd, EveryRunCarriesItsCoTenantLoadAndTrendsDefaultToQuietRuns) {
  // Two recorded traces replayed by the sampler: a GPU shared with a busy foreign process, and a
  // quiet one. Replay holds the last reading, so one line is a steady state.
  for (const bool busy : {true, false}) {
    DaemonUnderTest d;
    const std::string trace = d.dir() + "/trace.jsonl";
    std::ofstream(trace) << (busy ? R"({"t_ms":0,"device_util":99,"sm_clock_mhz":1815,"max_sm_clock_mhz":1980,)"
                                    R"("clock_event_reasons":4,"foreign":[{"pid":4242,"name":"sglang","sm_percent":96}]})"
                                  : R"({"t_ms":0,"device_util":0,"sm_clock_mhz":1980,"max_sm_clock_mhz":1980,)"
                                    R"("clock_event_reasons":0,"foreign":[]})")
                         << "\n";
    std::string why;
    ASSERT_TRUE(d.try_start({"--replay-samples", trace}, "", &why)) << why;
    auto r = d.cli("ab --build " + std::string(QGATE_REF_LIBRARY) + " --name ref --profile cpu-tiny --max-pairs 4");
    ASSERT_LE(r.code, 2) << r.err;
    auto jobs = json_data(d.cli("--json jobs"), "jobs");
    const auto& v = (jobs.is_array() ? jobs : jobs["jobs"])[0]["verdict"];
    const int pairs = v["pairs"].get<int>();
    EXPECT_EQ(v["contended_pairs"].get<int>(), busy ? pairs : 0) << v.dump();

    auto quiet_only = json_data(d.cli("--json trend --profile cpu-tiny"), "points");
    auto all = json_data(d.cli("--json trend --profile cpu-tiny --include-contended"), "points");
    const auto& q = quiet_only.is_array() ? quiet_only : quiet_only["points"];
    const auto& a = all.is_array() ? all : all["points"];
    EXPECT_EQ(run_count(a), 2 * pairs);
    EXPECT_EQ(run_count(q), busy ? 0 : 2 * pairs) << "trends leave contended runs out unless asked";
    for (const auto& p : a) {
      EXPECT_EQ(p["contended"].get<bool>(), busy) << p.dump();
      EXPECT_TRUE(p["cotenant_known"].get<bool>()) << p.dump();
    }
    if (busy) {
      auto human = d.cli("trend --profile cpu-tiny --include-contended");
      EXPECT_NE(human.out.find("*"), std::string::npos) << "contended runs are marked: " << human.out;
    }
  }
}

TEST(DaemonEndToEnd, WithoutASamplerRunsSayUnavailableNeverQuiet) {
  DaemonUnderTest d;
  d.start();  // the CPU backend: no GPU to sample
  auto dev = d.cli("--json device");
  EXPECT_NE(dev.out.find("unavailable"), std::string::npos) << dev.out;
  auto r = d.cli("ab --build " + std::string(QGATE_REF_LIBRARY) + " --name ref --profile cpu-tiny --max-pairs 4");
  ASSERT_LE(r.code, 2) << r.err;
  EXPECT_NE(r.out.find("cotenant=unavailable"), std::string::npos) << r.out;
  auto all = json_data(d.cli("--json trend --profile cpu-tiny"), "points");
  for (const auto& p : (all.is_array() ? all : all["points"])) EXPECT_FALSE(p["cotenant_known"].get<bool>()) << p.dump();
}
