// The output-identity check through the real `qgate-worker serve` on the CPU backend: each run's
// greedy tokens over the output head are the same run to run and process to process, the same on
// the MMQ and the f16 path of a correct build (the reference, and a build in ggml's numerics), and
// different for a build with a scale bug or one whose outputs are NaN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "qgate/profiles/model_profile.h"
#include "qgate/worker/output_head.h"
#include "qgate/worker/worker_cli.h"
#include "worker_process.h"

using namespace qgate::worker;
using namespace qgate::worker::testing;

namespace {

constexpr uint64_t kSeed = 20260831;

qgate::v1::ModelProfile builtin(const std::string& name) {
  const auto* p = qgate::profiles::find_builtin_profile(name);
  EXPECT_NE(p, nullptr) << name;
  qgate::v1::ModelProfile out;
  out.set_name(name);
  if (!p) return out;
  for (const auto& g : p->gemms) {
    auto* m = out.add_gemms();
    m->set_type(std::string(qgate::quant::traits(g.type).name));
    m->set_od(g.od);
    m->set_k(g.k);
    m->set_count(g.count);
    m->set_role(g.role);
  }
  return out;
}

/// cpu-tiny without its output GEMM: the worker brings a q6_K head of its own.
qgate::v1::ModelProfile headless() {
  auto p = builtin("cpu-tiny");
  p.set_name("cpu-tiny-headless");
  for (int i = p.gemms_size() - 1; i >= 0; --i)
    if (p.gemms(i).role() == "output") p.mutable_gemms()->DeleteSubrange(i, 1);
  return p;
}

struct Runs {
  qgate::v1::PrepareDone prepared;
  std::vector<qgate::v1::ProfileRun> runs;
  std::string err;
  int exit_code = -1;
};

/// Prepares `profile` for `tokens` tokens, runs it `runs` times and shuts down, with `build`.
Runs serve(const qgate::v1::ModelProfile& profile, int64_t tokens, const std::string& env,
           const std::string& build = ref_library(), int runs = 2) {
  std::vector<qgate::v1::WorkerRequest> reqs(1);
  auto* prep = reqs[0].mutable_prepare();
  *prep->mutable_profile() = profile;
  prep->set_tokens(tokens);
  prep->set_seed(kSeed);
  for (int i = 0; i < runs; ++i) {
    qgate::v1::WorkerRequest r;
    r.mutable_run()->set_run_id(i + 1);
    r.mutable_run()->set_repetitions(1);
    reqs.push_back(r);
  }
  qgate::v1::WorkerRequest shutdown;
  shutdown.set_shutdown(true);
  reqs.push_back(shutdown);
  auto r =
      run_worker_with_input("serve --backend cpu --threads 2 --seed " + std::to_string(kSeed) + " --build " + build,
                            serialize_requests(reqs), env);
  Runs out;
  out.err = r.err;
  out.exit_code = r.exit_code;
  for (const auto& rec : parse_records(r.out)) {
    if (rec.has_prepared()) out.prepared = rec.prepared();
    if (rec.has_profile_run()) out.runs.push_back(rec.profile_run());
  }
  return out;
}

std::vector<int64_t> tokens_of(const qgate::v1::ProfileRun& run) {
  return {run.output_tokens().begin(), run.output_tokens().end()};
}

/// The tokens of one passed run of `profile`; fails the test when the run did not pass.
std::vector<int64_t> tokens(const qgate::v1::ModelProfile& profile, int64_t n_tokens, const std::string& env,
                            const std::string& build = ref_library()) {
  auto r = serve(profile, n_tokens, env, build, 1);
  EXPECT_EQ(r.exit_code, kExitOk) << r.err;
  EXPECT_EQ(r.prepared.outcome(), qgate::v1::CASE_OUTCOME_PASSED) << r.prepared.message();
  if (r.runs.size() != 1) {
    ADD_FAILURE() << "expected one run, got " << r.runs.size() << "\n" << r.err;
    return {};
  }
  EXPECT_EQ(r.runs[0].outcome(), qgate::v1::CASE_OUTCOME_PASSED) << r.runs[0].message();
  EXPECT_TRUE(r.runs[0].has_output());
  return tokens_of(r.runs[0]);
}

int differing(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  int n = std::abs(int(a.size()) - int(b.size()));
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += a[i] != b[i];
  return n;
}

}  // namespace

TEST(OutputIdentity, TheSameSeedAndPathGiveTheSameTokensInTwoRunsAndTwoProcesses) {
  for (const auto& profile : {builtin("cpu-tiny"), headless()}) {
    SCOPED_TRACE(profile.name());
    const auto a = serve(profile, 32, "MINFER_MMQ=1");
    ASSERT_EQ(a.exit_code, kExitOk) << a.err;
    ASSERT_EQ(a.prepared.outcome(), qgate::v1::CASE_OUTCOME_PASSED) << a.prepared.message();
    ASSERT_EQ(a.runs.size(), 2u);
    for (const auto& run : a.runs) {
      EXPECT_EQ(run.outcome(), qgate::v1::CASE_OUTCOME_PASSED) << run.message();
      EXPECT_TRUE(run.has_output());
      EXPECT_EQ(run.output_tokens_size(), 32) << "min(tokens, 64) rows";
      EXPECT_GT(run.tokens_per_s(), 0);
      EXPECT_TRUE(run.output_text().empty());
    }
    EXPECT_EQ(tokens_of(a.runs[0]), tokens_of(a.runs[1]));
    const auto b = serve(profile, 32, "MINFER_MMQ=1");
    ASSERT_EQ(b.runs.size(), 2u) << b.err;
    EXPECT_EQ(tokens_of(b.runs[0]), tokens_of(a.runs[0])) << "another process";
    // The tokens are the head's, not a constant: they spread over the vocabulary.
    const auto t = tokens_of(a.runs[0]);
    EXPECT_GE(std::set<int64_t>(t.begin(), t.end()).size(), 24u);
    for (int64_t token : t) EXPECT_GE(token, 0);
  }
}

TEST(OutputIdentity, TheRowCountIsTheTokensUpTo64) {
  EXPECT_EQ(kOutputHeadRows, 64);
  auto few = serve(headless(), 5, "MINFER_MMQ=1", ref_library(), 1);
  ASSERT_EQ(few.runs.size(), 1u) << few.err;
  EXPECT_EQ(few.runs[0].output_tokens_size(), 5);
  auto many = serve(headless(), 100, "MINFER_MMQ=1", ref_library(), 1);
  ASSERT_EQ(many.runs.size(), 1u) << many.err;
  EXPECT_EQ(many.runs[0].output_tokens_size(), 64);
}

TEST(OutputIdentity, MmqAndF16GiveTheSameTokensWithTheReferenceBuild) {
  for (const auto& profile : {builtin("cpu-tiny"), headless()}) {
    SCOPED_TRACE(profile.name());
    const auto mmq = serve(profile, 64, "MINFER_MMQ=1", ref_library(), 1);
    const auto f16 = serve(profile, 64, "MINFER_MMQ=0", ref_library(), 1);
    ASSERT_EQ(mmq.runs.size(), 1u) << mmq.err;
    ASSERT_EQ(f16.runs.size(), 1u) << f16.err;
    EXPECT_EQ(mmq.runs[0].path(), qgate::v1::GEMM_PATH_MMQ);
    EXPECT_EQ(f16.runs[0].path(), qgate::v1::GEMM_PATH_F16);
    ASSERT_EQ(mmq.runs[0].output_tokens_size(), 64);
    EXPECT_EQ(tokens_of(mmq.runs[0]), tokens_of(f16.runs[0]));
  }
}

TEST(OutputIdentity, AGgmlNumericsBuildMatchesTheReferenceAndItsScaleBugDoesNot) {
  for (const auto& profile : {builtin("cpu-tiny"), headless()}) {
    SCOPED_TRACE(profile.name());
    for (const std::string path : {"1", "0"}) {
      SCOPED_TRACE("MINFER_MMQ=" + path);
      const auto ref = tokens(profile, 64, "MINFER_MMQ=" + path);
      const auto good = tokens(profile, 64, "MINFER_MMQ=" + path, QGATE_GGML_CPU_BUILD);
      const auto bad = tokens(profile, 64, "MINFER_MMQ=" + path, QGATE_GGML_CPU_BUILD_BAD);
      ASSERT_EQ(ref.size(), 64u);
      EXPECT_EQ(good, ref);
      const int changed = differing(bad, ref);
      EXPECT_GE(changed, 1) << "the scale bug must change a token";
      std::printf("%s MINFER_MMQ=%s: the scale bug changes %d of 64 tokens\n", profile.name().c_str(), path.c_str(),
                  changed);
    }
  }
}

TEST(OutputIdentity, NanOutputsGiveTokenMinusOne) {
  const auto ref = tokens(builtin("cpu-tiny"), 16, "MINFER_MMQ=1");
  const auto nan = tokens(builtin("cpu-tiny"), 16, "MINFER_MMQ=1", QGATE_FAULT_NAN_OUTPUT);
  EXPECT_EQ(nan, std::vector<int64_t>(16, -1));
  EXPECT_EQ(differing(nan, ref), 16);
}

TEST(OutputIdentity, ABuildThatFailsTheHeadFailsTheRunWithItsMessage) {
  // Timed runs at the prepared 100 tokens pass in this build; the head runs on 64 rows and fails.
  const auto r = serve(builtin("cpu-tiny"), 100, "MINFER_MMQ=1", QGATE_SHORT_RUN_ERROR_BUILD, 1);
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  ASSERT_EQ(r.prepared.outcome(), qgate::v1::CASE_OUTCOME_PASSED) << r.prepared.message();
  ASSERT_EQ(r.runs.size(), 1u);
  EXPECT_EQ(r.runs[0].outcome(), qgate::v1::CASE_OUTCOME_ERROR);
  EXPECT_EQ(r.runs[0].message(), "output head: INTERNAL: runs only at the prepared token count");
  EXPECT_FALSE(r.runs[0].has_output());
  EXPECT_EQ(r.runs[0].output_tokens_size(), 0);
  // At 64 tokens the head runs at the prepared count too: the same build passes (all-zero logits).
  const auto ok = tokens(builtin("cpu-tiny"), 64, "MINFER_MMQ=1", QGATE_SHORT_RUN_ERROR_BUILD);
  EXPECT_EQ(ok, std::vector<int64_t>(64, 0)) << "a tie picks the lowest index";
}
