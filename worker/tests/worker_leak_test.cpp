// Leak detection end to end: the real `qgate-worker serve` runs a profile with the leak fault
// build and with the reference build, and its memory readings go to the leak judge, which must call
// the first a leak and the second not. On the CPU (this binary's default) the leak build keeps 4 MiB
// of touched host memory per GEMM call; built with QGATE_LEAK_BACKEND="cuda" (the gpu-labelled
// variant) it keeps 64 MiB of device memory per call, and a kernel that faults must be reported
// with the build call that lost the context.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <tuple>
#include <vector>

#include "qgate/server/leak_check.h"
#include "worker_process.h"

#ifndef QGATE_LEAK_BACKEND
#define QGATE_LEAK_BACKEND "cpu"
#endif

namespace {

using qgate::server::ArmMemory;
using qgate::server::judge_arm_memory;
using qgate::worker::testing::parse_records;
using qgate::worker::testing::run_worker_with_input;
using qgate::worker::testing::serialize_requests;
namespace v1 = qgate::v1;

constexpr int64_t MiB = int64_t(1) << 20;
constexpr int kRuns = 6;
// Two GEMMs, each called once for warm-up and twice timed per run: six calls per run.
constexpr int kCallsPerRun = 2 * (1 + 2);
const bool kCuda = std::string(QGATE_LEAK_BACKEND) == "cuda";
// What the leak build keeps per call, and where.
const int64_t kLeakPerCall = kCuda ? 64 * MiB : 4 * MiB;
int64_t leaking_figure(const v1::MemoryReading& r) { return kCuda ? r.device_bytes() : r.host_anon_bytes(); }

/// A build's path: the environment variable `env` when set (a bundle on a GPU host), else `built`.
std::string build_path(const char* env, const char* built) {
  const char* value = std::getenv(env);
  return value && *value ? value : built;
}

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

/// Serves the profile with `build`.
std::vector<v1::WorkerRecord> serve_records(const std::string& build) {
  const auto r = run_worker_with_input("serve --backend " QGATE_LEAK_BACKEND " --threads 2 --build " + build,
                                       serialize_requests(requests()));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return parse_records(r.out);
}

/// Serves the profile with `build` and collects what the judge reads.
ArmMemory serve(const std::string& build) {
  ArmMemory arm;
  arm.arm = "A";
  for (const auto& rec : serve_records(build)) {
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
  const char* what = kCuda ? "device" : "host (anonymous)";
  std::printf("%s, %s memory:\n  before prepare %.1f MiB, after %.1f MiB\n", build.c_str(), what,
              double(leaking_figure(arm.prepared.memory_before())) / MiB,
              double(leaking_figure(arm.prepared.memory_after())) / MiB);
  for (const auto& m : arm.runs) std::printf("  run %.1f MiB\n", double(leaking_figure(m)) / MiB);
  if (arm.released) std::printf("  released %.1f MiB\n", double(leaking_figure(arm.released->memory())) / MiB);
  return arm;
}

TEST(WorkerLeak, TheLeakBuildsReadingsGrowAndTheJudgeCallsItALeak) {
  const ArmMemory arm = serve(build_path("QGATE_FAULT_LEAK", QGATE_FAULT_LEAK));
  ASSERT_EQ(arm.runs.size(), size_t(kRuns));
  if (kCuda) EXPECT_NE(arm.runs.front().device_source(), "") << "a CUDA worker reads its device memory";
  // Every run keeps its calls' blocks: each reading is at least that much above the last.
  for (size_t i = 1; i < arm.runs.size(); ++i)
    EXPECT_GE(leaking_figure(arm.runs[i]) - leaking_figure(arm.runs[i - 1]), kCallsPerRun * kLeakPerCall - MiB)
        << "run " << i;
  const auto leak = judge_arm_memory(arm);
  ASSERT_TRUE(leak.has_value());
  EXPECT_EQ(leak->where(), "arm A across runs");
  const int64_t kept = kCuda ? leak->device_bytes() : leak->host_bytes();
  EXPECT_GE(kept, (kRuns - 1) * kCallsPerRun * kLeakPerCall - 4 * MiB);
  EXPECT_NE(leak->detail().find(kCuda ? "device memory grew" : "host memory grew"), std::string::npos) << leak->detail();
  std::printf("judged: %s: %s\n", leak->where().c_str(), leak->detail().c_str());

  // With the growth readings gone (a worker that ran once per process), release still catches it.
  ArmMemory released_only = arm;
  released_only.runs.resize(1);
  const auto at_release = judge_arm_memory(released_only);
  ASSERT_TRUE(at_release.has_value());
  EXPECT_EQ(at_release->where(), "arm A at release");
  EXPECT_GE(kCuda ? at_release->device_bytes() : at_release->host_bytes(),
            kRuns * kCallsPerRun * kLeakPerCall - 8 * MiB);
}

TEST(WorkerLeak, TheReferenceBuildDoesNotLeak) {
  const ArmMemory arm = serve(build_path("QGATE_REF_LIBRARY", QGATE_REF_LIBRARY));
  ASSERT_EQ(arm.runs.size(), size_t(kRuns));
  const auto leak = judge_arm_memory(arm);
  EXPECT_FALSE(leak.has_value()) << leak->where() << ": " << leak->detail();
  ASSERT_TRUE(arm.released.has_value());
  EXPECT_EQ(arm.released->released_gemms(), 2);
}

/// A small parity sweep with `build`: two types, three shapes, both paths, so 12 GEMM calls.
v1::WorkerSummary parity_summary(const std::string& build) {
  const auto r = qgate::worker::testing::run_worker(
      "parity --backend " QGATE_LEAK_BACKEND " --threads 2 --types q4_0,q8_0 --shapes none --shape 8x64x256 "
      "--shape 16x128x512 --shape 4x96x256 --path both --format proto --build " + build);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto records = parse_records(r.out);
  if (records.empty() || !records.back().has_summary()) {
    ADD_FAILURE() << "no summary: " << r.err;
    return {};
  }
  EXPECT_EQ(records.back().summary().passed(), 12);
  return records.back().summary();
}

TEST(WorkerLeak, AParitySweepOfTheLeakBuildKeepsMemoryAndOfTheReferenceBuildNone) {
  const auto leaked = qgate::server::judge_parity_memory(parity_summary(build_path("QGATE_FAULT_LEAK", QGATE_FAULT_LEAK)));
  ASSERT_TRUE(leaked.has_value());
  EXPECT_EQ(leaked->where(), "parity sweep");
  // Twelve calls leak 12 x 64 MiB on a GPU; the readings on the H200 (2026-12-01, the reference build at
  // f765f8c and after it) show 736 MiB: 32 MiB that the process held before the first case is gone by
  // the last one. One call's worth of slack keeps the check on the leak, not on that.
  EXPECT_GE(kCuda ? leaked->device_bytes() : leaked->host_bytes(), 11 * kLeakPerCall) << leaked->detail();
  std::printf("judged: %s: %s\n", leaked->where().c_str(), leaked->detail().c_str());
  const auto clean = qgate::server::judge_parity_memory(parity_summary(build_path("QGATE_REF_LIBRARY", QGATE_REF_LIBRARY)));
  EXPECT_FALSE(clean.has_value()) << clean->detail();
}

// A library's one-time state (ggml's pool, cuBLAS handles) is not a leak: the pool_once build keeps
// its pool from its first call on and never grows it. The second cycle finds it level.
TEST(WorkerLeak, MemoryKeptOnceIsReportedAsSuchAndNotALeak) {
  const std::string build = build_path("QGATE_FAULT_POOL_ONCE", QGATE_FAULT_POOL_ONCE);
  const auto swept = qgate::server::judge_parity_memory(parity_summary(build));
  ASSERT_TRUE(swept.has_value()) << "the pool is over the sweep's threshold: a finding";
  EXPECT_TRUE(swept->kept_once()) << swept->detail();
  EXPECT_EQ(swept->detail().rfind("kept once: ", 0), 0u) << swept->detail();
  std::printf("judged: %s: %s\n", swept->where().c_str(), swept->detail().c_str());

  const ArmMemory arm = serve(build);
  ASSERT_TRUE(arm.released.has_value());
  EXPECT_TRUE(arm.released->second_cycle()) << "a release that kept the pool earns a second cycle";
  const auto released = judge_arm_memory(arm);
  ASSERT_TRUE(released.has_value());
  EXPECT_TRUE(released->kept_once()) << released->where() << ": " << released->detail();
  EXPECT_EQ(released->where(), "arm A at release");
  std::printf("judged: %s: %s\n", released->where().c_str(), released->detail().c_str());
}

#ifdef QGATE_FAULT_ILLEGAL_ADDRESS
TEST(WorkerLeak, AKernelFaultNamesTheCallThatLostTheContextOnEveryLaterAnswer) {
  const auto records = serve_records(build_path("QGATE_FAULT_ILLEGAL_ADDRESS", QGATE_FAULT_ILLEGAL_ADDRESS));
  int runs = 0;
  for (const auto& rec : records) {
    if (!rec.has_profile_run()) continue;
    ++runs;
    const auto& run = rec.profile_run();
    EXPECT_EQ(run.outcome(), v1::CASE_OUTCOME_ERROR);
    EXPECT_EQ(run.cuda().error(), "cudaErrorIllegalAddress") << run.message();
    EXPECT_EQ(run.cuda().last_build_call(), "qgate_gemm_run") << run.message();
    EXPECT_TRUE(run.cuda().context_lost());
  }
  EXPECT_EQ(runs, kRuns);
  ASSERT_FALSE(records.empty());
  EXPECT_TRUE(records.back().has_released()) << "the worker still answers shutdown";
}
#endif

}  // namespace
