// Tests of the stored enumerations' text forms and of the run series fingerprint.
#include <gtest/gtest.h>

#include "qgate/db/records.h"
#include "qgate/db/store_error.h"

namespace qgate::db {
namespace {

TEST(Records, EnumerationsRoundTripThroughText) {
  for (JobState state : {JobState::Queued, JobState::Running, JobState::Done, JobState::Failed,
                         JobState::Cancelled, JobState::Expired}) {
    EXPECT_EQ(stored_job_state(to_string(state)), state);
  }
  for (RunState state :
       {RunState::Running, RunState::Done, RunState::Failed, RunState::Interrupted}) {
    EXPECT_EQ(stored_run_state(to_string(state)), state);
  }
  // The verdict's and comparison's words are the domain's (common/); the store reads them back.
  EXPECT_EQ(stored_verdict("FAIL"), qgate::Verdict::Fail);
  EXPECT_EQ(stored_comparison("SAME"), Comparison::Same);
  EXPECT_EQ(to_string(JobState::Queued), "queued");
  EXPECT_EQ(to_string(qgate::Verdict::Inconclusive), "INCONCLUSIVE");
}

TEST(Records, UnknownTextIsAnInvalidValueError) {
  try {
    stored_job_state("paused");
    FAIL() << "unknown state accepted";
  } catch (const StoreError& error) {
    EXPECT_EQ(error.kind(), StoreErrorKind::InvalidValue);
    EXPECT_NE(std::string(error.what()).find("paused"), std::string::npos);
  }
  EXPECT_THROW(stored_verdict("pass"), StoreError);  // case matters: stored as PASS
  EXPECT_THROW(stored_comparison("PASS"), StoreError);
}

TEST(Records, TerminalStates) {
  EXPECT_FALSE(is_terminal(JobState::Queued));
  EXPECT_FALSE(is_terminal(JobState::Running));
  EXPECT_TRUE(is_terminal(JobState::Done));
  EXPECT_TRUE(is_terminal(JobState::Cancelled));
  EXPECT_TRUE(is_terminal(JobState::Expired));
}

db::Run sample_run() {
  db::Run run;
  run.path = "mmq";
  run.profile = "llama-7b";
  run.weight_type = "q4_K";
  run.gpu_name = "NVIDIA H200";
  run.gpu_uuid = "GPU-1";
  run.driver_version = "560.35";
  run.cuda_version = "12.6";
  run.backend = "cuda";
  return run;
}

TEST(Records, SeriesKeyIgnoresReadingsAndClocks) {
  const db::Run base = sample_run();
  db::Run later = base;
  later.started_ms = 1'700'000'000'000;
  later.tokens_per_s = 441.0;
  later.contended = true;
  later.host = "other-host";
  later.pair_index = 7;
  EXPECT_EQ(make_series_key("mmq-k", base), make_series_key("mmq-k", later));
  EXPECT_EQ(make_series_key("mmq-k", base).size(), 16u);
}

TEST(Records, SeriesKeyIsPinned) {
  // Stored keys must not change between releases (that would split every series). Value computed
  // independently: FNV-1a 64 of the unit-separated fields "v1", build name, path, profile, type,
  // GPU name, GPU UUID, driver, CUDA, backend.
  EXPECT_EQ(make_series_key("mmq-k", sample_run()), "cc3783ef7bfd9363");
}

TEST(Records, SeriesKeyChangesWithEveryFingerprintField) {
  const db::Run base = sample_run();
  const std::string key = make_series_key("mmq-k", base);
  EXPECT_NE(make_series_key("mmq-j", base), key);
  auto changed = [&](auto mutate) {
    db::Run run = base;
    mutate(run);
    return make_series_key("mmq-k", run);
  };
  EXPECT_NE(changed([](db::Run& r) { r.path = "f16"; }), key);
  EXPECT_NE(changed([](db::Run& r) { r.profile = "llama-13b"; }), key);
  EXPECT_NE(changed([](db::Run& r) { r.weight_type = "q8_0"; }), key);
  EXPECT_NE(changed([](db::Run& r) { r.weight_type.reset(); }), key);
  EXPECT_NE(changed([](db::Run& r) { r.gpu_name = "NVIDIA A100"; }), key);
  EXPECT_NE(changed([](db::Run& r) { r.gpu_uuid = "GPU-2"; }), key);
  EXPECT_NE(changed([](db::Run& r) { r.driver_version = "565.0"; }), key);
  EXPECT_NE(changed([](db::Run& r) { r.cuda_version = "12.8"; }), key);
  EXPECT_NE(changed([](db::Run& r) { r.backend = "cpu"; }), key);
  // Field boundaries matter: moving a character from one field to the next is another series.
  EXPECT_NE(changed([](db::Run& r) { r.path = "mmqf"; r.profile = "16"; }),
            changed([](db::Run& r) { r.path = "mmq"; r.profile = "f16"; }));
}

}  // namespace
}  // namespace qgate::db
