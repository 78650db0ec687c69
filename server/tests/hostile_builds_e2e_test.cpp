// Hostile builds end to end (docs/security.md): one real qgated on the CPU backend is handed kernel
// builds that try to fool the gate rather than fail by accident. A build that writes its own PASSED
// records never passes; one that prints to stdout is its own log, not a broken stream; one whose
// background thread burns a core while it is idle cannot slow the other arm, because the idle arm
// is frozen while the other is timed.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "daemon_under_test.h"

using namespace qgate::testing;
using nlohmann::json;

namespace {

json verdict_of(const json& job) {
  return job.contains("verdict") && job["verdict"].is_object() ? job["verdict"] : json::object();
}

class HostileBuilds : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    ASSERT_TRUE(d_.try_start({}, "", &why)) << why;
  }
  DaemonUnderTest d_;
  const std::string parity_ = "--kind parity --parity-shapes quick";
};

}  // namespace

TEST_F(HostileBuilds, ABuildThatForgesItsRecordsNeverPasses) {
  auto e = run_job(d_, QGATE_FAULT_FORGED_RECORDS, "forged-records", parity_);
  EXPECT_NE(e.watch_code, 0) << "a forged sweep must never pass";
  const json verdict = verdict_of(e.job);
  EXPECT_NE(verdict.value("verdict", ""), "VERDICT_PASS") << e.job.dump();
  EXPECT_EQ(verdict.value("parity_passed", 0), 0) << "no forged case may count as passed";
  EXPECT_EQ(e.job.value("disposition", ""), "DISPOSITION_INCORRECT") << e.job.dump();
  EXPECT_NE(e.job.value("disposition_detail", "").find("parity judge's channel"), std::string::npos)
      << e.job.dump();
  // The daemon serves on, and the reference build still passes after it.
  auto ref = run_job(d_, QGATE_REF_LIBRARY, "ref", parity_);
  EXPECT_EQ(ref.watch_code, 0) << ref.job.dump();
  EXPECT_EQ(verdict_of(ref.job).value("parity_passed", 0), 192) << ref.job.dump();
}

TEST_F(HostileBuilds, ABuildThatPrintsToStdoutIsJudgedOnItsOutputs) {
  auto e = run_job(d_, QGATE_FAULT_CHATTY_STDOUT, "chatty-stdout", parity_);
  EXPECT_EQ(e.watch_code, 0) << e.job.dump();
  EXPECT_EQ(verdict_of(e.job).value("verdict", ""), "VERDICT_PASS") << e.job.dump();
  EXPECT_EQ(verdict_of(e.job).value("parity_passed", 0), 192) << e.job.dump();
  EXPECT_EQ(e.job.value("disposition", ""), "DISPOSITION_OK") << e.job.dump();
  // What it printed is in its worker's log.
  EXPECT_NE(slurp(d_.dir() + "/logs/job-" + std::to_string(e.job["id"].get<int64_t>()) + "-parity.log")
                .find("chatty build: qgate_gemm_run"),
            std::string::npos);
}

TEST_F(HostileBuilds, AnIdleArmsBackgroundThreadCannotTiltTheOtherArm) {
  // The reference build, uploaded as the baseline.
  auto ref = run_job(d_, QGATE_REF_LIBRARY, "ref", "--kind parity --parity-shapes quick");
  ASSERT_EQ(ref.watch_code, 0) << ref.job.dump();
  // The spinner computes exactly what the reference computes. Unfrozen, its idle thread takes one
  // of the two cores the reference arm's timed runs use, and the spinner reads about 1.5-2x faster.
  auto e = run_job(d_, QGATE_FAULT_IDLE_SPINNER, "idle-spinner",
                   "--baseline ref --profile cpu-tiny --parity-shapes none --min-pairs 12 --max-pairs 12 --reps 9 "
                   "--threshold 0.25");
  const json verdict = verdict_of(e.job);
  ASSERT_TRUE(verdict.contains("ratio")) << e.job.dump();
  const double ratio = verdict["ratio"].get<double>();
  std::printf("idle spinner against the reference, idle arm frozen: ratio %.3f\n", ratio);
  // The A/A noise of this 2-core CPU's runs (docs/ab-statistics.md): 10-20% on short runs.
  EXPECT_GT(ratio, 0.8) << e.job.dump();
  EXPECT_LT(ratio, 1.25) << "the idle arm's thread tilted the other arm: " << e.job.dump();
}

TEST_F(HostileBuilds, ATimedRunOfABuildThatNeverWritesYIsIncorrect) {
  // No parity sweep in an `ab` job: only the timed runs' poisoned outputs can catch it.
  auto e = run_job(d_, QGATE_FAULT_UNWRITTEN_OUTPUT, "unwritten-ab", "--kind ab --profile cpu-tiny --max-pairs 4");
  EXPECT_NE(e.watch_code, 0) << e.job.dump();
  EXPECT_EQ(e.job.value("disposition", ""), "DISPOSITION_INCORRECT") << e.job.dump();
  EXPECT_NE(e.job.value("disposition_detail", "").find("the build did not write y"), std::string::npos)
      << e.job.dump();
}
