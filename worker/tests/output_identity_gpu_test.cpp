// The output-identity check on CUDA with the reference build: a model-sized output head (Llama 3
// 8B's, 128256 x 4096 q6_K) and the fallback q6_K head pick the same greedy tokens on the MMQ and
// the f16 path. Skipped without a device (gpu_test_main.cpp).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "qgate/worker/output_head.h"
#include "qgate/worker/worker_cli.h"
#include "worker_process.h"

using namespace qgate::worker;
using namespace qgate::worker::testing;

namespace {

qgate::v1::ProfileRun serve_once(const qgate::v1::ModelProfile& profile, int64_t tokens, const std::string& env,
                                 double* prepare_s) {
  std::vector<qgate::v1::WorkerRequest> reqs(3);
  auto* prep = reqs[0].mutable_prepare();
  *prep->mutable_profile() = profile;
  prep->set_tokens(tokens);
  prep->set_seed(20260831);
  reqs[1].mutable_run()->set_run_id(1);
  reqs[1].mutable_run()->set_repetitions(2);
  reqs[2].set_shutdown(true);
  auto r = run_worker_with_input("serve --backend cuda --build " + ref_library(), serialize_requests(reqs), env);
  EXPECT_EQ(r.exit_code, kExitOk) << r.err;
  qgate::v1::ProfileRun run;
  for (const auto& rec : parse_records(r.out)) {
    if (rec.has_prepared()) {
      EXPECT_EQ(rec.prepared().outcome(), qgate::v1::CASE_OUTCOME_PASSED) << rec.prepared().message();
      *prepare_s = rec.prepared().prepare_s();
    }
    if (rec.has_profile_run()) run = rec.profile_run();
  }
  EXPECT_EQ(run.outcome(), qgate::v1::CASE_OUTCOME_PASSED) << run.message() << r.err;
  return run;
}

void expect_same_tokens_on_both_paths(const qgate::v1::ModelProfile& profile) {
  double prepare_mmq = 0, prepare_f16 = 0;
  const auto mmq = serve_once(profile, 512, "MINFER_MMQ=1", &prepare_mmq);
  const auto f16 = serve_once(profile, 512, "MINFER_MMQ=0", &prepare_f16);
  EXPECT_EQ(mmq.path(), qgate::v1::GEMM_PATH_MMQ);
  EXPECT_EQ(f16.path(), qgate::v1::GEMM_PATH_F16);
  ASSERT_TRUE(mmq.has_output());
  ASSERT_TRUE(f16.has_output());
  ASSERT_EQ(mmq.output_tokens_size(), kOutputHeadRows);
  const std::vector<int64_t> a(mmq.output_tokens().begin(), mmq.output_tokens().end());
  const std::vector<int64_t> b(f16.output_tokens().begin(), f16.output_tokens().end());
  EXPECT_EQ(a, b);
  for (int64_t t : a) EXPECT_GE(t, 0);
  std::printf("%s: prepare %.1f s (MMQ), %.1f s (f16); %d tokens identical\n", profile.name().c_str(), prepare_mmq,
              prepare_f16, int(a == b ? a.size() : 0));
}

}  // namespace

TEST(OutputIdentityGpu, ALlama3SizedHeadPicksTheSameTokensOnMmqAndF16) {
  qgate::v1::ModelProfile p;
  p.set_name("llama-3-8b-head");
  auto* g = p.add_gemms();
  g->set_type("q6_K");
  g->set_od(128256);
  g->set_k(4096);
  g->set_count(1);
  g->set_role("output");
  expect_same_tokens_on_both_paths(p);
}

TEST(OutputIdentityGpu, TheFallbackHeadPicksTheSameTokensOnMmqAndF16) {
  qgate::v1::ModelProfile p;
  p.set_name("one-q4_K-gemm");
  auto* g = p.add_gemms();
  g->set_type("q4_K");
  g->set_od(4096);
  g->set_k(4096);
  g->set_count(32);
  g->set_role("attn_q");
  expect_same_tokens_on_both_paths(p);
}
