// Tests of the application layer behind the Harness RPCs, without gRPC: submit, read, cancel,
// re-measure and compare against a real SQLite store in a temporary directory, with the daemon's
// scheduler and event hub replaced by a recorder.
#include "qgate/jobs/jobs_application.h"

#include <cmath>
#include <fstream>
#include <filesystem>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "qgate/db/sqlite_store.h"
#include "qgate/jobs/gpu_choice.h"
#include "qgate/jobs/job_messages.h"
#include "store_test_support.h"

namespace qgate::jobs {
namespace {

/// Records what the application asked of the daemon.
class RecordingHooks final : public DaemonHooks {
 public:
  void job_queued() override { ++queued_calls; }
  bool cancel_running(db::RowId job_id) override {
    cancelled.push_back(job_id);
    return runs_here;
  }
  db::RowId running_job() const override { return 0; }
  void publish(const v1::JobEvent& event) override { events.push_back(event); }

  int queued_calls = 0;
  bool runs_here = true;  // false: the running jobs run on another daemon of a fleet
  std::vector<db::RowId> cancelled;
  std::vector<v1::JobEvent> events;
};

/// Runs `call` and returns the kind of ApplicationError it threw (failing the test when it threw
/// none); its message must contain `words`.
ApplicationErrorKind refusal(const std::function<void()>& call, const std::string& words = "") {
  try {
    call();
  } catch (const ApplicationError& error) {
    EXPECT_NE(std::string(error.what()).find(words), std::string::npos) << error.what();
    return error.kind();
  }
  ADD_FAILURE() << "no ApplicationError was thrown";
  return ApplicationErrorKind::InvalidArgument;
}

cotenant::DeviceNow device_that_sees_load() {
  cotenant::DeviceNow now;
  now.available = true;
  now.state = "quiet";
  return now;
}

class JobsApplicationTest : public ::testing::Test {
 protected:
  JobsApplicationTest() { options_.backend = "cpu"; }

  static v1::SubmitHeader ab_header(const std::string& name) {
    v1::SubmitHeader header;
    header.mutable_build()->set_name(name);
    header.mutable_build()->set_commit("c0ffee");
    header.set_size_bytes(4096);
    header.mutable_job()->set_kind(v1::JOB_KIND_AB);
    header.mutable_job()->set_tokens(256);
    return header;
  }

  SubmitOutcome submit(const v1::SubmitHeader& header, const std::string& sha256) {
    return submission_.accept(header, StoredUpload{"/artifacts/" + sha256, sha256, 4096});
  }

  /// A job submitted, claimed and finished with `report` and `disposition`.
  db::RowId finished_job(const v1::VerdictReport& report, v1::Disposition disposition) {
    const db::RowId id = submit(ab_header("mmq-k"), std::string(64, 'a')).job_id;
    EXPECT_EQ(store_->claim_next_job(std::nullopt)->id, id);
    v1::JobProgress progress;
    progress.set_phase("done");
    progress.set_pairs_done(8);
    EXPECT_TRUE(store_->finish_job_with_verdict(verdict_row(id, report),
                                                db::JobEnding{from_proto(disposition), "kept 1 MiB"},
                                                progress_json(progress)));
    return id;
  }

  db::testing::TempDir dir_;
  std::unique_ptr<db::Store> store_ = db::testing::open_store(dir_.file("qgate.db"));
  JobPolicy options_;
  RecordingHooks hooks_;
  JobSubmission submission_{*store_, hooks_, options_};
  JobQueries queries_{*store_};
  JobCancellation cancellation_{*store_, hooks_};
  Remeasurement remeasurement_{*store_, hooks_, options_};
  BuildComparer comparer_{*store_};
};

// --- Submit ---

TEST_F(JobsApplicationTest, SubmitStoresTheBuildAndAJobWithItsSpecColumns) {
  v1::SubmitHeader header = ab_header("mmq-k");
  header.mutable_job()->set_order(v1::RUN_ORDER_SEQUENTIAL);
  header.mutable_job()->set_timing(v1::TIMING_MODE_PASS);
  header.mutable_job()->set_parity_shapes(v1::SHAPE_SET_QUICK);
  header.mutable_job()->set_numerics(v1::NUMERICS_PROFILE_GGML);
  header.mutable_job()->set_timeout_s(120);
  const SubmitOutcome outcome = submit(header, std::string(64, 'a'));
  EXPECT_FALSE(outcome.build_existed);
  EXPECT_EQ(outcome.build.name, "mmq-k");
  EXPECT_EQ(hooks_.queued_calls, 1);

  const auto job = store_->find_job(outcome.job_id);
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->kind, "ab");
  EXPECT_EQ(job->backend, "cpu");
  EXPECT_EQ(job->tokens, 256);
  EXPECT_EQ(job->order, db::RunOrder::Sequential);
  EXPECT_EQ(job->timing, db::TimingMode::Pass);
  EXPECT_EQ(job->parity_shapes, db::ShapeSet::Quick);
  EXPECT_EQ(job->numerics, "ggml");
  EXPECT_EQ(job->timeout_s, 120);
  // The stored spec reads back as submitted.
  EXPECT_EQ(spec_of(*job).order(), v1::RUN_ORDER_SEQUENTIAL);

  // The same bytes again: the build is shared, a second job queued.
  const SubmitOutcome again = submit(ab_header("mmq-k"), std::string(64, 'a'));
  EXPECT_TRUE(again.build_existed);
  EXPECT_EQ(again.build.id, outcome.build.id);
  EXPECT_NE(again.job_id, outcome.job_id);
}

TEST_F(JobsApplicationTest, UnknownEnumValuesAreRefusedByName) {
  v1::SubmitHeader header = ab_header("mmq-k");
  header.mutable_job()->set_order(static_cast<v1::RunOrder>(9));
  EXPECT_EQ(refusal([&] { submission_.validate_header(header); }, "order 9 is not one of abba, sequential"),
            ApplicationErrorKind::InvalidArgument);
  header = ab_header("mmq-k");
  header.mutable_job()->set_timing(static_cast<v1::TimingMode>(7));
  EXPECT_EQ(refusal([&] { submission_.validate_header(header); }, "timing 7 is not one of gemm, pass"),
            ApplicationErrorKind::InvalidArgument);
  header = ab_header("mmq-k");
  header.mutable_job()->set_parity_shapes(static_cast<v1::ShapeSet>(42));
  EXPECT_EQ(refusal([&] { submission_.validate_header(header); }, "parity_shapes 42"),
            ApplicationErrorKind::InvalidArgument);
  EXPECT_EQ(refusal([&] { submit(header, std::string(64, 'a')); }, "parity_shapes 42"),
            ApplicationErrorKind::InvalidArgument);
  EXPECT_EQ(store_->count_jobs(db::JobFilter{}), 0);
}

TEST_F(JobsApplicationTest, OversizedMetadataAndInvertedPairBudgetsAreRefused) {
  // A 5 MB commit text was once stored and served to every reader of the job list.
  v1::SubmitHeader header = ab_header("mmq-k");
  header.mutable_build()->set_commit(std::string(5 << 20, 'c'));
  EXPECT_EQ(refusal([&] { submit(header, std::string(64, 'a')); }, "the build's commit is 5242880 bytes; at most 256"),
            ApplicationErrorKind::InvalidArgument);
  header = ab_header("mmq-k");
  header.mutable_build()->set_flags(std::string(4097, 'f'));
  EXPECT_EQ(refusal([&] { submission_.validate_header(header); }, "the build's flags is 4097 bytes"),
            ApplicationErrorKind::InvalidArgument);
  header = ab_header("mmq-k");
  header.mutable_build()->set_branch(std::string(256, 'b'));
  header.mutable_build()->set_commit(std::string(256, 'c'));
  EXPECT_NO_THROW(submission_.validate_header(header)) << "the limits themselves are allowed";
  header = ab_header("mmq-k");
  header.mutable_job()->mutable_policy()->set_min_pairs(20);
  header.mutable_job()->mutable_policy()->set_max_pairs(8);
  EXPECT_EQ(refusal([&] { submission_.validate_header(header); }, "min_pairs 20 is more than max_pairs 8"),
            ApplicationErrorKind::InvalidArgument);
  header.mutable_job()->mutable_policy()->set_slowdown_threshold(std::nan(""));
  header.mutable_job()->mutable_policy()->set_max_pairs(20);
  EXPECT_EQ(refusal([&] { submission_.validate_header(header); }, "slowdown_threshold must be in [0, 1)"),
            ApplicationErrorKind::InvalidArgument);
  EXPECT_EQ(store_->count_jobs(db::JobFilter{}), 0) << "nothing refused is stored";
}

TEST_F(JobsApplicationTest, AModelFileMustLieInAFolderTheOperatorAllowed) {
  // A job naming any file the daemon can read once put that file's first bytes in job text anyone
  // could read (/etc/shadow gave "root").
  const std::filesystem::path models = std::filesystem::path(::testing::TempDir()) / "qgate-models-allowed";
  std::filesystem::create_directories(models);
  std::ofstream(models / "m.gguf") << "GGUF";
  v1::SubmitHeader header = ab_header("mmq-k");
  header.mutable_job()->set_kind(v1::JOB_KIND_PARITY);
  header.mutable_job()->set_parity_gguf("/etc/passwd");
  EXPECT_EQ(refusal([&] { submission_.validate_header(header); }, "reads no model files: start it with --models-dir"),
            ApplicationErrorKind::InvalidArgument);
  options_.models_dirs = {models.string()};
  EXPECT_EQ(refusal([&] { submission_.validate_header(header); }, "is outside the daemon's --models-dir folders"),
            ApplicationErrorKind::InvalidArgument);
  header.mutable_job()->set_parity_gguf((models / ".." / "qgate-models-allowed" / ".." / "x.gguf").string());
  EXPECT_EQ(refusal([&] { submission_.validate_header(header); }, "is outside"), ApplicationErrorKind::InvalidArgument)
      << "'..' does not lead out of the folder";
  std::filesystem::create_symlink("/etc/passwd", models / "link.gguf");
  header.mutable_job()->set_parity_gguf((models / "link.gguf").string());
  EXPECT_EQ(refusal([&] { submission_.validate_header(header); }, "is outside"), ApplicationErrorKind::InvalidArgument)
      << "a link out of the folder is followed before the check";
  header.mutable_job()->set_parity_gguf((models / "m.gguf").string());
  EXPECT_NO_THROW(submission_.validate_header(header));
  std::filesystem::remove_all(models);
}

TEST_F(JobsApplicationTest, ParityJobWithNoShapesAndNoModelFileIsRefused) {
  v1::SubmitHeader header = ab_header("mmq-k");
  header.mutable_job()->set_kind(v1::JOB_KIND_PARITY);
  header.mutable_job()->set_parity_shapes(v1::SHAPE_SET_NONE);
  EXPECT_EQ(refusal([&] { submission_.validate_header(header); }, "nothing to run"),
            ApplicationErrorKind::InvalidArgument);
  header.mutable_job()->set_parity_shapes(v1::SHAPE_SET_QUICK);
  EXPECT_NO_THROW(submission_.validate_header(header));
}

TEST_F(JobsApplicationTest, GateNeedsAKnownBaselineAndRecordsIt) {
  v1::SubmitHeader header = ab_header("mmq-k");
  header.mutable_job()->set_kind(v1::JOB_KIND_GATE);
  EXPECT_EQ(refusal([&] { submission_.validate_header(header); }, "needs a baseline"),
            ApplicationErrorKind::InvalidArgument);
  header.mutable_job()->set_baseline("mmq-base");
  EXPECT_EQ(refusal([&] { submission_.validate_header(header); }, "no build named or numbered 'mmq-base'"),
            ApplicationErrorKind::InvalidArgument);
  const db::RowId baseline = submit(ab_header("mmq-base"), std::string(64, 'b')).build.id;
  const SubmitOutcome gate = submit(header, std::string(64, 'a'));
  EXPECT_EQ(store_->find_job(gate.job_id)->baseline_build_id, baseline);
}

TEST_F(JobsApplicationTest, MislabelledBuildAndFullQueueAreRefused) {
  submit(ab_header("mmq-k"), std::string(64, 'a'));
  EXPECT_EQ(refusal([&] { submit(ab_header("mmq-k"), std::string(64, 'c')); }, "already submitted with other bytes"),
            ApplicationErrorKind::InvalidArgument);
  options_.max_queued_jobs = 1;
  EXPECT_EQ(refusal([&] { submit(ab_header("other"), std::string(64, 'd')); }, "the queue is full (1 jobs)"),
            ApplicationErrorKind::ResourceExhausted);
}

// --- Reading jobs ---

TEST_F(JobsApplicationTest, JobIsReadFromRowsWithItsWholeVerdictAndDisposition) {
  v1::VerdictReport report;
  report.set_verdict(v1::VERDICT_PASS);
  report.set_comparison(v1::COMPARISON_SAME);
  report.set_ratio(1.01);
  report.set_ci_low(0.99);
  report.set_ci_high(1.03);
  report.set_pairs(8);
  report.mutable_arm_a()->set_label("mmq");
  report.mutable_arm_a()->set_tokens_per_s(404);
  report.mutable_arm_a()->set_runs(8);
  report.mutable_arm_b()->set_label("f16");
  report.mutable_arm_b()->set_tokens_per_s(400);
  report.mutable_arm_b()->set_runs(8);
  report.add_reasons("within 2%");
  report.set_p_value(0.4);
  report.set_profile("llama-7b");
  report.set_tokens(256);
  report.set_backend("cpu");
  auto* type = report.add_per_type();
  type->set_weight_type("q4_K");
  type->set_ratio(1.02);
  type->set_comparison(v1::COMPARISON_SAME);
  type->set_gemm_us_a(100);
  auto* leak = report.add_leaks();
  leak->set_where("arm A across runs");
  leak->set_device_bytes(1 << 20);
  leak->set_detail("grew by 1 MiB");
  const db::RowId id = finished_job(report, v1::DISPOSITION_LEAKED);

  const v1::Job job = queries_.job(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_DONE);
  EXPECT_EQ(job.disposition(), v1::DISPOSITION_LEAKED);
  EXPECT_EQ(job.disposition_detail(), "kept 1 MiB");
  EXPECT_EQ(job.progress().pairs_done(), 8);
  EXPECT_EQ(job.phase(), "done");
  EXPECT_EQ(job.build().metadata().name(), "mmq-k");
  EXPECT_EQ(job.spec().tokens(), 256);
  EXPECT_EQ(job.verdict().SerializeAsString(), report.SerializeAsString())
      << job.verdict().DebugString() << "\nvs\n" << report.DebugString();

  EXPECT_EQ(refusal([&] { queries_.job(id + 1); }, "no job"), ApplicationErrorKind::NotFound);
}

TEST_F(JobsApplicationTest, ListFiltersByStateAndCountsTheQueue) {
  submit(ab_header("one"), std::string(64, '1'));
  v1::SubmitHeader waiting = ab_header("two");
  waiting.mutable_job()->set_wait_for_quiet(true);
  submit(waiting, std::string(64, '2'));
  submit(ab_header("three"), std::string(64, '3'));
  store_->claim_next_job(std::nullopt);  // "one" runs

  EXPECT_EQ(queries_.list(v1::JOB_STATE_UNSPECIFIED, 0).size(), 3u);
  EXPECT_EQ(queries_.list(v1::JOB_STATE_UNSPECIFIED, 2).size(), 2u);
  const auto running = queries_.list(v1::JOB_STATE_RUNNING, 0);
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(running[0].build().metadata().name(), "one");
  const auto quiet = queries_.list(v1::JOB_STATE_WAITING_QUIET, 0);
  ASSERT_EQ(quiet.size(), 1u);
  EXPECT_EQ(quiet[0].state(), v1::JOB_STATE_WAITING_QUIET);
  EXPECT_EQ(quiet[0].build().metadata().name(), "two");

  const QueueCounts counts = queries_.queue_counts();
  EXPECT_EQ(counts.queued, 2);
  EXPECT_EQ(counts.waiting_quiet, 1);
  EXPECT_EQ(refusal([&] { queries_.list(static_cast<v1::JobState>(99), 0); }, "unknown job state 99"),
            ApplicationErrorKind::InvalidArgument);
  EXPECT_EQ(refusal([&] { queries_.list(v1::JOB_STATE_DONE, 10001); }, "limit"),
            ApplicationErrorKind::InvalidArgument);
}

// --- Cancel ---

TEST_F(JobsApplicationTest, CancelEndsAQueuedJobAndAsksTheSchedulerForARunningOne) {
  const db::RowId running = submit(ab_header("one"), std::string(64, '1')).job_id;
  const db::RowId queued = submit(ab_header("two"), std::string(64, '2')).job_id;
  store_->claim_next_job(std::nullopt);

  const v1::Job cancelled = cancellation_.cancel(queued);
  EXPECT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(cancelled.error(), "cancelled before it started");
  ASSERT_EQ(hooks_.events.size(), 1u);
  EXPECT_EQ(hooks_.events[0].job_id(), queued);
  EXPECT_EQ(hooks_.events[0].state(), v1::JOB_STATE_CANCELLED);

  EXPECT_EQ(cancellation_.cancel(running).state(), v1::JOB_STATE_RUNNING);  // the runner ends it
  EXPECT_EQ(hooks_.cancelled, std::vector<db::RowId>{running});

  EXPECT_EQ(refusal([&] { cancellation_.cancel(queued); }, "has already ended (cancelled)"),
            ApplicationErrorKind::FailedPrecondition);
  EXPECT_EQ(refusal([&] { cancellation_.cancel(999); }, "no job 999"), ApplicationErrorKind::NotFound);
}

TEST_F(JobsApplicationTest, ACancelOfAJobRunningOnAnotherDaemonIsWrittenOnItsRowForThatDaemon) {
  const db::RowId elsewhere = submit(ab_header("one"), std::string(64, '1')).job_id;
  store_->claim_next_job(std::nullopt);
  hooks_.runs_here = false;
  EXPECT_FALSE(store_->find_job(elsewhere)->cancel_requested);
  EXPECT_EQ(cancellation_.cancel(elsewhere).state(), v1::JOB_STATE_RUNNING);
  EXPECT_TRUE(store_->find_job(elsewhere)->cancel_requested);
}

TEST_F(JobsApplicationTest, ARemeasureAsksForTheGpuModelItsRunsRanOn) {
  const db::RowId id = finished_job(v1::VerdictReport{}, v1::DISPOSITION_OK);
  db::Run run = db::testing::make_done_run(store_->find_job(id)->build_id, "cpu-tiny", "", 1000, 100.0, false);
  run.job_id = id;
  run.gpu_name = "NVIDIA H200";
  db::RunBundle bundle;
  bundle.run = run;
  store_->record_runs(std::vector<db::RunBundle>{bundle});
  v1::RemeasureRequest request;
  request.set_job_id(id);
  const v1::RemeasureResponse response = remeasurement_.remeasure(request, device_that_sees_load());
  ASSERT_EQ(response.jobs_size(), 1);
  EXPECT_EQ(response.jobs(0).spec().gpu_model(), "NVIDIA H200");
  EXPECT_EQ(store_->find_job(response.jobs(0).id())->gpu_model, "NVIDIA H200");
}

// --- Remeasure ---

TEST_F(JobsApplicationTest, RemeasureQueuesOneQuietWindowRerunPerJob) {
  const db::RowId original = finished_job(v1::VerdictReport{}, v1::DISPOSITION_OK);
  v1::RemeasureRequest request;
  request.set_job_id(original);
  request.set_run_contended_on_expiry(true);

  const v1::RemeasureResponse first = remeasurement_.remeasure(request, device_that_sees_load());
  ASSERT_EQ(first.jobs_size(), 1);
  EXPECT_EQ(first.jobs(0).state(), v1::JOB_STATE_WAITING_QUIET);
  EXPECT_EQ(first.jobs(0).spec().remeasure_of(), original);
  const auto rerun = store_->find_job(first.jobs(0).id());
  EXPECT_EQ(rerun->remeasure_of, original);
  EXPECT_TRUE(rerun->quiet_only);
  EXPECT_TRUE(rerun->wait_for_quiet);
  EXPECT_TRUE(rerun->run_contended_on_expiry);
  EXPECT_TRUE(rerun->deadline_ms.has_value());
  EXPECT_EQ(rerun->build_id, store_->find_job(original)->build_id);

  // A second request while the first is pending is reported, not queued.
  const v1::RemeasureResponse second = remeasurement_.remeasure(request, device_that_sees_load());
  EXPECT_EQ(second.jobs_size(), 0);
  ASSERT_EQ(second.skipped_job_ids_size(), 1);
  EXPECT_EQ(second.skipped_job_ids(0), original);
  EXPECT_EQ(store_->count_jobs(db::JobFilter{}), 2);
}

TEST_F(JobsApplicationTest, RemeasureOfAReMeasureMeasuresTheOriginal) {
  const db::RowId original = finished_job(v1::VerdictReport{}, v1::DISPOSITION_OK);
  v1::RemeasureRequest request;
  request.set_job_id(original);
  const db::RowId rerun = remeasurement_.remeasure(request, device_that_sees_load()).jobs(0).id();
  ASSERT_TRUE(store_->end_job(rerun, db::JobState::Expired, "no quiet window", {}, db::JobState::Queued));

  request.set_job_id(rerun);
  const v1::RemeasureResponse again = remeasurement_.remeasure(request, device_that_sees_load());
  ASSERT_EQ(again.jobs_size(), 1);
  EXPECT_EQ(store_->find_job(again.jobs(0).id())->remeasure_of, original);
}

TEST_F(JobsApplicationTest, RemeasureRefusesWhatItCannotDo) {
  const db::RowId queued = submit(ab_header("one"), std::string(64, '1')).job_id;
  v1::RemeasureRequest request;
  request.set_job_id(queued);
  cotenant::DeviceNow blind;
  blind.unavailable_reason = "no NVML";
  EXPECT_EQ(refusal([&] { remeasurement_.remeasure(request, blind); }, "cannot see co-tenant load (no NVML)"),
            ApplicationErrorKind::FailedPrecondition);
  EXPECT_EQ(refusal([&] { remeasurement_.remeasure(request, device_that_sees_load()); }, "has not ended (queued)"),
            ApplicationErrorKind::FailedPrecondition);
  request.set_contended(true);
  EXPECT_EQ(refusal([&] { remeasurement_.remeasure(request, device_that_sees_load()); }, "not both"),
            ApplicationErrorKind::InvalidArgument);
  request.set_job_id(999);
  request.set_contended(false);
  EXPECT_EQ(refusal([&] { remeasurement_.remeasure(request, device_that_sees_load()); }, "no job 999"),
            ApplicationErrorKind::NotFound);
}

TEST_F(JobsApplicationTest, AJobIsQueuedForItsGpuOrAnyAndReMeasuredOnTheGpuAsked) {
  options_.served = {{0, "H200", "GPU-0"}, {1, "H200", "GPU-1"}};
  v1::SubmitHeader pinned = ab_header("pinned");
  pinned.mutable_job()->add_gpus(1);
  EXPECT_EQ(store_->find_job(submit(pinned, std::string(64, 'p')).job_id)->device, 1);
  EXPECT_EQ(store_->find_job(submit(ab_header("any"), std::string(64, 'q')).job_id)->device, kAnyGpu);
  v1::SubmitHeader unserved = ab_header("unserved");
  unserved.mutable_job()->add_gpus(5);
  EXPECT_EQ(refusal([&] { submit(unserved, std::string(64, 'r')); }, "GPU 5 is not served by this daemon"),
            ApplicationErrorKind::InvalidArgument);

  store_->claim_next_job(1);  // the pinned job
  store_->claim_next_job(kAnyGpu);
  const db::RowId original = finished_job(v1::VerdictReport{}, v1::DISPOSITION_OK);
  v1::RemeasureRequest request;
  request.set_job_id(original);
  request.add_gpus(5);
  EXPECT_EQ(refusal([&] { remeasurement_.remeasure(request, device_that_sees_load()); },
                    "cannot be re-measured here: GPU 5 is not served"),
            ApplicationErrorKind::InvalidArgument);
  request.set_gpus(0, 1);
  const v1::RemeasureResponse rerun = remeasurement_.remeasure(request, device_that_sees_load());
  ASSERT_EQ(rerun.jobs_size(), 1);
  EXPECT_EQ(store_->find_job(rerun.jobs(0).id())->device, 1);
  EXPECT_EQ(rerun.jobs(0).spec().gpus_size(), 1);
}

// --- Compare ---

TEST_F(JobsApplicationTest, CompareNamesTheBuildItCannotFind) {
  submit(ab_header("mmq-k"), std::string(64, 'a'));
  v1::CompareRequest request;
  request.set_build_a("mmq-k");
  request.set_build_b("nowhere");
  EXPECT_EQ(refusal([&] { comparer_.compare(request); }, "no build named or numbered 'nowhere'"),
            ApplicationErrorKind::NotFound);
  request.set_build_b("mmq-k");
  EXPECT_EQ(refusal([&] { comparer_.compare(request); }, "the same build"), ApplicationErrorKind::InvalidArgument);
  submit(ab_header("mmq-j"), std::string(64, 'j'));
  request.set_build_b("mmq-j");  // neither has a run
  EXPECT_EQ(refusal([&] { comparer_.compare(request); }), ApplicationErrorKind::FailedPrecondition);
}

}  // namespace
}  // namespace qgate::jobs
