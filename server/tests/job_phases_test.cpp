// The job runner's phases with scripted workers (fake_worker.h) and a real SQLite store: ABBA
// order, the sequential looks, retry once, timeouts, crashes, cancel, leaks, parity, and how the
// runner composes them into a verdict and a disposition.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "qgate/common/sha256.h"
#include "fake_worker.h"
#include "qgate/db/sqlite_store.h"
#include "qgate/server/ab_phase.h"
#include "qgate/server/fault_classifier.h"
#include "qgate/jobs/job_messages.h"
#include "qgate/server/job_runner.h"
#include "qgate/server/parity_phase.h"
#include "qgate/stats/sequential.h"

namespace qgate::server {

// The application layer (jobs/) this file uses.
using jobs::job_row;

namespace {

using testing::FakeLauncher;
using testing::WorkerScript;

class NoSampler final : public cotenant::Sampler {
 public:
  std::optional<cotenant::Sample> read(const std::set<int>&) override { return std::nullopt; }
  bool available() const override { return false; }
  std::string unavailable_reason() const override { return "no GPU in this test"; }
};

/// A store in a fresh directory with two builds (candidate and baseline) and one running job.
class PhaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = std::filesystem::temp_directory_path() /
           ("qgate-phases-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(dir_);
    db::SqliteOptions options;
    options.path = dir_ / "qgate.db";
    store_ = db::open_sqlite_store(options);
    candidate_ = add_build("candidate");
    baseline_ = add_build("baseline");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  db::Build add_build(const std::string& name) {
    db::Build b;
    b.name = name;
    b.artifact_path = (dir_ / ("lib" + name + ".so")).string();
    std::ofstream(b.artifact_path) << "not really a build: " << name;
    b.sha256 = qgate::common::sha256_file_hex(b.artifact_path);  // checked before every use
    b.id = store_->insert_build(b).id;
    return b;
  }

  /// A running job of `spec`.
  db::Job running_job(const v1::JobSpec& spec, bool with_baseline = false) {
    db::Job job = job_row(spec);
    job.build_id = candidate_.id;
    if (with_baseline) job.baseline_build_id = baseline_.id;
    job.backend = "cpu";
    job.id = store_->create_job(job);
    store_->update_job_state(job.id, db::JobState::Running, std::nullopt, std::nullopt);
    return *store_->find_job(job.id);
  }

  AbSetup ab_setup() const {
    AbSetup s;
    s.a = {"A", "mmq", candidate_, {{"MINFER_MMQ", "1"}}};
    s.b = {"B", "f16", candidate_, {{"MINFER_MMQ", "0"}}};
    s.arms.worker_binary = "qgate-worker";
    s.arms.prepare.mutable_profile()->set_name("cpu-tiny");
    s.arms.run.set_repetitions(1);
    s.arms.run_timeout_s = 7;
    s.profile = "cpu-tiny";
    s.tokens = 16;
    return s;
  }

  AbOutcome run_ab(FakeLauncher& launcher, AbSetup setup, const std::atomic<int>* stop = nullptr) {
    const db::Job job = running_job(v1::JobSpec());
    JobRecorder recorder(*store_, events_, job, "cpu", "");
    const JobControl control(stop ? *stop : keep_running_, std::chrono::seconds(3600));
    v1::JobProgress progress;
    return AbPhase(std::move(setup), launcher, recorder, control, sampler_).run(progress);
  }

  std::filesystem::path dir_;
  std::unique_ptr<db::Store> store_;
  EventHub events_;
  NoSampler sampler_;
  db::Build candidate_, baseline_;
  std::atomic<int> keep_running_{kKeepRunning};
};

// ---- A/B ----

TEST_F(PhaseTest, AbbaOrderAlternatesTheArmThatRunsFirst) {
  FakeLauncher launcher({.noise = 0.01});
  const AbOutcome out = run_ab(launcher, ab_setup());
  const auto& runs = launcher.journal.run_arms;
  ASSERT_GE(runs.size(), 8u);
  ASSERT_EQ(runs.size() % 2, 0u);
  for (size_t pair = 0; pair < runs.size() / 2; ++pair) {
    const std::string first = pair % 2 == 0 ? "MINFER_MMQ=1" : "MINFER_MMQ=0";
    const std::string second = pair % 2 == 0 ? "MINFER_MMQ=0" : "MINFER_MMQ=1";
    EXPECT_EQ(runs[2 * pair], first) << "pair " << pair;
    EXPECT_EQ(runs[2 * pair + 1], second) << "pair " << pair;
  }
  EXPECT_EQ(out.report.arm_a().runs(), out.report.arm_b().runs());
  EXPECT_EQ(launcher.journal.launches, 2) << "one worker per arm, kept for the job";
  EXPECT_EQ(launcher.journal.releases, 2) << "both workers asked to release at the end";
}

TEST_F(PhaseTest, TheIdleArmIsFrozenWhileTheOtherIsTimed) {
  FakeLauncher launcher({.noise = 0.01});
  run_ab(launcher, ab_setup());
  const auto& runs = launcher.journal.run_arms;
  ASSERT_EQ(launcher.journal.frozen_at_run.size(), runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string other = runs[i] == "MINFER_MMQ=1" ? "MINFER_MMQ=0" : "MINFER_MMQ=1";
    EXPECT_EQ(launcher.journal.frozen_at_run[i], std::set<std::string>{other}) << "run " << i << " of " << runs[i];
  }
  EXPECT_TRUE(launcher.journal.frozen.empty()) << "every arm is thawed when the A/B ends";
}

// The verdict is on the summed time; a type that got slower inside a faster sum is named.
TEST_F(PhaseTest, APassingAbNamesATypeThatGotSlowerInsideAFasterSum) {
  WorkerScript script{.noise = 0.005};
  script.type_us["1"] = {{"q4_K", 600}, {"q6_K", 330}};  // arm A: q4_K 1.33x faster, q6_K 0.91x
  script.type_us["0"] = {{"q4_K", 800}, {"q6_K", 300}};
  FakeLauncher launcher(script);
  const AbOutcome out = run_ab(launcher, ab_setup());
  EXPECT_EQ(out.report.verdict(), v1::VERDICT_PASS);
  EXPECT_NEAR(out.report.ratio(), 1100.0 / 930.0, 0.02);
  ASSERT_EQ(out.report.per_type_size(), 2);
  int named = 0;
  for (const std::string& reason : out.report.reasons()) {
    if (reason.find("alone is slower") == std::string::npos) continue;
    ++named;
    EXPECT_EQ(reason.rfind("q6_K alone is slower: 0.9", 0), 0u) << reason;
    EXPECT_NE(reason.find("beyond 2.0%"), std::string::npos) << reason;
  }
  EXPECT_EQ(named, 1) << "q6_K and only q6_K";
}

TEST_F(PhaseTest, APassingAbWhereEveryTypeIsFasterNamesNone) {
  WorkerScript script{.noise = 0.005};
  script.type_us["1"] = {{"q4_K", 600}, {"q6_K", 290}};
  script.type_us["0"] = {{"q4_K", 800}, {"q6_K", 300}};
  FakeLauncher launcher(script);
  const AbOutcome out = run_ab(launcher, ab_setup());
  EXPECT_EQ(out.report.verdict(), v1::VERDICT_PASS);
  ASSERT_EQ(out.report.per_type_size(), 2);
  for (const std::string& reason : out.report.reasons())
    EXPECT_EQ(reason.find("alone is slower"), std::string::npos) << reason;
}

TEST_F(PhaseTest, SequentialOrderRunsEveryARunThenEveryBRun) {
  FakeLauncher launcher;
  AbSetup setup = ab_setup();
  setup.order = v1::RUN_ORDER_SEQUENTIAL;
  setup.policy.max_pairs = 6;
  run_ab(launcher, setup);
  const auto& runs = launcher.journal.run_arms;
  ASSERT_EQ(runs.size(), 12u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(runs[i], "MINFER_MMQ=1");
  for (int i = 6; i < 12; ++i) EXPECT_EQ(runs[i], "MINFER_MMQ=0");
}

TEST_F(PhaseTest, AClearDifferenceStopsEarlyAtAPlannedLook) {
  FakeLauncher launcher({.mmq_tokens_per_s = 1000, .f16_tokens_per_s = 500, .noise = 0.005});
  const AbOutcome out = run_ab(launcher, ab_setup());
  const auto design = stats::SequentialDesign::from_policy(stats::GatePolicy{});
  EXPECT_NE(std::find(design.looks.begin(), design.looks.end(), out.report.pairs()), design.looks.end());
  EXPECT_LT(out.report.pairs(), design.looks.back()) << "a 2x difference needs less than the whole budget";
  EXPECT_EQ(out.report.verdict(), v1::VERDICT_PASS);
  EXPECT_EQ(out.report.comparison(), v1::COMPARISON_DIFFERENT);
  EXPECT_NEAR(out.report.ratio(), 2.0, 0.05);
  ASSERT_EQ(out.report.per_type_size(), 1);
  EXPECT_EQ(out.report.per_type(0).weight_type(), "q4_0");
}

TEST_F(PhaseTest, PairsAreOnlyJudgedAtPlannedLooks) {
  // A small slowdown near the threshold with noise: whatever look it stops at is a planned one.
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    FakeLauncher launcher({.mmq_tokens_per_s = 985, .f16_tokens_per_s = 1000, .noise = 0.02}, seed);
    const AbOutcome out = run_ab(launcher, ab_setup());
    const auto design = stats::SequentialDesign::from_policy(stats::GatePolicy{});
    EXPECT_NE(std::find(design.looks.begin(), design.looks.end(), out.report.pairs()), design.looks.end())
        << "stopped at " << out.report.pairs() << " pairs (seed " << seed << ")";
    EXPECT_EQ(int(launcher.journal.run_arms.size()), 2 * out.report.pairs());
  }
}

TEST_F(PhaseTest, AFailedRunRestartsItsWorkerAndIsRetriedOnce) {
  FakeLauncher launcher({.noise = 0.005, .fail_run = 3});
  const AbOutcome out = run_ab(launcher, ab_setup());
  EXPECT_EQ(launcher.journal.launches, 3) << "the failing arm's worker was restarted once";
  ASSERT_EQ(out.recovered.size(), 1u);
  EXPECT_NE(out.recovered[0].find("worker restarted once"), std::string::npos) << out.recovered[0];
  EXPECT_GT(out.report.pairs(), 0);
}

TEST_F(PhaseTest, ARunThatFailsTwiceEndsTheJobIncorrect) {
  FakeLauncher launcher({.fail_every_run = true});
  try {
    run_ab(launcher, ab_setup());
    FAIL() << "expected a JobFailure";
  } catch (const JobFailure& e) {
    EXPECT_EQ(e.fault.disposition, v1::DISPOSITION_INCORRECT);
    EXPECT_NE(std::string(e.what()).find("failed twice"), std::string::npos) << e.what();
  }
}

TEST_F(PhaseTest, ALostCudaContextIsACrashInTheBuildCall) {
  FakeLauncher launcher({.fail_every_run = true});
  launcher.script.fail_run_loses_context = true;
  try {
    run_ab(launcher, ab_setup());
    FAIL() << "expected a JobFailure";
  } catch (const JobFailure& e) {
    EXPECT_EQ(e.fault.disposition, v1::DISPOSITION_CRASHED);
    EXPECT_EQ(e.fault.detail, "cudaErrorIllegalAddress in gemm_run (the CUDA context is lost)");
  }
}

TEST_F(PhaseTest, AWorkerThatDiesOnceIsRestartedAndTheRunRetried) {
  FakeLauncher launcher({.noise = 0.005, .die_run = 2});
  const AbOutcome out = run_ab(launcher, ab_setup());
  ASSERT_EQ(out.recovered.size(), 1u);
  EXPECT_NE(out.recovered[0].find("SIGSEGV in gemm_run"), std::string::npos) << out.recovered[0];
}

TEST_F(PhaseTest, AHungRunIsKilledAndTheRetryThatHangsTooIsATimeout) {
  FakeLauncher launcher;
  int hung = 0;
  launcher.script.on_run = [&](int run) {
    if (run >= 1) launcher.script.hang_run = run, ++hung;  // every run from the second on hangs
  };
  try {
    run_ab(launcher, ab_setup());
    FAIL() << "expected a JobFailure";
  } catch (const JobFailure& e) {
    EXPECT_EQ(e.fault.disposition, v1::DISPOSITION_TIMEOUT);
    EXPECT_EQ(e.fault.detail, "run exceeded 7 s in gemm_run");
  }
  EXPECT_EQ(hung, 2);
  EXPECT_GE(launcher.journal.kills, 2) << "each hung worker's group is killed";
}

TEST_F(PhaseTest, CancelStopsTheAbBetweenRuns) {
  std::atomic<int> stop{kKeepRunning};
  FakeLauncher launcher({.noise = 0.02});
  launcher.script.on_run = [&](int run) {
    if (run == 4) stop = kCancelJob;
  };
  EXPECT_THROW(run_ab(launcher, ab_setup(), &stop), JobCancelled);
  EXPECT_EQ(launcher.journal.runs, 5) << "no run is started after the cancel";
}

TEST_F(PhaseTest, DeviceMemoryThatGrowsEveryRunIsALeak) {
  FakeLauncher launcher({.noise = 0.005, .device_growth_per_run = int64_t(64) << 20});
  const AbOutcome out = run_ab(launcher, ab_setup());
  ASSERT_FALSE(out.leaks.empty());
  EXPECT_GT(out.leaks[0].device_bytes(), int64_t(64) << 20);
}

TEST_F(PhaseTest, SteadyMemoryIsNotALeak) {
  FakeLauncher launcher({.noise = 0.005});
  EXPECT_TRUE(run_ab(launcher, ab_setup()).leaks.empty());
}

// ---- parity ----

v1::WorkerRecord parity_case(const std::string& type, v1::CaseOutcome outcome, const std::string& message = "") {
  v1::WorkerRecord r;
  auto* p = r.mutable_parity();
  p->set_type(type);
  p->set_path(v1::GEMM_PATH_MMQ);
  p->mutable_shape()->set_nt(8);
  p->mutable_shape()->set_od(96);
  p->mutable_shape()->set_k(512);
  p->set_outcome(outcome);
  p->set_message(message);
  p->set_activation(v1::ACTIVATION_KIND_RANDOM);
  return r;
}

v1::WorkerRecord parity_summary(int64_t before, int64_t after) {
  v1::WorkerRecord r;
  r.mutable_summary()->mutable_memory_before()->set_host_rss_bytes(before);
  r.mutable_summary()->mutable_memory_after()->set_host_rss_bytes(after);
  return r;
}

class ParityPhaseTest : public PhaseTest {
 protected:
  ParityOutcome run_parity(FakeLauncher& launcher, v1::ShapeSet shapes = v1::SHAPE_SET_QUICK) {
    const db::Job job = running_job(v1::JobSpec());
    job_id_ = job.id;
    JobRecorder recorder(*store_, events_, job, "cpu", "");
    const JobControl control(keep_running_, std::chrono::seconds(3600));
    ParitySetup setup;
    setup.worker_binary = "qgate-worker";
    setup.build_id = candidate_.id;
    setup.shapes = shapes;
    v1::JobProgress progress;
    ParityPhase phase(setup, launcher, recorder, control);
    args_ = phase.worker_args();
    return phase.run(progress);
  }
  db::RowId job_id_ = 0;
  std::vector<std::string> args_;
};

TEST_F(ParityPhaseTest, CountsAndStoresEveryCase) {
  FakeLauncher launcher;
  launcher.script.parity = {parity_case("q4_0", v1::CASE_OUTCOME_PASSED),
                            parity_case("q4_1", v1::CASE_OUTCOME_INCORRECT, "3 elements out of bounds"),
                            parity_case("q8_0", v1::CASE_OUTCOME_NOT_SUPPORTED), parity_summary(100 << 20, 100 << 20)};
  const ParityOutcome out = run_parity(launcher);
  EXPECT_EQ(out.passed, 1);
  EXPECT_EQ(out.failed, 1);
  EXPECT_EQ(out.first_failure, "q4_1 mmq 8x96x512: 3 elements out of bounds");
  EXPECT_FALSE(out.leak.has_value());
  EXPECT_EQ(store_->parity_cases(job_id_).size(), 3u);
  EXPECT_NE(std::find(args_.begin(), args_.end(), "quick"), args_.end());
}

TEST_F(ParityPhaseTest, ASweepThatEndsShortOfItsPlanIsNoVerdict) {
  // A summary after 2 of 3 planned cases: whatever wrote it, it is not a sweep.
  FakeLauncher launcher;
  v1::WorkerRecord plan;
  plan.mutable_plan()->set_cases(3);
  launcher.script.parity = {plan, parity_case("q4_0", v1::CASE_OUTCOME_PASSED),
                            parity_case("q4_1", v1::CASE_OUTCOME_PASSED), parity_summary(100 << 20, 100 << 20)};
  try {
    run_parity(launcher);
    FAIL() << "a short sweep must not end in an outcome";
  } catch (const JobFailure& e) {
    EXPECT_NE(std::string(e.what()).find("reported 2 cases of a plan of 3"), std::string::npos) << e.what();
  }
}

TEST_F(ParityPhaseTest, ALostContextStopsTheSweepAsACrash) {
  FakeLauncher launcher;
  v1::WorkerRecord lost = parity_case("q4_K", v1::CASE_OUTCOME_ERROR, "cudaErrorIllegalAddress");
  lost.mutable_parity()->mutable_cuda()->set_error("cudaErrorIllegalAddress");
  lost.mutable_parity()->mutable_cuda()->set_last_build_call("qgate_gemm_prepare");
  lost.mutable_parity()->mutable_cuda()->set_context_lost(true);
  launcher.script.parity = {parity_case("q4_0", v1::CASE_OUTCOME_PASSED), lost,
                            parity_case("q5_K", v1::CASE_OUTCOME_ERROR), parity_summary(0, 0)};
  try {
    run_parity(launcher);
    FAIL() << "expected a JobFailure";
  } catch (const JobFailure& e) {
    EXPECT_EQ(e.fault.disposition, v1::DISPOSITION_CRASHED);
    EXPECT_EQ(e.fault.detail, "cudaErrorIllegalAddress in gemm_prepare (the CUDA context is lost)");
  }
  EXPECT_EQ(store_->parity_cases(job_id_).size(), 2u) << "the cases up to the lost context are kept";
}

TEST_F(ParityPhaseTest, ABuildThatCannotLoadIsRejected) {
  FakeLauncher launcher;
  v1::WorkerRecord error;
  error.mutable_error()->set_kind(v1::WORKER_ERROR_KIND_NOT_ELF);
  error.mutable_error()->set_message("/tmp/x.so: bad magic");
  launcher.script.parity = {error};
  try {
    run_parity(launcher);
    FAIL() << "expected a JobFailure";
  } catch (const JobFailure& e) {
    EXPECT_EQ(e.fault.disposition, v1::DISPOSITION_REJECTED);
    EXPECT_EQ(e.fault.detail, "not an ELF shared object: /tmp/x.so: bad magic");
  }
}

TEST_F(ParityPhaseTest, AWorkerThatDiesMidSweepIsACrash) {
  FakeLauncher launcher;
  launcher.script.parity = {parity_case("q4_0", v1::CASE_OUTCOME_PASSED)};  // then EOF, no summary
  try {
    run_parity(launcher);
    FAIL() << "expected a JobFailure";
  } catch (const JobFailure& e) {
    EXPECT_EQ(e.fault.disposition, v1::DISPOSITION_CRASHED);
    EXPECT_NE(e.fault.detail.find("during the parity sweep"), std::string::npos) << e.fault.detail;
  }
}

// ---- fault classification ----

TEST(FaultClassifierTest, ASignalNamesTheBuildCallItDiedIn) {
  const Fault f = FaultClassifier::died({"signal 11 (Segmentation fault)", SIGSEGV, "qgate_gemm_prepare"}, "prepare");
  EXPECT_EQ(f.disposition, v1::DISPOSITION_CRASHED);
  EXPECT_EQ(f.detail, "SIGSEGV in gemm_prepare");
  EXPECT_EQ(FaultClassifier::died({"signal 9 (Killed)", SIGKILL, ""}, "a timed run").detail,
            "SIGKILL during a timed run");
  EXPECT_EQ(FaultClassifier::died({"exit 3", 0, ""}, "prepare").detail, "the worker exited (exit 3) during prepare");
}

TEST(FaultClassifierTest, OnlyLoadErrorsAreRejections) {
  v1::WorkerError e;
  for (auto kind : {v1::WORKER_ERROR_KIND_NOT_ELF, v1::WORKER_ERROR_KIND_DLOPEN_FAILED,
                    v1::WORKER_ERROR_KIND_MISSING_SYMBOL, v1::WORKER_ERROR_KIND_ABI_MISMATCH}) {
    e.set_kind(kind);
    EXPECT_EQ(FaultClassifier::worker_error(e).disposition, v1::DISPOSITION_REJECTED) << kind;
  }
  for (auto kind : {v1::WORKER_ERROR_KIND_DEVICE, v1::WORKER_ERROR_KIND_INVALID_ARGUMENT,
                    v1::WORKER_ERROR_KIND_UNSPECIFIED}) {
    e.set_kind(kind);
    EXPECT_EQ(FaultClassifier::worker_error(e).disposition, v1::DISPOSITION_ERROR) << kind;
  }
}

TEST(FaultClassifierTest, AFailureWithoutALostContextIsIncorrect) {
  v1::CudaFailure cuda;
  cuda.set_error("cudaErrorInvalidValue");
  EXPECT_EQ(FaultClassifier::failed("timed run failed", "bad", cuda, "a timed run").disposition,
            v1::DISPOSITION_INCORRECT);
  cuda.set_context_lost(true);
  EXPECT_EQ(FaultClassifier::failed("timed run failed", "bad", cuda, "a timed run").detail,
            "cudaErrorInvalidValue in a timed run (the CUDA context is lost)");
}

// ---- the runner: phases composed into a verdict and a disposition ----

class RunnerTest : public PhaseTest {
 protected:
  db::Job run_job(FakeLauncher& launcher, const v1::JobSpec& spec, bool with_baseline = false) {
    const db::Job job = running_job(spec, with_baseline);
    options_.backend = "cpu";
    options_.data_dir = (dir_ / "data").string();
    options_.worker_binary = "qgate-worker";
    // The runner owns its launcher; the test keeps the journal through a forwarding one.
    struct Forward final : WorkerLauncher {
      explicit Forward(FakeLauncher& l) : inner(l) {}
      std::unique_ptr<WorkerChannel> launch(const WorkerLaunch& w) override { return inner.launch(w); }
      FakeLauncher& inner;
    };
    JobRunner runner(*store_, events_, options_, sampler_, std::make_shared<Forward>(launcher));
    runner.run(job, keep_running_);
    return *store_->find_job(job.id);
  }
  DaemonOptions options_;
};

TEST_F(RunnerTest, AGateWhoseParityFailsNeverStartsTheAb) {
  FakeLauncher launcher;
  launcher.script.parity = {parity_case("q4_0", v1::CASE_OUTCOME_INCORRECT, "NaN"), parity_summary(0, 0)};
  v1::JobSpec spec;
  spec.set_kind(v1::JOB_KIND_GATE);
  const db::Job job = run_job(launcher, spec, true);
  EXPECT_EQ(job.state, db::JobState::Done);
  EXPECT_EQ(job.disposition, db::Disposition::Incorrect);
  EXPECT_EQ(launcher.journal.launches, 1) << "only the parity worker";
  EXPECT_EQ(store_->find_verdict(job.id)->verdict, Verdict::Fail);
}

TEST_F(RunnerTest, AStoredBuildEditedOnDiskIsNeverRun) {
  FakeLauncher launcher;
  launcher.script.parity = {parity_case("q4_0", v1::CASE_OUTCOME_PASSED), parity_summary(0, 0)};
  std::ofstream(candidate_.artifact_path, std::ios::app) << " and an edit";
  v1::JobSpec spec;
  spec.set_kind(v1::JOB_KIND_PARITY);
  const db::Job job = run_job(launcher, spec);
  EXPECT_EQ(job.state, db::JobState::Failed);
  ASSERT_TRUE(job.error.has_value());
  EXPECT_NE(job.error->find("has changed since it was uploaded"), std::string::npos) << *job.error;
  EXPECT_EQ(launcher.journal.launches, 0) << "no worker may load the edited file";
}

TEST_F(RunnerTest, AnEditedBaselineStopsTheGateBeforeItsArmStarts) {
  FakeLauncher launcher;
  launcher.script.build_tokens_per_s = {{candidate_.artifact_path, 1000}, {baseline_.artifact_path, 1000}};
  std::ofstream(baseline_.artifact_path, std::ios::app) << " and an edit";
  v1::JobSpec spec;
  spec.set_kind(v1::JOB_KIND_GATE);
  spec.set_parity_shapes(v1::SHAPE_SET_NONE);
  const db::Job job = run_job(launcher, spec, true);
  EXPECT_EQ(job.state, db::JobState::Failed);
  ASSERT_TRUE(job.error.has_value());
  EXPECT_NE(job.error->find("arm B: the stored build"), std::string::npos) << *job.error;
}

TEST_F(RunnerTest, ALeakingBuildFailsTheGateAsLeaked) {
  FakeLauncher launcher({.noise = 0.005, .device_growth_per_run = int64_t(64) << 20});
  launcher.script.build_tokens_per_s = {{candidate_.artifact_path, 1000}, {baseline_.artifact_path, 1000}};
  v1::JobSpec spec;
  spec.set_kind(v1::JOB_KIND_GATE);
  spec.set_parity_shapes(v1::SHAPE_SET_NONE);
  const db::Job job = run_job(launcher, spec, true);
  EXPECT_EQ(job.state, db::JobState::Done);
  EXPECT_EQ(job.disposition, db::Disposition::Leaked);
  EXPECT_NE(job.disposition_detail.find("arm A"), std::string::npos) << job.disposition_detail;
  EXPECT_EQ(store_->find_verdict(job.id)->verdict, Verdict::Fail);
}

TEST_F(RunnerTest, ALeakAllowedByThePolicyKeepsTheSpeedVerdict) {
  FakeLauncher launcher({.noise = 0.005, .device_growth_per_run = int64_t(64) << 20});
  launcher.script.build_tokens_per_s = {{candidate_.artifact_path, 1000}, {baseline_.artifact_path, 1000}};
  v1::JobSpec spec;
  spec.set_kind(v1::JOB_KIND_GATE);
  spec.set_parity_shapes(v1::SHAPE_SET_NONE);
  spec.mutable_policy()->set_allow_leaks(true);
  const db::Job job = run_job(launcher, spec, true);
  EXPECT_EQ(job.disposition, db::Disposition::Leaked);
  EXPECT_EQ(store_->find_verdict(job.id)->verdict, Verdict::Pass);
}

TEST_F(RunnerTest, ACrashEndsTheJobFailedWithItsDisposition) {
  FakeLauncher launcher({.die_run = 0});
  launcher.script.on_run = [&](int run) { launcher.script.die_run = run; };  // every run dies
  v1::JobSpec spec;
  spec.set_kind(v1::JOB_KIND_AB);
  const db::Job job = run_job(launcher, spec);
  EXPECT_EQ(job.state, db::JobState::Failed);
  EXPECT_EQ(job.disposition, db::Disposition::Crashed);
  EXPECT_EQ(job.disposition_detail, "SIGSEGV in gemm_run");
}

}  // namespace
}  // namespace qgate::server
