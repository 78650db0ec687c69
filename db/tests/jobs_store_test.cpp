// Tests of a job as one source of truth in the store: migration 0003 moving an old database's
// report and disposition out of progress_json, the spec columns, dispositions written with a job's
// end, counting, listings with their builds and verdicts, and refusal of unknown enum text.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <SQLiteCpp/SQLiteCpp.h>

#include "qgate/db/sqlite_store.h"
#include "engine_fixtures.h"

namespace qgate::db {
namespace {

using testing::make_build;
using testing::open_store;
using testing::TempDir;

std::string read_migration(const std::string& file_name) {
  std::ifstream in(std::filesystem::path(QGATE_DB_MIGRATIONS_DIR) / file_name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void raw_exec(const std::filesystem::path& path, const std::string& sql) {
  SQLite::Database raw(path.string(), SQLite::OPEN_READWRITE);
  raw.exec(sql);
}

Job make_job(RowId build_id, std::int64_t created_ms) {
  Job job;
  job.kind = "gate";
  job.build_id = build_id;
  job.profile = "llama-7b";
  job.created_ms = created_ms;
  return job;
}

Verdict make_verdict(RowId job_id) {
  Verdict verdict;
  verdict.job_id = job_id;
  verdict.verdict = qgate::Verdict::Fail;
  verdict.comparison = Comparison::Different;
  verdict.ratio = 0.95;
  verdict.ci_low = 0.93;
  verdict.ci_high = 0.97;
  verdict.pairs = 12;
  verdict.contended_pairs = 1;
  verdict.tokens_per_s_a = 380.0;
  verdict.tokens_per_s_b = 400.0;
  verdict.reasons = {"slower by 5%"};
  verdict.p_value = 0.001;
  verdict.profile = "llama-7b";
  verdict.tokens = 512;
  verdict.backend = "cuda";
  verdict.parity_passed = 160;
  verdict.parity_failed = 2;
  verdict.arm_a_label = "mmq-k";
  verdict.arm_a_runs = 12;
  verdict.arm_b_label = "mmq-base";
  verdict.arm_b_runs = 12;
  verdict.per_type = {{"q4_K", 0.9, 0.88, 0.92, Comparison::Different, 120.0, 108.0},
                      {"q8_0", 1.0, 0.99, 1.01, Comparison::Same, 50.0, 50.0}};
  verdict.leaks = {{"arm A across runs", 1 << 20, 0, "grew 1 MiB over 12 runs"}};
  return verdict;
}

// --- Migration 0003 on a database written before it ---

class OldDatabase : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = dir_.file("old.db");
    SQLite::Database raw(path_.string(), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    raw.exec(read_migration("0001_initial.sql"));
    raw.exec(read_migration("0002_parity_numerics.sql"));
    raw.exec("PRAGMA user_version = 2");
    raw.exec("INSERT INTO builds (id, sha256, name, created_ms) VALUES (1, 'sha-a', 'mmq-k', 1), "
             "(2, 'sha-b', 'mmq-base', 2)");
  }

  TempDir dir_;
  std::filesystem::path path_;
};

TEST_F(OldDatabase, ReportAndDispositionMoveFromProgressJsonToColumns) {
  // As qgated wrote a finished gate job before: the report and disposition inside progress_json,
  // a verdict row with part of the report, the spec's options as text.
  raw_exec(path_, R"sql(
    INSERT INTO jobs (id, kind, state, build_id, baseline_build_id, profile, spec_json, created_ms,
                      finished_ms, progress_json)
    VALUES (7, 'gate', 'done', 1, 2, 'llama-7b',
      '{"kind":"JOB_KIND_GATE","tokens":"256","order":"sequential","timing":"pass","parity_shapes":"quick","path":"f16","numerics":"NUMERICS_PROFILE_GGML","remeasure_of":"3","timeout_s":"600","run_contended_on_expiry":true}',
      100, 200,
      '{"progress":{"phase":"done","pairs_done":12},"report":{"verdict":"VERDICT_FAIL","comparison":"COMPARISON_DIFFERENT","ratio":0.95,"pairs":12,"arm_a":{"label":"mmq-k","tokens_per_s":380,"runs":12},"arm_b":{"label":"mmq-base","tokens_per_s":400,"runs":12},"reasons":["slower"],"parity_passed":160,"parity_failed":2,"profile":"llama-7b","tokens":"256","backend":"cuda","p_value":0.001,"per_type":[{"weight_type":"q4_K","ratio":0.9,"comparison":"COMPARISON_DIFFERENT","gemm_us_a":120},{"weight_type":"q8_0","ratio":1.0,"comparison":"COMPARISON_SAME"}]},"disposition":"DISPOSITION_INCORRECT","disposition_detail":"2 parity case(s) failed"}');
    INSERT INTO verdicts (job_id, verdict, comparison, ratio, pairs, reasons, created_ms)
    VALUES (7, 'FAIL', 'DIFFERENT', 0.95, 12, '["slower"]', 200);
    INSERT INTO jobs (id, kind, state, build_id, profile, spec_json, created_ms, progress_json)
    VALUES (3, 'ab', 'done', 1, 'llama-7b', '{"kind":"JOB_KIND_AB"}', 50,
      '{"progress":{"phase":"done"},"report":{"verdict":"VERDICT_PASS","comparison":"COMPARISON_SAME","pairs":4}}');
    INSERT INTO jobs (id, kind, state, build_id, profile, spec_json, created_ms, error, progress_json)
    VALUES (9, 'parity', 'failed', 1, '', '{}', 300, 'worker died',
      '{"disposition":"DISPOSITION_CRASHED","disposition_detail":"SIGSEGV in gemm_prepare"}');
  )sql");

  auto store = open_store(path_);
  EXPECT_EQ(store->schema_version(), schema_version_known());

  const auto gate = store->find_job_listing(7);
  ASSERT_TRUE(gate.has_value());
  EXPECT_EQ(gate->job.disposition, Disposition::Incorrect);
  EXPECT_EQ(gate->job.disposition_detail, "2 parity case(s) failed");
  EXPECT_EQ(gate->job.progress_json, R"({"progress":{"phase":"done","pairs_done":12}})");
  EXPECT_EQ(gate->job.tokens, 256);
  EXPECT_EQ(gate->job.order, RunOrder::Sequential);
  EXPECT_EQ(gate->job.timing, TimingMode::Pass);
  EXPECT_EQ(gate->job.parity_shapes, ShapeSet::Quick);
  EXPECT_EQ(gate->job.path, "f16");
  EXPECT_EQ(gate->job.numerics, "ggml");
  EXPECT_EQ(gate->job.remeasure_of, 3);
  EXPECT_EQ(gate->job.timeout_s, 600);
  EXPECT_TRUE(gate->job.run_contended_on_expiry);
  // The stored spec now spells the options as the enums they are.
  EXPECT_NE(gate->job.spec_json.find(R"("order":"RUN_ORDER_SEQUENTIAL")"), std::string::npos);
  EXPECT_NE(gate->job.spec_json.find(R"("timing":"TIMING_MODE_PASS")"), std::string::npos);
  EXPECT_NE(gate->job.spec_json.find(R"("parity_shapes":"SHAPE_SET_QUICK")"), std::string::npos);

  ASSERT_TRUE(gate->verdict.has_value());
  const Verdict& verdict = *gate->verdict;
  EXPECT_EQ(verdict.verdict, qgate::Verdict::Fail);
  EXPECT_EQ(verdict.p_value, 0.001);
  EXPECT_EQ(verdict.tokens, 256);
  EXPECT_EQ(verdict.backend, "cuda");
  EXPECT_EQ(verdict.parity_passed, 160);
  EXPECT_EQ(verdict.parity_failed, 2);
  EXPECT_EQ(verdict.arm_a_label, "mmq-k");
  EXPECT_EQ(verdict.arm_b_runs, 12);
  ASSERT_EQ(verdict.per_type.size(), 2u);
  EXPECT_EQ(verdict.per_type[0].weight_type, "q4_K");
  EXPECT_EQ(verdict.per_type[0].comparison, Comparison::Different);
  EXPECT_EQ(verdict.per_type[0].gemm_us_a, 120.0);
  EXPECT_EQ(verdict.per_type[1].comparison, Comparison::Same);
  ASSERT_TRUE(gate->baseline.has_value());
  EXPECT_EQ(gate->baseline->name, "mmq-base");

  // A job finished before verdict rows were written with it gets one from its report.
  const auto older = store->find_verdict(3);
  ASSERT_TRUE(older.has_value());
  EXPECT_EQ(older->verdict, qgate::Verdict::Pass);
  EXPECT_EQ(older->comparison, Comparison::Same);
  EXPECT_EQ(older->pairs, 4);
  EXPECT_EQ(store->find_job(3)->order, RunOrder::Abba);
  EXPECT_EQ(store->find_job(3)->parity_shapes, ShapeSet::Unspecified);

  const auto crashed = store->find_job(9);
  EXPECT_EQ(crashed->disposition, Disposition::Crashed);
  EXPECT_EQ(crashed->disposition_detail, "SIGSEGV in gemm_prepare");
  EXPECT_EQ(crashed->progress_json, "{}");
  EXPECT_FALSE(store->find_verdict(9).has_value());
}

TEST_F(OldDatabase, ProgressThatIsNotJsonIsLeftAlone) {
  raw_exec(path_, "INSERT INTO jobs (id, kind, state, build_id, spec_json, created_ms, progress_json) "
                  "VALUES (1, 'ab', 'queued', 1, 'not json', 1, 'not json either')");
  auto store = open_store(path_);
  const auto job = store->find_job(1);
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->progress_json, "not json either");
  EXPECT_EQ(job->disposition, Disposition::Unspecified);
  EXPECT_EQ(job->order, RunOrder::Abba);
}

// --- The store's job calls ---

class JobsStoreTest : public testing::StoreFixture {
 protected:
  void SetUp() override {
    StoreFixture::SetUp();
    if (IsSkipped()) return;
    build_ = store_->insert_build(make_build("mmq-k", "sha-k")).id;
    baseline_ = store_->insert_build(make_build("mmq-base", "sha-base")).id;
  }

  RowId running_job() {
    const RowId id = store_->create_job(make_job(build_, 1000));
    EXPECT_EQ(store_->claim_next_job(std::nullopt)->id, id);
    return id;
  }

  RowId build_ = 0;
  RowId baseline_ = 0;
};
INSTANTIATE_FOR_BOTH_ENGINES(JobsStoreTest);

TEST_P(JobsStoreTest, SpecColumnsRoundTrip) {
  Job job = make_job(build_, 1000);
  job.tokens = 128;
  job.order = RunOrder::Sequential;
  job.timing = TimingMode::Pass;
  job.parity_shapes = ShapeSet::None;
  job.path = "f16";
  job.numerics = "qgate";
  job.wait_for_quiet = true;
  job.run_contended_on_expiry = true;
  job.timeout_s = 90;
  const RowId original = store_->create_job(make_job(build_, 900));
  job.remeasure_of = original;
  const auto stored = store_->find_job(store_->create_job(job));
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->tokens, 128);
  EXPECT_EQ(stored->order, RunOrder::Sequential);
  EXPECT_EQ(stored->timing, TimingMode::Pass);
  EXPECT_EQ(stored->parity_shapes, ShapeSet::None);
  EXPECT_EQ(stored->path, "f16");
  EXPECT_EQ(stored->numerics, "qgate");
  EXPECT_TRUE(stored->wait_for_quiet);
  EXPECT_TRUE(stored->run_contended_on_expiry);
  EXPECT_EQ(stored->remeasure_of, original);
  EXPECT_EQ(stored->timeout_s, 90);
  EXPECT_EQ(stored->disposition, Disposition::Unspecified);
}

TEST_P(JobsStoreTest, AVerdictRefersToItsArmsBuildsByIdAndKeepsOnlyLabelsThatSayMore) {
  const RowId job = store_->create_job(make_job(build_, 1000));
  Verdict verdict;
  verdict.job_id = job;
  verdict.arm_a_build_id = build_;
  verdict.arm_a_label = build_label("mmq-k", "sha-k");  // the build's own label
  verdict.arm_b_build_id = build_;
  verdict.arm_b_label = "MINFER_MMQ=0";                  // says more than the build
  store_->put_verdict(verdict);

  const auto read = store_->find_verdict(job);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->arm_a_build_id, build_);
  EXPECT_EQ(read->arm_a_label, "mmq-k@sha-k");
  EXPECT_EQ(read->arm_b_build_id, build_);
  EXPECT_EQ(read->arm_b_label, "MINFER_MMQ=0");
  {
    auto connection = raw();
    detail::ScopedStatement labels(connection->prepared("SELECT arm_a_label || '|' || arm_b_label FROM verdicts"));
    ASSERT_TRUE(labels->step());
    EXPECT_EQ(labels->text(0), "|MINFER_MMQ=0");
  }

  // A verdict naming a build that is not stored is refused, and nothing of it is written.
  Verdict dangling = verdict;
  dangling.arm_a_build_id = 999;
  dangling.arm_a_label = "ghost@00000000";
  EXPECT_THROW(store_->put_verdict(dangling), StoreError);
  EXPECT_EQ(store_->find_verdict(job)->arm_a_label, "mmq-k@sha-k");
}

TEST_P(JobsStoreTest, FinishWritesTheWholeVerdictAndTheDisposition) {
  const RowId job = running_job();
  ASSERT_TRUE(store_->finish_job_with_verdict(make_verdict(job), {Disposition::Leaked, "1 MiB kept"},
                                              R"({"progress":{"phase":"done"}})"));
  const auto listing = store_->find_job_listing(job);
  ASSERT_TRUE(listing.has_value());
  EXPECT_EQ(listing->job.state, JobState::Done);
  EXPECT_EQ(listing->job.disposition, Disposition::Leaked);
  EXPECT_EQ(listing->job.disposition_detail, "1 MiB kept");
  ASSERT_TRUE(listing->verdict.has_value());
  const Verdict expected = make_verdict(job);
  const Verdict& got = *listing->verdict;
  EXPECT_EQ(got.p_value, expected.p_value);
  EXPECT_EQ(got.arm_a_label, expected.arm_a_label);
  EXPECT_EQ(got.arm_b_label, expected.arm_b_label);
  EXPECT_EQ(got.parity_failed, expected.parity_failed);
  EXPECT_EQ(got.reasons, expected.reasons);
  ASSERT_EQ(got.per_type.size(), 2u);
  EXPECT_EQ(got.per_type[1].weight_type, "q8_0");
  EXPECT_EQ(got.per_type[0].gemm_us_b, 108.0);
  ASSERT_EQ(got.leaks.size(), 1u);
  EXPECT_EQ(got.leaks[0].where, "arm A across runs");
  EXPECT_EQ(got.leaks[0].device_bytes, 1 << 20);
  EXPECT_EQ(got.leaks[0].detail, "grew 1 MiB over 12 runs");

  // Writing the verdict again replaces its child rows instead of adding to them.
  Verdict again = make_verdict(job);
  again.per_type.pop_back();
  again.leaks.clear();
  store_->put_verdict(again);
  const auto replaced = store_->find_verdict(job);
  EXPECT_EQ(replaced->per_type.size(), 1u);
  EXPECT_TRUE(replaced->leaks.empty());
}

TEST_P(JobsStoreTest, FinishOfAJobNoLongerRunningWritesNothing) {
  const RowId job = running_job();
  ASSERT_TRUE(store_->end_job(job, JobState::Cancelled, "cancelled", {}, JobState::Running));
  EXPECT_FALSE(store_->finish_job_with_verdict(make_verdict(job), {Disposition::Ok, ""}, "{}"));
  EXPECT_FALSE(store_->find_verdict(job).has_value());
  EXPECT_EQ(store_->find_job(job)->state, JobState::Cancelled);
  EXPECT_EQ(store_->find_job(job)->disposition, Disposition::Unspecified);
}

TEST_P(JobsStoreTest, EndJobWritesStateErrorAndDispositionTogether) {
  const RowId job = running_job();
  EXPECT_TRUE(store_->end_job(job, JobState::Failed, "worker died", {Disposition::Crashed, "SIGSEGV"},
                              JobState::Running));
  const auto ended = store_->find_job(job);
  EXPECT_EQ(ended->state, JobState::Failed);
  EXPECT_EQ(ended->error, "worker died");
  EXPECT_TRUE(ended->finished_ms.has_value());
  EXPECT_EQ(ended->disposition, Disposition::Crashed);
  EXPECT_EQ(ended->disposition_detail, "SIGSEGV");
  // only_if: a second end loses the race and changes nothing.
  EXPECT_FALSE(store_->end_job(job, JobState::Cancelled, "cancelled", {Disposition::Error, "x"},
                               JobState::Running));
  EXPECT_EQ(store_->find_job(job)->disposition, Disposition::Crashed);
  EXPECT_THROW(store_->end_job(job + 100, JobState::Failed, "", {}, std::nullopt), StoreError);
  EXPECT_THROW(store_->end_job(job, JobState::Running, "", {}, std::nullopt), StoreError);
}

TEST_P(JobsStoreTest, CountJobsCountsEveryMatchWhateverTheLimit) {
  for (int i = 0; i < 5; ++i) store_->create_job(make_job(build_, 1000 + i));
  Job waiting = make_job(build_, 2000);
  waiting.quiet_only = true;
  store_->create_job(waiting);
  ASSERT_TRUE(store_->claim_next_job(std::nullopt).has_value());  // the oldest starts running

  JobFilter filter;
  filter.limit = 1;
  EXPECT_EQ(store_->count_jobs(filter), 6);
  filter.state = JobState::Queued;
  EXPECT_EQ(store_->count_jobs(filter), 5);
  filter.quiet_only = true;
  EXPECT_EQ(store_->count_jobs(filter), 1);
  filter.state = JobState::Running;
  filter.quiet_only.reset();
  EXPECT_EQ(store_->count_jobs(filter), 1);
}

TEST_P(JobsStoreTest, RemeasureFilterFindsTheReMeasuresOfAJob) {
  const RowId original = store_->create_job(make_job(build_, 1000));
  Job again = make_job(build_, 2000);
  again.remeasure_of = original;
  const RowId remeasure = store_->create_job(again);
  JobFilter filter;
  filter.remeasure_of = original;
  filter.state = JobState::Queued;
  const auto found = store_->list_jobs(filter);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].id, remeasure);
  filter.remeasure_of = remeasure;
  EXPECT_EQ(store_->count_jobs(filter), 0);
}

TEST_P(JobsStoreTest, ListingsCarryBuildsAndVerdictsNewestFirst) {
  std::vector<RowId> ids;
  for (int i = 0; i < 4; ++i) {
    Job job = make_job(build_, 1000 + i);
    if (i % 2 == 0) job.baseline_build_id = baseline_;
    ids.push_back(store_->create_job(job));
  }
  // The oldest two finish with verdicts that differ in their child rows.
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(store_->claim_next_job(std::nullopt)->id, ids[i]);
    Verdict verdict = make_verdict(ids[i]);
    verdict.per_type.resize(i + 1);
    verdict.leaks.resize(i);
    ASSERT_TRUE(store_->finish_job_with_verdict(verdict, {Disposition::Ok, ""}, "{}"));
  }

  JobFilter filter;
  filter.limit = 3;
  const auto listings = store_->list_job_listings(filter);
  ASSERT_EQ(listings.size(), 3u);
  EXPECT_EQ(listings[0].job.id, ids[3]);
  EXPECT_EQ(listings[2].job.id, ids[1]);
  for (const JobListing& listing : listings) {
    EXPECT_EQ(listing.build.id, build_);
    EXPECT_EQ(listing.build.name, "mmq-k");
    EXPECT_EQ(listing.baseline.has_value(), listing.job.baseline_build_id.has_value());
    if (listing.baseline) EXPECT_EQ(listing.baseline->name, "mmq-base");
  }
  EXPECT_FALSE(listings[0].verdict.has_value());
  ASSERT_TRUE(listings[2].verdict.has_value());
  EXPECT_EQ(listings[2].verdict->job_id, ids[1]);
  EXPECT_EQ(listings[2].verdict->per_type.size(), 2u);
  EXPECT_EQ(listings[2].verdict->leaks.size(), 1u);

  filter.limit = 10;
  filter.state = JobState::Done;
  const auto done = store_->list_job_listings(filter);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[1].job.id, ids[0]);
  EXPECT_EQ(done[1].verdict->per_type.size(), 1u);  // its own rows, not its neighbour's
  EXPECT_TRUE(done[1].verdict->leaks.empty());
  EXPECT_FALSE(store_->find_job_listing(ids.back() + 1).has_value());
}

TEST_P(JobsStoreTest, UnknownEnumTextInARowIsRefusedNamingTheJob) {
  const RowId job = store_->create_job(make_job(build_, 1000));
  raw()->execute_script("UPDATE jobs SET disposition = 'exploded' WHERE id = " + std::to_string(job));
  try {
    store_->find_job(job);
    FAIL() << "an unknown disposition was read";
  } catch (const StoreError& error) {
    EXPECT_EQ(error.kind(), StoreErrorKind::InvalidValue);
    const std::string message = error.what();
    EXPECT_NE(message.find("disposition 'exploded'"), std::string::npos) << message;
    EXPECT_NE(message.find("job " + std::to_string(job)), std::string::npos) << message;
  }
  raw()->execute_script("UPDATE jobs SET disposition = 'ok', timing = 'wallclock' WHERE id = " + std::to_string(job));
  EXPECT_THROW(store_->list_job_listings(JobFilter{}), StoreError);
  raw()->execute_script("UPDATE jobs SET timing = 'gemm', parity_shapes = 'huge' WHERE id = " + std::to_string(job));
  EXPECT_THROW(store_->find_job_listing(job), StoreError);
  raw()->execute_script("UPDATE jobs SET parity_shapes = 'quick', run_order = 'random' WHERE id = " + std::to_string(job));
  EXPECT_THROW(store_->list_jobs(JobFilter{}), StoreError);
}

TEST(DispositionNames, RoundTripAndRefuseUnknownText) {
  for (Disposition d : {Disposition::Unspecified, Disposition::Ok, Disposition::Crashed, Disposition::Timeout,
                        Disposition::Incorrect, Disposition::Rejected, Disposition::Error, Disposition::Leaked}) {
    EXPECT_EQ(stored_disposition(to_string(d)), d);
  }
  EXPECT_EQ(to_string(Disposition::Leaked), "leaked");
  EXPECT_THROW(stored_disposition("DISPOSITION_OK"), StoreError);
  EXPECT_EQ(stored_shape_set("none"), ShapeSet::None);
  EXPECT_THROW(stored_shape_set(""), StoreError);
}

}  // namespace
}  // namespace qgate::db
