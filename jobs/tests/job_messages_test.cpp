// Tests of the row <-> message mappings: a verdict report survives the verdict rows, progress_json
// holds progress only, a listing becomes a Job without store lookups, and the enumerations map both
// ways.
#include "qgate/jobs/job_messages.h"

#include <gtest/gtest.h>

namespace qgate::jobs {
namespace {

TEST(JobRecords, VerdictRowKeepsEveryFieldOfTheReport) {
  v1::VerdictReport report;
  report.set_verdict(v1::VERDICT_FAIL);
  report.set_comparison(v1::COMPARISON_DIFFERENT);
  report.set_ratio(0.9);
  report.set_ci_low(0.88);
  report.set_ci_high(0.92);
  report.set_pairs(20);
  report.set_contended_pairs(2);
  report.mutable_arm_a()->set_label("cand");
  report.mutable_arm_a()->set_tokens_per_s(360);
  report.mutable_arm_a()->set_runs(20);
  report.mutable_arm_b()->set_label("base");
  report.mutable_arm_b()->set_tokens_per_s(400);
  report.mutable_arm_b()->set_runs(20);
  report.add_reasons("slower by 10%");
  report.add_reasons("2 contended pairs");
  report.set_parity_passed(150);
  report.set_parity_failed(3);
  report.set_profile("llama-7b");
  report.set_tokens(512);
  report.set_backend("cuda");
  report.set_p_value(0.0001);
  auto* type = report.add_per_type();
  type->set_weight_type("q6_K");
  type->set_ratio(0.8);
  type->set_ci_low(0.7);
  type->set_ci_high(0.9);
  type->set_comparison(v1::COMPARISON_DIFFERENT);
  type->set_gemm_us_a(250);
  type->set_gemm_us_b(200);
  auto* leak = report.add_leaks();
  leak->set_where("arm B at release");
  leak->set_device_bytes(4096);
  leak->set_host_bytes(8192);
  leak->set_detail("before 0, after 4096");

  const db::Verdict row = verdict_row(42, report);
  EXPECT_EQ(row.job_id, 42);
  EXPECT_EQ(row.verdict, Verdict::Fail);
  EXPECT_EQ(row.per_type.size(), 1u);
  EXPECT_EQ(row.leaks.size(), 1u);
  EXPECT_EQ(to_proto(row).SerializeAsString(), report.SerializeAsString()) << to_proto(row).DebugString();
}

TEST(JobRecords, ProgressJsonHoldsProgressOnly) {
  v1::JobProgress progress;
  progress.set_phase("ab");
  progress.set_pairs_done(3);
  progress.set_pairs_max(40);
  progress.set_ratio(1.01);
  const std::string json = progress_json(progress);
  EXPECT_EQ(json.find("report"), std::string::npos);
  EXPECT_EQ(json.find("disposition"), std::string::npos);
  EXPECT_EQ(progress_from_json(json).SerializeAsString(), progress.SerializeAsString());
  EXPECT_EQ(progress_from_json("not json").phase(), "");
}

TEST(JobRecords, ListingBecomesAJobWithBuildsVerdictAndDisposition) {
  db::JobListing listing;
  listing.job.id = 7;
  listing.job.state = db::JobState::Failed;
  listing.job.error = "worker died";
  listing.job.disposition = db::Disposition::Crashed;
  listing.job.disposition_detail = "SIGSEGV in gemm_prepare";
  listing.job.spec_json = R"({"kind":"JOB_KIND_GATE","order":"RUN_ORDER_SEQUENTIAL","parity_shapes":"SHAPE_SET_NONE"})";
  listing.build.id = 1;
  listing.build.name = "cand";
  listing.baseline = db::Build{};
  listing.baseline->id = 2;
  listing.baseline->name = "base";
  const v1::Job job = to_proto(listing);
  EXPECT_EQ(job.id(), 7);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.disposition(), v1::DISPOSITION_CRASHED);
  EXPECT_EQ(job.disposition_detail(), "SIGSEGV in gemm_prepare");
  EXPECT_EQ(job.build().metadata().name(), "cand");
  EXPECT_EQ(job.baseline().metadata().name(), "base");
  EXPECT_FALSE(job.has_verdict());
  EXPECT_EQ(job.phase(), "failed");
  EXPECT_EQ(job.spec().order(), v1::RUN_ORDER_SEQUENTIAL);
  EXPECT_EQ(job.spec().parity_shapes(), v1::SHAPE_SET_NONE);
}

TEST(JobRecords, JobRowCarriesTheSpecColumns) {
  v1::JobSpec spec;
  spec.set_kind(v1::JOB_KIND_PARITY);
  spec.set_parity_shapes(v1::SHAPE_SET_NONE);
  spec.set_timing(v1::TIMING_MODE_PASS);
  spec.set_path("f16");
  spec.set_wait_for_quiet(true);
  spec.set_quiet_deadline_unix_ms(5000);
  spec.set_remeasure_of(3);
  const db::Job job = job_row(spec);
  EXPECT_EQ(job.kind, "parity");
  EXPECT_EQ(job.parity_shapes, db::ShapeSet::None);
  EXPECT_EQ(job.timing, db::TimingMode::Pass);
  EXPECT_EQ(job.order, db::RunOrder::Abba);
  EXPECT_EQ(job.path, "f16");
  EXPECT_TRUE(job.quiet_only);
  EXPECT_EQ(job.deadline_ms, 5000);
  EXPECT_EQ(job.remeasure_of, 3);
  EXPECT_EQ(spec_of(job).SerializeAsString(), spec.SerializeAsString());
}

// A stored spec that does not parse is an error naming the job, never an empty spec; a job listing
// still shows the job, with the error.
TEST(JobRecords, AnUnreadableStoredSpecIsAnErrorNamingTheJob) {
  db::Job job = job_row(v1::JobSpec());
  job.id = 42;
  job.spec_json = "{\"kind\": \"JOB_KIND_GATE\", \"tokens\": ";
  try {
    (void)spec_of(job);
    ADD_FAILURE() << "a truncated spec was read";
  } catch (const JobSpecUnreadable& e) {
    EXPECT_EQ(std::string(e.what()).rfind("job 42: its stored spec does not parse (", 0), 0u) << e.what();
  }
  db::JobListing listing;
  listing.job = job;
  const v1::Job shown = to_proto(listing);
  EXPECT_EQ(shown.id(), 42);
  EXPECT_NE(shown.error().find("job 42: its stored spec does not parse"), std::string::npos) << shown.error();
}

TEST(JobRecords, DispositionsMapBothWays) {
  for (int value = v1::Disposition_MIN; value <= v1::Disposition_MAX; ++value) {
    const auto disposition = static_cast<v1::Disposition>(value);
    EXPECT_EQ(to_proto(from_proto(disposition)), disposition) << v1::Disposition_Name(disposition);
  }
  EXPECT_EQ(from_proto(v1::DISPOSITION_LEAKED), db::Disposition::Leaked);
  EXPECT_EQ(from_proto(v1::RUN_ORDER_UNSPECIFIED), db::RunOrder::Abba);
  EXPECT_EQ(from_proto(v1::TIMING_MODE_UNSPECIFIED), db::TimingMode::Gemm);
  EXPECT_EQ(to_proto(from_proto(v1::SHAPE_SET_QUICK)), v1::SHAPE_SET_QUICK);
}

}  // namespace
}  // namespace qgate::jobs
