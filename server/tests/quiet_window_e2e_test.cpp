// Quiet-window re-measurement end to end: a real qgated whose co-tenant sampler replays a recorded
// trace (a busy foreign process, then quiet), driven through the real CLI. Covers `qgate device`'s
// live state, a re-measure that waits for the quiet window and is stored quiet, the trend filter,
// expiry at the deadline (exit 4), running contended when asked, and a daemon that cannot sample.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>

#include "daemon_under_test.h"

using namespace qgate::testing;

namespace {

const std::string kRef = QGATE_REF_LIBRARY;

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// A trace with a sample every 100 ms: sglang at 90% SM until busy_until_ms, then quiet. Replay
/// holds the last line, so a trace with busy_until_ms past its end stays busy.
void write_trace(const std::string& path, int64_t busy_until_ms, int64_t length_ms) {
  std::ofstream out(path);
  for (int64_t t = 0; t <= length_ms; t += 100) {
    const bool busy = t < busy_until_ms;
    out << R"({"t_ms":)" << t << R"(,"device_util":)" << (busy ? 97 : 0)
        << R"(,"sm_clock_mhz":1980,"max_sm_clock_mhz":1980,"clock_event_reasons":0,"foreign":)"
        << (busy ? R"([{"pid":4242,"name":"sglang","sm_percent":90,"used_memory_bytes":1073741824}])" : "[]")
        << "}\n";
  }
}

json jobs_of(const json& j) { return j.is_array() ? j : j["jobs"]; }

/// Protobuf's JSON writes int64 fields as strings.
int64_t as_id(const json& v) { return v.is_string() ? std::stoll(v.get<std::string>()) : v.get<int64_t>(); }

int64_t first_ab_job(DaemonUnderTest& d) {
  auto r = d.cli("--json ab --build " + kRef + " --name ref --profile cpu-tiny --max-pairs 2 --reps 3");
  EXPECT_LE(r.code, 2) << r.err;
  return as_id(json_data(r, "job")["id"]);
}

}  // namespace

TEST(QuietWindowEndToEnd, ARemeasureWaitsForTheQuietWindowAndIsStoredQuiet) {
  DaemonUnderTest d;
  const std::string trace = d.dir() + "/trace.jsonl";
  constexpr int64_t kBusyMs = 20'000;
  write_trace(trace, kBusyMs, kBusyMs + 1000);
  const int64_t t0 = wall_ms();
  std::string why;
  ASSERT_TRUE(d.try_start({"--replay-samples", trace, "--quiet-hold", "2"}, "", &why)) << why;

  // The device now: contended by sglang.
  auto dev = d.cli("--json device");
  ASSERT_EQ(dev.code, 0) << dev.err;
  const json now = json_data(dev, "device")["now"];
  EXPECT_EQ(now["state"], "contended") << now.dump();
  ASSERT_EQ(now["foreign"].size(), 1u) << now.dump();
  EXPECT_EQ(now["foreign"][0]["name"], "sglang");
  EXPECT_EQ(as_id(now["ms_since_quiet_window"]), -1) << "never quiet since the start";
  EXPECT_NE(d.cli("device").out.find("contended"), std::string::npos);

  // A measurement under that load is flagged contended.
  const int64_t original = first_ab_job(d);
  json first = show(d, original);
  ASSERT_LT(wall_ms() - t0, kBusyMs) << "the first job must run while the trace is busy";
  EXPECT_GT(first["verdict"]["contended_pairs"].get<int>(), 0) << first.dump();

  // Re-measure it: the job waits for quiet.
  auto rm = d.cli("--json remeasure " + std::to_string(original) + " --deadline 120s");
  ASSERT_EQ(rm.code, 0) << rm.err;
  const json queued = json_data(rm, "remeasure");
  ASSERT_EQ(queued["jobs"].size(), 1u) << rm.out;
  const int64_t again = as_id(queued["jobs"][0]["id"]);
  EXPECT_EQ(queued["jobs"][0]["state"], "JOB_STATE_WAITING_QUIET");
  EXPECT_EQ(as_id(queued["jobs"][0]["spec"]["remeasure_of"]), original) << queued.dump();
  // A second request for the same job is reported, not queued twice.
  const json dup = json_data(d.cli("--json remeasure " + std::to_string(original)), "remeasure");
  EXPECT_FALSE(dup.contains("jobs") && dup["jobs"].size() > 0) << dup.dump();
  EXPECT_EQ(as_id(dup["skipped_job_ids"][0]), original) << dup.dump();
  auto waiting = json_data(d.cli("--json jobs --state waiting-quiet"), "jobs");
  ASSERT_EQ(jobs_of(waiting).size(), 1u);
  EXPECT_EQ(json_data(d.cli("--json device"), "device")["now"]["waiting_jobs"], 1);

  // It runs once the trace turns quiet and the 2 s hold has passed, and its runs are quiet.
  auto w = d.cli("watch " + std::to_string(again));
  EXPECT_LE(w.code, 2) << w.err;
  json remeasured = show(d, again);
  EXPECT_EQ(remeasured["state"], "JOB_STATE_DONE") << remeasured.dump();
  EXPECT_GE(as_id(remeasured["started_unix_ms"]), t0 + kBusyMs + 2000)
      << "started before the quiet window: " << remeasured.dump();
  EXPECT_EQ(remeasured["verdict"]["contended_pairs"].get<int>(), 0) << remeasured.dump();
  const json after = json_data(d.cli("--json device"), "device")["now"];
  EXPECT_EQ(after["state"], "quiet") << after.dump();
  EXPECT_EQ(as_id(after["ms_since_quiet_window"]), 0);

  // Trends show the quiet re-measure by default, and the contended original only when asked.
  auto quiet_points = json_data(d.cli("--json trend --profile cpu-tiny"), "points");
  auto all_points = json_data(d.cli("--json trend --profile cpu-tiny --include-contended"), "points");
  const auto& q = quiet_points.is_array() ? quiet_points : quiet_points["points"];
  const auto& a = all_points.is_array() ? all_points : all_points["points"];
  ASSERT_FALSE(q.empty());
  for (const auto& p : q) EXPECT_EQ(as_id(p["job_id"]), again) << p.dump();
  // A point is the build's per series: the contended runs join the same points when asked for.
  int quiet_runs = 0, all_runs = 0, contended_runs = 0;
  for (const auto& p : q) quiet_runs += p["runs"].get<int>();
  for (const auto& p : a) {
    all_runs += p["runs"].get<int>();
    contended_runs += p.value("contended_runs", 0);
  }
  EXPECT_GT(all_runs, quiet_runs);
  EXPECT_EQ(all_runs - quiet_runs, contended_runs) << a.dump();
}

TEST(QuietWindowEndToEnd, ARemeasureExpiresAtItsDeadlineOrRunsContendedIfAsked) {
  DaemonUnderTest d;
  const std::string trace = d.dir() + "/trace.jsonl";
  write_trace(trace, 1'000'000, 1000);  // busy for good
  std::string why;
  ASSERT_TRUE(d.try_start({"--replay-samples", trace, "--quiet-hold", "1"}, "", &why)) << why;
  const int64_t original = first_ab_job(d);

  auto expired = d.cli("remeasure " + std::to_string(original) + " --deadline 2s --wait");
  EXPECT_EQ(expired.code, 4) << "exit 4: no quiet window before the deadline\n" << expired.out << expired.err;
  const json jobs = jobs_of(json_data(d.cli("--json jobs"), "jobs"));
  EXPECT_EQ(jobs[0]["state"], "JOB_STATE_EXPIRED") << jobs[0].dump();
  EXPECT_NE(jobs[0]["error"].get<std::string>().find("quiet"), std::string::npos) << jobs[0].dump();
  EXPECT_FALSE(jobs[0].contains("verdict") && jobs[0]["verdict"].contains("pairs")) << "no half verdict";

  auto forced = d.cli("--json remeasure " + std::to_string(original) + " --deadline 1s --run-contended");
  ASSERT_EQ(forced.code, 0) << forced.err;
  const int64_t forced_job = as_id(json_data(forced, "remeasure")["jobs"][0]["id"]);
  auto w = d.cli("watch " + std::to_string(forced_job));
  EXPECT_LE(w.code, 2) << w.err;
  const json ran = show(d, forced_job);
  EXPECT_EQ(ran["state"], "JOB_STATE_DONE");
  EXPECT_GT(ran["verdict"]["contended_pairs"].get<int>(), 0) << "ran under the load, and says so";

  // --contended finds every finished job with a contended run.
  auto all = d.cli("--json remeasure --contended --since 1h --deadline 1s");
  ASSERT_EQ(all.code, 0) << all.err;
  const json all_jobs = json_data(all, "remeasure")["jobs"];
  EXPECT_GE(all_jobs.size(), 1u) << all.out;
  for (const auto& j : all_jobs) EXPECT_EQ(as_id(j["spec"]["remeasure_of"]), original) << j.dump();

  // Bad requests get a clear error and exit 3.
  auto neither = d.cli("remeasure");
  EXPECT_EQ(neither.code, 3);
  EXPECT_NE(neither.err.find("job id or --contended"), std::string::npos) << neither.err;
  auto missing = d.cli("remeasure 9999");
  EXPECT_EQ(missing.code, 3);
  EXPECT_NE(missing.err.find("no job 9999"), std::string::npos) << missing.err;
}

TEST(QuietWindowEndToEnd, ADaemonThatCannotSampleRefusesToRemeasure) {
  DaemonUnderTest d;
  d.start();  // CPU backend, no sampler
  const int64_t original = first_ab_job(d);
  auto r = d.cli("remeasure " + std::to_string(original));
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("never find a quiet window"), std::string::npos) << r.err;
  const json now = json_data(d.cli("--json device"), "device")["now"];
  EXPECT_EQ(now["state"], "unavailable") << now.dump();
}
