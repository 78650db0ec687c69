// The split A/B through the job runner with scripted workers (fake_worker.h) on two fake GPUs of
// different speed, and a real SQLite store: arm A alternates GPUs pair by pair while arm B takes the
// other, the GPU effect is measured and cancels out of the verdict, an A/A is recorded as the pair's
// calibration and found by the next split job (JobGpuRecords), and a calibration that read DIFFERENT
// makes the verdict INCONCLUSIVE. Also the runner's refusal of a split job without two identical GPUs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>

#include "qgate/common/sha256.h"
#include "fake_worker.h"
#include "qgate/db/sqlite_store.h"
#include "qgate/jobs/job_gpu_records.h"
#include "qgate/jobs/job_messages.h"
#include "qgate/server/job_runner.h"

namespace qgate::server {

// The application layer (jobs/) this file uses.
using jobs::GpuRun;
using jobs::JobGpuRecords;
using jobs::job_row;
using jobs::spec_of;

namespace {

using testing::FakeLauncher;
using testing::WorkerScript;

class NoSampler final : public cotenant::Sampler {
 public:
  std::optional<cotenant::Sample> read(const std::set<int>&) override { return std::nullopt; }
  bool available() const override { return false; }
  std::string unavailable_reason() const override { return "no GPU in this test"; }
};

class SplitAbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = std::filesystem::temp_directory_path() /
           ("qgate-split-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::create_directories(dir_);
    db::SqliteOptions options;
    options.path = dir_ / "qgate.db";
    store_ = db::open_sqlite_store(options);
    build_.name = "ref";
    build_.artifact_path = (dir_ / "libref.so").string();
    std::ofstream(build_.artifact_path) << "not really a build";
    build_.sha256 = qgate::common::sha256_file_hex(build_.artifact_path);  // checked before every use
    build_.id = store_->insert_build(build_).id;
    for (int i = 0; i < 2; ++i) {
      gpus_[i].ordinal = i;
      gpus_[i].name = "Fake GPU";
      gpus_[i].uuid = "GPU-fake-" + std::to_string(i);
      gpus_[i].worker_args = {"--device", std::to_string(i)};
      gpus_[i].sampler = &sampler_;
    }
    options_.backend = "cpu";
    options_.data_dir = (dir_ / "data").string();
    options_.worker_binary = "qgate-worker";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  /// Runs a split job of `spec` (its build is also its baseline for a gate: an A/A) on the pair.
  db::Job run_split(FakeLauncher& launcher, v1::JobSpec spec, std::vector<const ServedGpu*> pair = {}) {
    spec.set_split_gpus(true);
    spec.set_parity_shapes(v1::SHAPE_SET_NONE);
    spec.mutable_policy()->set_min_pairs(8);
    spec.mutable_policy()->set_max_pairs(16);
    db::Job job = job_row(spec);
    job.build_id = build_.id;
    if (spec.kind() == v1::JOB_KIND_GATE) job.baseline_build_id = build_.id;
    job.backend = "cpu";
    job.id = store_->create_job(job);
    store_->update_job_state(job.id, db::JobState::Running, std::nullopt, std::nullopt);
    struct Forward final : WorkerLauncher {
      explicit Forward(FakeLauncher& l) : inner(l) {}
      std::unique_ptr<WorkerChannel> launch(const WorkerLaunch& w) override { return inner.launch(w); }
      FakeLauncher& inner;
    };
    JobRunner runner(*store_, events_, options_, sampler_, std::make_shared<Forward>(launcher));
    JobPlacement placement;
    placement.gpus = pair.empty() ? std::vector<const ServedGpu*>{&gpus_[0], &gpus_[1]} : pair;
    runner.run(*store_->find_job(job.id), keep_running_, placement);
    return *store_->find_job(job.id);
  }
  v1::SplitGpus split_of(const db::Job& job) {
    const v1::JobSpec spec = spec_of(job);
    JobGpuRecords records(*store_);
    auto split = records.split(job, spec, records.runs(job));
    EXPECT_TRUE(split.has_value());
    return split.value_or(v1::SplitGpus{});
  }

  std::filesystem::path dir_;
  std::unique_ptr<db::Store> store_;
  EventHub events_;
  NoSampler sampler_;
  db::Build build_;
  ServedGpu gpus_[2];
  DaemonOptions options_;
  std::atomic<int> keep_running_{kKeepRunning};
};

/// A gate of the build against itself: the A/A that calibrates the pair.
v1::JobSpec aa_spec() {
  v1::JobSpec spec;
  spec.set_kind(v1::JOB_KIND_GATE);
  spec.set_baseline("ref");
  return spec;
}

v1::JobSpec ab_spec() {
  v1::JobSpec spec;
  spec.set_kind(v1::JOB_KIND_AB);
  return spec;
}

TEST_F(SplitAbTest, ArmsSwapGpusEveryPairAndTheGpuEffectCancels) {
  // GPU 1 is 30% slower; both arms the same build: without the blocks every pair would read 1.3.
  FakeLauncher launcher({.mmq_tokens_per_s = 1000, .noise = 0.0005, .device_speed = {{"0", 1.0}, {"1", 1.0 / 1.3}}});
  const db::Job job = run_split(launcher, aa_spec());
  ASSERT_EQ(job.state, db::JobState::Done) << job.error.value_or("");
  const auto verdict = store_->find_verdict(job.id);
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->comparison, Comparison::Same);
  EXPECT_EQ(verdict->verdict, Verdict::Pass);
  EXPECT_NEAR(*verdict->ratio, 1.0, 0.005);
  EXPECT_EQ(verdict->pairs % 2, 0);
  // Four workers (each arm on each GPU); in pair i arm A ran on GPU i % 2 and arm B on the other,
  // both at once.
  EXPECT_EQ(launcher.journal.launches, 4);
  const JobGpuRecords records(*store_);
  const auto runs = records.runs(job);
  ASSERT_EQ(int(runs.size()), 2 * verdict->pairs);
  for (const GpuRun& r : runs) {
    const int a_gpu = r.pair_index % 2;
    EXPECT_EQ(r.gpu.ordinal(), r.arm == "A" ? a_gpu : 1 - a_gpu) << r.arm << " pair " << r.pair_index;
    EXPECT_EQ(r.gpu.uuid(), "GPU-fake-" + std::to_string(r.gpu.ordinal()));
  }
  const v1::SplitGpus split = split_of(job);
  EXPECT_TRUE(split.is_calibration());
  EXPECT_EQ(split.first().ordinal(), 0);
  EXPECT_EQ(split.second().ordinal(), 1);
  EXPECT_EQ(split.blocks() * 2, verdict->pairs);
  EXPECT_NEAR(split.gpu_ratio(), 1.3, 0.01);
  // Its interval is narrow around it (its coverage is checked in split_gpus_test.cpp).
  EXPECT_LT(split.gpu_ci_low(), split.gpu_ratio());
  EXPECT_GT(split.gpu_ci_high(), split.gpu_ratio());
  EXPECT_NEAR(split.gpu_ci_low(), 1.3, 0.01);
  EXPECT_NEAR(split.gpu_ci_high(), 1.3, 0.01);
  EXPECT_EQ(JobGpuRecords::gpus(runs).size(), 2u);
}

TEST_F(SplitAbTest, ASplitAbIsJudgedAgainstTheStoredAaOfItsPair) {
  FakeLauncher launcher({.mmq_tokens_per_s = 1000, .f16_tokens_per_s = 500, .noise = 0.0005,
                         .device_speed = {{"0", 1.0}, {"1", 0.8}}});
  const db::Job aa = run_split(launcher, aa_spec());
  ASSERT_EQ(aa.state, db::JobState::Done);
  const db::Job ab = run_split(launcher, ab_spec());
  ASSERT_EQ(ab.state, db::JobState::Done) << ab.error.value_or("");
  const auto verdict = store_->find_verdict(ab.id);
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->comparison, Comparison::Different);
  EXPECT_NEAR(*verdict->ratio, 2.0, 0.02);  // MMQ over f16, the GPUs' 0.8 gone
  const v1::SplitGpus split = split_of(ab);
  EXPECT_FALSE(split.is_calibration());
  EXPECT_EQ(split.calibration_job_id(), aa.id);
  EXPECT_EQ(split.calibration_comparison(), v1::COMPARISON_SAME);
  EXPECT_NEAR(split.calibration_gpu_ratio(), 1.25, 0.01);
  EXPECT_NEAR(split.gpu_ratio(), 1.25, 0.01);
  bool said = false;
  for (const auto& r : verdict->reasons) said |= r.find("calibrated by job " + std::to_string(aa.id)) == 0;
  EXPECT_TRUE(said);
}

TEST_F(SplitAbTest, TheCalibrationIsFoundWithThePairInEitherOrder) {
  FakeLauncher launcher({.noise = 0.0005, .device_speed = {{"0", 1.0}, {"1", 0.8}}});
  // The A/A ran with GPU 1 first (a pair listed the other way round): its GPU ratio is 0.8.
  const db::Job aa = run_split(launcher, aa_spec(), {&gpus_[1], &gpus_[0]});
  ASSERT_EQ(aa.state, db::JobState::Done);
  const db::Job ab = run_split(launcher, ab_spec());
  const v1::SplitGpus split = split_of(ab);
  EXPECT_EQ(split.calibration_job_id(), aa.id);
  // Oriented to this job's pair: GPU 0 over GPU 1.
  EXPECT_NEAR(split.calibration_gpu_ratio(), 1.25, 0.01);
}

TEST_F(SplitAbTest, ACalibrationThatReadDifferentMakesTheVerdictInconclusive) {
  FakeLauncher launcher({.noise = 0.0005, .device_speed = {{"0", 1.0}, {"1", 0.8}}});
  const db::Job aa = run_split(launcher, aa_spec());
  ASSERT_EQ(aa.state, db::JobState::Done);
  // Suppose that A/A had read DIFFERENT: split runs on this pair are not fair.
  db::Verdict bad = *store_->find_verdict(aa.id);
  bad.comparison = Comparison::Different;
  bad.ratio = 1.05;
  bad.ci_low = 1.03;
  bad.ci_high = 1.07;
  store_->put_verdict(bad);
  const db::Job ab = run_split(launcher, ab_spec());
  const auto verdict = store_->find_verdict(ab.id);
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->verdict, Verdict::Inconclusive);
  EXPECT_EQ(verdict->comparison, Comparison::Unknown);
  bool said = false;
  for (const auto& r : verdict->reasons) said |= r.find("split runs on this pair are not fair") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST_F(SplitAbTest, AnUncalibratedPairSaysSoAndKeepsItsVerdict) {
  FakeLauncher launcher({.noise = 0.0005});
  const db::Job ab = run_split(launcher, ab_spec());
  const auto verdict = store_->find_verdict(ab.id);
  ASSERT_TRUE(verdict);
  EXPECT_EQ(verdict->comparison, Comparison::Different);
  EXPECT_EQ(split_of(ab).calibration_job_id(), 0);
  bool said = false;
  for (const auto& r : verdict->reasons) said |= r.find("has no A/A calibration yet") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST_F(SplitAbTest, ASplitJobWithoutTwoIdenticalGpusFails) {
  FakeLauncher launcher;
  const db::Job one = run_split(launcher, ab_spec(), {&gpus_[0]});
  EXPECT_EQ(one.state, db::JobState::Failed);
  EXPECT_NE(one.error.value_or("").find("needs two GPUs of one model"), std::string::npos) << one.error.value_or("");
  gpus_[1].name = "Other GPU";
  const db::Job mixed = run_split(launcher, ab_spec());
  EXPECT_EQ(mixed.state, db::JobState::Failed);
  EXPECT_NE(mixed.error.value_or("").find("GPU 0 is Fake GPU, GPU 1 is Other GPU"), std::string::npos)
      << mixed.error.value_or("");
  EXPECT_EQ(launcher.journal.launches, 0);
}

}  // namespace
}  // namespace qgate::server
