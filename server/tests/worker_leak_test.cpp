// Leak detection end to end on the CPU: the real `qgate-worker serve` runs a profile with the leak
// fault build (4 MiB of touched host memory per GEMM call, never freed) and with the reference
// build; its memory readings go to the leak judge, which must call the first a leak and the
// second not.
#include <gtest/gtest.h>

#include <cstdio>
#include <initializer_list>
#include <string>
#include <tuple>
#include <vector>

#include "qgate/server/leak_check.h"
#include "worker_process.h"

namespace {

using qgate::server::ArmMemory;
using qgate::server::judge_arm_memory;
using qgate::worker::testing::parse_records;
using qgate::worker::testing::run_worker_with_input;
using qgate::worker::testing::serialize_requests;
namespace v1 = qgate::v1;

constexpr int64_t MiB = int64_t(1) << 20;
constexpr int kRuns = 6;
// Two GEMMs, each called once for warm-up and twice timed per run: six calls, 24 MiB per run.
constexpr int kCallsPerRun = 2 * (1 + 2);

std::vector<v1::WorkerRequest> requests() {
  std::vector<v1::WorkerRequest> out;
  v1::WorkerRequest prepare;
  auto* p = prepare.mutable_prepare();
  p->set_tokens(8);
  p->set_seed(11);
  p->mutable_profile()->set_name("leak-check");
  for (auto [type, od, k] : {std::tuple{"q4_0", 128, 256}, std::tuple{"q8_0", 64, 256}}) {
    auto* g = p->mutable_profile()->add_gemms();
    g->set_type(type);
    g->set_od(od);
    g->set_k(k);
    g->set_count(1);
  }
  out.push_back(prepare);
  for (int i = 0; i < kRuns; ++i) {
    v1::WorkerRequest run;
    run.mutable_run()->set_run_id(i);
    run.mutable_run()->set_warmup(1);
    run.mutable_run()->set_repetitions(2);
    out.push_back(run);
  }
  v1::WorkerRequest stop;
  stop.set_shutdown(true);
  out.push_back(stop);
  return out;
}

/// Serves the profile with `build` and collects what the judge reads.
ArmMemory serve(const std::string& build) {
  ArmMemory arm;
  arm.arm = "A";
  const auto r = run_worker_with_input("serve --backend cpu --threads 2 --build " + build, serialize_requests(requests()));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const auto& rec : parse_records(r.out)) {
    if (rec.has_prepared()) {
      arm.prepared = rec.prepared();
      EXPECT_EQ(rec.prepared().outcome(), v1::CASE_OUTCOME_PASSED) << rec.prepared().message();
    }
    if (rec.has_profile_run()) {
      EXPECT_EQ(rec.profile_run().outcome(), v1::CASE_OUTCOME_PASSED) << rec.profile_run().message();
      arm.runs.push_back(rec.profile_run().memory());
    }
    if (rec.has_released()) arm.released = rec.released();
  }
  EXPECT_EQ(arm.runs.size(), size_t(kRuns));
  EXPECT_TRUE(arm.released.has_value()) << "serve must answer shutdown with ReleaseDone";
  std::printf("%s\n  before prepare %.1f MiB, after %.1f MiB\n", build.c_str(),
              double(arm.prepared.memory_before().host_anon_bytes()) / MiB,
              double(arm.prepared.memory_after().host_anon_bytes()) / MiB);
  for (const auto& m : arm.runs) std::printf("  run %.1f MiB (RSS %.1f MiB)\n", double(m.host_anon_bytes()) / MiB,
                                             double(m.host_rss_bytes()) / MiB);
  if (arm.released)
    std::printf("  released %.1f MiB\n", double(arm.released->memory().host_anon_bytes()) / MiB);
  return arm;
}

TEST(WorkerLeak, TheLeakBuildsReadingsGrowAndTheJudgeCallsItALeak) {
  const ArmMemory arm = serve(QGATE_FAULT_LEAK);
  ASSERT_EQ(arm.runs.size(), size_t(kRuns));
  // Every run keeps its calls' 4 MiB blocks: each reading is at least that much above the last.
  for (size_t i = 1; i < arm.runs.size(); ++i)
    EXPECT_GE(arm.runs[i].host_anon_bytes() - arm.runs[i - 1].host_anon_bytes(), kCallsPerRun * 4 * MiB - MiB)
        << "run " << i;
  const auto leak = judge_arm_memory(arm);
  ASSERT_TRUE(leak.has_value());
  EXPECT_EQ(leak->where(), "arm A across runs");
  EXPECT_GE(leak->host_bytes(), (kRuns - 1) * kCallsPerRun * 4 * MiB - 4 * MiB);
  EXPECT_EQ(leak->device_bytes(), 0);
  EXPECT_NE(leak->detail().find("host memory grew"), std::string::npos) << leak->detail();
  std::printf("judged: %s: %s\n", leak->where().c_str(), leak->detail().c_str());

  // With the growth readings gone (a worker that ran once per process), release still catches it.
  ArmMemory released_only = arm;
  released_only.runs.resize(1);
  const auto at_release = judge_arm_memory(released_only);
  ASSERT_TRUE(at_release.has_value());
  EXPECT_EQ(at_release->where(), "arm A at release");
  EXPECT_GE(at_release->host_bytes(), kRuns * kCallsPerRun * 4 * MiB - 8 * MiB);
}

TEST(WorkerLeak, TheReferenceBuildDoesNotLeak) {
  const ArmMemory arm = serve(QGATE_REF_LIBRARY);
  ASSERT_EQ(arm.runs.size(), size_t(kRuns));
  const auto leak = judge_arm_memory(arm);
  EXPECT_FALSE(leak.has_value()) << leak->where() << ": " << leak->detail();
  ASSERT_TRUE(arm.released.has_value());
  EXPECT_EQ(arm.released->released_gemms(), 2);
}

}  // namespace
