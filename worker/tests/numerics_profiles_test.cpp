// Numerics profiles through the real worker: a kernel build written to ggml's MMQ numerics passes
// when judged as it declares, fails when judged as qgate (ties and activation sums differ), and its
// twin with one scale-indexing bug fails under every profile, on its bound and on the NMSE against
// the exact product. Also prints the per-type table of max |diff|, relative error and NMSE.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

#include "qgate/worker/worker_cli.h"
#include "worker_process.h"

using namespace qgate::worker;
using namespace qgate::worker::testing;

namespace {

struct Sweep {
  int exit_code = -1;
  std::string err;
  std::vector<qgate::v1::ParityCase> cases;
  qgate::v1::ParityPlan plan;
};

Sweep sweep(const std::string& build, const std::string& extra) {
  auto r = run_worker("parity --backend cpu --types all --shapes quick --path mmq --format proto --build " + build +
                      " " + extra);
  Sweep s{r.exit_code, r.err, {}, {}};
  for (const auto& rec : parse_records(r.out)) {
    if (rec.has_parity()) s.cases.push_back(rec.parity());
    if (rec.has_plan()) s.plan = rec.plan();
  }
  return s;
}

// Per type: worst max |diff|, worst fraction of the bound, worst relative error, worst exact NMSE
// on random rows, and the count of failed cases.
void print_table(const std::string& title, const Sweep& s) {
  struct Row { double diff = 0, fraction = 0, rel = 0, nmse = 0; int failed = 0, cases = 0; };
  std::map<std::string, Row> rows;
  for (const auto& c : s.cases) {
    Row& r = rows[c.type()];
    r.diff = std::max(r.diff, c.max_abs_diff());
    r.fraction = std::max(r.fraction, c.worst_tolerance_fraction());
    r.rel = std::max(r.rel, c.max_rel_diff());
    if (c.activation() == qgate::v1::ACTIVATION_KIND_RANDOM) r.nmse = std::max(r.nmse, c.exact_nmse());
    r.failed += c.outcome() != qgate::v1::CASE_OUTCOME_PASSED;
    ++r.cases;
  }
  std::printf("%s\n%-5s %11s %9s %10s %12s %7s\n", title.c_str(), "type", "max|diff|", "of bound", "max rel",
              "exact NMSE", "failed");
  for (const auto& [type, r] : rows)
    std::printf("%-5s %11.3e %9.3f %10.3e %12.3e %3d/%d\n", type.c_str(), r.diff, r.fraction, r.rel, r.nmse, r.failed,
                r.cases);
}

int failed(const Sweep& s) {
  int n = 0;
  for (const auto& c : s.cases) n += c.outcome() != qgate::v1::CASE_OUTCOME_PASSED;
  return n;
}

}  // namespace

TEST(NumericsProfiles, AGgmlBuildPassesWhenJudgedAsItDeclares) {
  const Sweep s = sweep(QGATE_GGML_CPU_BUILD, "");
  print_table("ggml-numerics build, judged in ggml numerics (declared)", s);
  EXPECT_EQ(s.plan.numerics(), qgate::v1::NUMERICS_PROFILE_GGML);
  EXPECT_EQ(s.plan.numerics_source(), "declared by the build");
  ASSERT_EQ(s.cases.size(), 8u * (7 + 5)) << s.err;
  for (const auto& c : s.cases)
    EXPECT_EQ(c.outcome(), qgate::v1::CASE_OUTCOME_PASSED)
        << c.type() << " " << c.shape().nt() << "x" << c.shape().od() << "x" << c.shape().k() << " activation "
        << c.activation() << ": " << c.message();
  EXPECT_EQ(s.exit_code, kExitOk) << s.err;
}

// A profile is an error budget, not a recipe to copy: rounding less than ggml passes, more fails.
TEST(NumericsProfiles, ABuildThatRoundsLessThanItsProfilePasses) {
  const Sweep s = sweep(QGATE_GGML_CPU_BUILD_EXACT_K_SCALES, "");
  print_table("ggml build with q4_K/q5_K's d*sc and dmin*m kept in f32, judged in ggml numerics", s);
  ASSERT_EQ(s.cases.size(), 8u * (7 + 5)) << s.err;
  for (const auto& c : s.cases)
    EXPECT_EQ(c.outcome(), qgate::v1::CASE_OUTCOME_PASSED)
        << c.type() << " " << c.shape().nt() << "x" << c.shape().od() << "x" << c.shape().k() << ": " << c.message();
  EXPECT_EQ(s.exit_code, kExitOk) << s.err;
}

TEST(NumericsProfiles, ABuildThatRoundsMoreThanItsProfileFails) {
  const Sweep s = sweep(QGATE_GGML_CPU_BUILD_F16_ACT_SCALE, "");
  print_table("ggml build reading MMQ's f32 activation scale as f16 (q5_0, q8_0, q6_K), judged in ggml numerics", s);
  EXPECT_EQ(s.exit_code, kExitCaseFailed) << s.err;
  std::map<std::string, int> failed_by_type;
  for (const auto& c : s.cases)
    if (c.outcome() != qgate::v1::CASE_OUTCOME_PASSED) ++failed_by_type[c.type()];
  for (const char* type : {"q5_0", "q8_0", "q6_K"}) EXPECT_GT(failed_by_type[type], 0) << type;
  for (const char* type : {"q4_0", "q4_1", "q5_1", "q4_K", "q5_K"})
    EXPECT_EQ(failed_by_type[type], 0) << type << " keeps ggml's roundings in this build";
}

TEST(NumericsProfiles, TheSameBuildJudgedAsQgateFailsItsBoundsButNotItsMaths) {
  const Sweep s = sweep(QGATE_GGML_CPU_BUILD, "--numerics qgate");
  print_table("ggml-numerics build, judged in qgate numerics (--numerics qgate)", s);
  EXPECT_EQ(s.exit_code, kExitCaseFailed);
  EXPECT_GT(failed(s), 8) << "ggml's roundf and sums of x must show against qgate's contract";
  for (const auto& c : s.cases)
    if (c.activation() == qgate::v1::ACTIVATION_KIND_RANDOM)
      EXPECT_LE(c.exact_nmse(), c.exact_nmse_limit()) << c.type() << ": the maths itself is right";
}

TEST(NumericsProfiles, ABuildWithAScaleBugFailsUnderEveryProfile) {
  for (const char* numerics : {"ggml", "qgate", "ggml-cpu", "unknown"}) {
    const Sweep s = sweep(QGATE_GGML_CPU_BUILD_BAD, std::string("--numerics ") + numerics);
    print_table(std::string("scale-bug build, judged in ") + numerics + " numerics", s);
    EXPECT_EQ(s.exit_code, kExitCaseFailed) << numerics;
    std::map<std::string, int> random_failures, nmse_failures;
    for (const auto& c : s.cases) {
      if (c.activation() != qgate::v1::ACTIVATION_KIND_RANDOM) continue;
      random_failures[c.type()] += c.outcome() == qgate::v1::CASE_OUTCOME_INCORRECT;
      nmse_failures[c.type()] += c.exact_nmse() > c.exact_nmse_limit();
    }
    EXPECT_EQ(random_failures.size(), 8u);
    const bool declared_lineage = std::string(numerics) != "unknown";
    for (const auto& [type, n] : random_failures) {
      // A declared profile catches the bug on every shape. The unknown-lineage profile is weaker by
      // design (docs/parity.md): it must still fail the build on every type, but q8_0's bug (two
      // neighbouring scales 3.3e-4 apart in NMSE) hides on most shapes under its bound.
      if (declared_lineage) EXPECT_EQ(n, 7) << numerics << " " << type << ": every shape fails";
      else EXPECT_GT(n, 0) << numerics << " " << type << ": the bug must show on some shape";
    }
    int loud = 0;
    for (const auto& [type, n] : nmse_failures) loud += n > 0;
    // The bug shows in NMSE against the exact product too, for every type but q8_0: there the two
    // neighbouring blocks' scales differ by little (3.3e-4, under the 5e-4 gate), and only the
    // profile's bound catches it.
    EXPECT_GE(loud, 7) << "a scale bug shows against the exact product, whatever the profile";
  }
}

TEST(NumericsProfiles, AnUnknownProfileNameIsAUsageError) {
  auto r = run_worker(std::string("parity --backend cpu --types q4_0 --shapes none --shape 1x32x32 --numerics "
                                  "llama --build ") + QGATE_GGML_CPU_BUILD);
  EXPECT_EQ(r.exit_code, kExitUsage);
  EXPECT_NE(r.err.find("--numerics"), std::string::npos) << r.err;
}
