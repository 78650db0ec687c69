// Tests of the store's behaviour, each case on both engines (SQLite and PostgreSQL): builds, the job
// lifecycle and crash recovery, runs and their atomicity, parity cases, verdicts, co-tenant rows,
// trend and compare queries; and SQLite's failure paths (read-only file, full disk).
#include <gtest/gtest.h>

#include <map>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "qgate/db/sqlite_store.h"
#include "engine_fixtures.h"

namespace qgate::db {
namespace {

using testing::make_build;
using testing::make_done_run;
using testing::make_job;
using testing::open_store;
using testing::raw_count;
using testing::TempDir;

class StoreTest : public testing::StoreFixture {
 protected:
  void SetUp() override {
    StoreFixture::SetUp();
    if (IsSkipped()) return;
    build_id_ = store_->insert_build(make_build("mmq-k", "sha-base")).id;
  }

  RowId build_id_ = 0;
};
INSTANTIATE_FOR_BOTH_ENGINES(StoreTest);

// --- Builds ---

TEST_P(StoreTest, BuildsAreUniqueBySha256) {
  const BuildInsert first = store_->insert_build(make_build("a", "sha-x"));
  EXPECT_TRUE(first.inserted);
  const BuildInsert again = store_->insert_build(make_build("renamed", "sha-x"));
  EXPECT_FALSE(again.inserted);
  EXPECT_EQ(again.id, first.id);
  EXPECT_EQ(raw_count("builds"), 2);  // sha-base and sha-x
  ASSERT_TRUE(store_->find_build_by_sha256("sha-x").has_value());
  EXPECT_EQ(store_->find_build_by_sha256("sha-x")->name, "a");  // the first stays as stored
  EXPECT_FALSE(store_->find_build_by_sha256("sha-none").has_value());
  EXPECT_FALSE(store_->find_build(9999).has_value());
}

TEST_P(StoreTest, BuildFieldsRoundTrip) {
  Build build = make_build("ext", "sha-ext", 1234);
  build.flags = "-O3";
  build.size_bytes = 1 << 20;
  build.artifact_path = "artifacts/sha-ext.so";
  build.abi_version = 3;
  build.build_name = "llama.cpp";
  build.build_version = "b4000";
  build.external = true;
  const RowId id = store_->insert_build(build).id;
  const auto read = store_->find_build(id);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->flags, "-O3");
  EXPECT_EQ(read->size_bytes, 1 << 20);
  EXPECT_EQ(read->artifact_path, "artifacts/sha-ext.so");
  EXPECT_EQ(read->abi_version, 3);
  EXPECT_EQ(read->build_version, "b4000");
  EXPECT_TRUE(read->external);
  EXPECT_EQ(read->created_ms, 1234);
}

TEST_P(StoreTest, LookupByNameReturnsTheNewestBuild) {
  const RowId old_build = store_->insert_build(make_build("kern", "sha-1", 100)).id;
  const RowId newest = store_->insert_build(make_build("kern", "sha-2", 300)).id;
  const RowId middle = store_->insert_build(make_build("kern", "sha-3", 200)).id;
  store_->insert_build(make_build("other", "sha-4", 900));
  const auto found = store_->find_latest_build_by_name("kern");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->id, newest);
  EXPECT_NE(found->id, old_build);
  EXPECT_NE(found->id, middle);
  EXPECT_FALSE(store_->find_latest_build_by_name("missing").has_value());
}

// --- Jobs ---

TEST_P(StoreTest, JobLifecycleClaimsOldestFirst) {
  // Created out of id order: the claim must follow created_ms, not the id.
  const RowId newer = store_->create_job(make_job(build_id_, 2000));
  const RowId oldest = store_->create_job(make_job(build_id_, 1000));
  const RowId newest = store_->create_job(make_job(build_id_, 3000));

  const auto queued = store_->find_job(oldest);
  ASSERT_TRUE(queued.has_value());
  EXPECT_EQ(queued->state, JobState::Queued);
  EXPECT_EQ(queued->spec_json, R"({"profile":"llama-7b"})");
  EXPECT_FALSE(queued->started_ms.has_value());

  const auto first = store_->claim_next_job(std::nullopt);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->id, oldest);
  EXPECT_EQ(first->state, JobState::Running);
  EXPECT_TRUE(first->started_ms.has_value());
  EXPECT_EQ(store_->claim_next_job(std::nullopt)->id, newer);

  store_->update_job_progress(oldest, R"({"pairs":4})");
  EXPECT_TRUE(store_->update_job_state(oldest, JobState::Done, std::nullopt, std::nullopt));
  const auto done = store_->find_job(oldest);
  EXPECT_EQ(done->state, JobState::Done);
  EXPECT_TRUE(done->finished_ms.has_value());
  EXPECT_EQ(done->progress_json, R"({"pairs":4})");

  EXPECT_TRUE(store_->update_job_state(newer, JobState::Failed, "worker crashed", std::nullopt));
  EXPECT_EQ(store_->find_job(newer)->error, "worker crashed");

  // A cancel that expects 'queued' loses against a job already done.
  EXPECT_FALSE(store_->update_job_state(oldest, JobState::Cancelled, std::nullopt, JobState::Queued));
  EXPECT_EQ(store_->find_job(oldest)->state, JobState::Done);
  EXPECT_TRUE(store_->update_job_state(newest, JobState::Cancelled, std::nullopt, JobState::Queued));

  EXPECT_FALSE(store_->claim_next_job(std::nullopt).has_value());  // nothing queued any more
  EXPECT_THROW(store_->update_job_state(777, JobState::Done, std::nullopt, std::nullopt), StoreError);
  EXPECT_THROW(store_->update_job_progress(777, "{}"), StoreError);
}

TEST_P(StoreTest, ListJobsIsNewestFirstAndFilters) {
  const RowId a = store_->create_job(make_job(build_id_, 1000));
  const RowId b = store_->create_job(make_job(build_id_, 3000));
  const RowId c = store_->create_job(make_job(build_id_, 2000));
  store_->update_job_state(c, JobState::Running, std::nullopt, std::nullopt);

  const auto all = store_->list_jobs(JobFilter{});
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].id, b);
  EXPECT_EQ(all[1].id, c);
  EXPECT_EQ(all[2].id, a);

  const auto queued = store_->list_jobs(JobFilter{JobState::Queued, 100});
  ASSERT_EQ(queued.size(), 2u);
  EXPECT_EQ(queued[0].id, b);
  EXPECT_EQ(store_->list_jobs(JobFilter{std::nullopt, 1}).size(), 1u);
}

TEST_P(StoreTest, ClaimTakesOnlyTheAskedDevice) {
  const RowId on_zero = store_->create_job(make_job(build_id_, 1000, 0));
  const RowId on_one = store_->create_job(make_job(build_id_, 2000, 1));
  EXPECT_EQ(store_->claim_next_job(1)->id, on_one);
  EXPECT_FALSE(store_->claim_next_job(1).has_value());
  EXPECT_EQ(store_->claim_next_job(0)->id, on_zero);
}

// --- The fleet's queue ---

/// The scope of one GPU of a daemon: its name, uuid and labels, on a daemon of `gpus` GPUs.
ClaimScope gpu_scope(const std::string& name, const std::string& uuid, std::vector<std::string> labels, int gpus = 1) {
  ClaimScope scope;
  scope.gpu_name = name;
  scope.gpu_uuid = uuid;
  scope.labels = std::move(labels);
  scope.gpus_served = gpus;
  return scope;
}

TEST_P(StoreTest, AJobIsClaimedOnlyByAGpuOfItsModelUuidAndLabels) {
  Job h200 = make_job(build_id_, 1000);
  h200.gpu_model = "h200";  // stored normalized: upper case
  Job sm90 = make_job(build_id_, 2000);
  sm90.labels = {"sm90", "rack-2", "sm90"};
  Job pinned = make_job(build_id_, 3000);
  pinned.gpu_uuid = "GPU-b";
  Job a100 = make_job(build_id_, 4000);
  a100.gpu_model = "A100";
  const RowId h200_id = store_->create_job(h200);
  const RowId sm90_id = store_->create_job(sm90);
  const RowId pinned_id = store_->create_job(pinned);
  const RowId a100_id = store_->create_job(a100);
  EXPECT_EQ(store_->find_job(h200_id)->gpu_model, "H200");
  EXPECT_EQ(store_->find_job(sm90_id)->labels, (std::vector<std::string>{"rack-2", "sm90"}));

  // An H100 with label sm90 only: no model matches, one label of two is missing, not GPU-b.
  EXPECT_FALSE(store_->claim_next_job(gpu_scope("NVIDIA H100 80GB HBM3", "GPU-a", {"sm90"})).has_value());
  // An A10 is not an A100, whole words only.
  EXPECT_FALSE(store_->claim_next_job(gpu_scope("NVIDIA A10", "GPU-a", {})).has_value());
  // An H200 takes its model's job; then, with both labels, the labelled one; GPU-b its own.
  EXPECT_EQ(store_->claim_next_job(gpu_scope("NVIDIA H200", "GPU-a", {})).value().id, h200_id);
  EXPECT_EQ(store_->claim_next_job(gpu_scope("NVIDIA H200", "GPU-a", {"sm90", "rack-2", "x"})).value().id, sm90_id);
  EXPECT_FALSE(store_->claim_next_job(gpu_scope("NVIDIA H200", "GPU-a", {"sm90", "rack-2"})).has_value());
  EXPECT_EQ(store_->claim_next_job(gpu_scope("NVIDIA H100", "GPU-b", {})).value().id, pinned_id);
  EXPECT_EQ(store_->claim_next_job(gpu_scope("NVIDIA A100-SXM4-80GB", "GPU-c", {})).value().id, a100_id);
}

TEST_P(StoreTest, AJobNeedingTwoGpusIsLeftToADaemonServingTwo) {
  Job split = make_job(build_id_, 1000);
  split.gpus_needed = 2;
  const RowId id = store_->create_job(split);
  EXPECT_FALSE(store_->claim_next_job(gpu_scope("NVIDIA H200", "GPU-a", {}, 1)).has_value());
  EXPECT_EQ(store_->claim_next_job(gpu_scope("NVIDIA H200", "GPU-a", {}, 2)).value().id, id);
}

TEST_P(StoreTest, AClaimRecordsTheClaimantsHostAndJobsFilterByIt) {
  store_->set_claimant({"host-a:/d", 60000, "host-a"});
  const RowId first = store_->create_job(make_job(build_id_, 1000));
  const RowId second = store_->create_job(make_job(build_id_, 2000));
  ASSERT_EQ(store_->claim_next_job(std::nullopt)->id, first);
  EXPECT_EQ(store_->find_job(first)->host, "host-a");
  JobFilter on_a;
  on_a.host = "host-a";
  const auto jobs = store_->list_jobs(on_a);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].id, first);
  EXPECT_EQ(store_->count_jobs(on_a), 1);
  const auto listings = store_->list_job_listings(on_a);
  ASSERT_EQ(listings.size(), 1u);
  on_a.host = "host-b";
  EXPECT_EQ(store_->count_jobs(on_a), 0);
  EXPECT_EQ(store_->find_job(second)->host, "");
}

TEST_P(StoreTest, ACancelAskedOfAnotherDaemonReachesItsRenewalAndEndsTheJobIfItsDaemonIsLost) {
  store_->set_claimant({"host-a:/d", 60000, "host-a"});
  const RowId running = store_->create_job(make_job(build_id_, 1000));
  const RowId queued = store_->create_job(make_job(build_id_, 2000));
  ASSERT_EQ(store_->claim_next_job(std::nullopt)->id, running);
  EXPECT_FALSE(store_->request_cancel(queued)) << "only a running job is asked";
  EXPECT_THROW(store_->request_cancel(9999), StoreError);
  ASSERT_TRUE(store_->request_cancel(running));
  const LeaseRenewal renewal = store_->renew_leases();
  EXPECT_EQ(renewal.held, (std::vector<RowId>{running}));
  EXPECT_EQ(renewal.cancel_requested, (std::vector<RowId>{running}));
  // Its daemon dies before it stops the job: recovery ends the job cancelled instead of running it again.
  const InterruptedJobs recovered = store_->requeue_interrupted_jobs();
  EXPECT_TRUE(recovered.requeued.empty());
  EXPECT_EQ(store_->find_job(running)->state, JobState::Cancelled);
}

TEST_P(StoreTest, EachDaemonPublishesItsGpusAndAnyReadsTheFleetsLatest) {
  store_->set_claimant({"host-a:/d", 60000, "host-a"});
  FleetGpu gpu;
  gpu.host = "host-a";
  gpu.ordinal = 1;
  gpu.name = "NVIDIA H200";
  gpu.uuid = "GPU-a";
  gpu.labels = {"sm90", "rack-2"};
  gpu.backend = "cuda";
  gpu.running_job_id = 7;
  gpu.cotenant_state = "quiet";
  store_->publish_gpus(std::vector<FleetGpu>{gpu});
  gpu.ordinal = 0;
  gpu.running_job_id.reset();
  store_->publish_gpus(std::vector<FleetGpu>{gpu});  // replaces: the daemon serves GPU 0 now
  auto fleet = store_->list_fleet_gpus(0);
  ASSERT_EQ(fleet.size(), 1u);
  EXPECT_EQ(fleet[0].ordinal, 0);
  EXPECT_EQ(fleet[0].claimant, "host-a:/d");
  EXPECT_EQ(fleet[0].labels, (std::vector<std::string>{"rack-2", "sm90"}));
  EXPECT_FALSE(fleet[0].running_job_id.has_value());
  EXPECT_EQ(fleet[0].cotenant_state, "quiet");
  EXPECT_GT(fleet[0].seen_ms, 0);
  EXPECT_TRUE(store_->list_fleet_gpus(fleet[0].seen_ms + 1).empty()) << "not seen since: left out";
}

TEST_P(StoreTest, QuietOnlyJobsWaitUntilTheGpuIsQuiet) {
  Job waiting = make_job(build_id_, 1000);
  waiting.quiet_only = true;
  waiting.deadline_ms = 99'000;
  const RowId quiet_job = store_->create_job(waiting);
  const RowId normal = store_->create_job(make_job(build_id_, 2000));
  EXPECT_EQ(store_->find_job(quiet_job)->deadline_ms, 99'000);
  // Not quiet: the older quiet-only job is passed over, the newer normal one runs.
  EXPECT_EQ(store_->claim_next_job(std::nullopt, false)->id, normal);
  EXPECT_FALSE(store_->claim_next_job(std::nullopt, false).has_value());
  // Quiet: now it may run.
  EXPECT_EQ(store_->claim_next_job(std::nullopt, true)->id, quiet_job);

  // Released from waiting (its deadline passed and it may run contended): claimed like any job.
  const RowId released = store_->create_job(waiting);
  EXPECT_TRUE(store_->set_job_quiet_only(released, false));
  EXPECT_EQ(store_->claim_next_job(std::nullopt, false)->id, released);
  EXPECT_FALSE(store_->set_job_quiet_only(released, true)) << "running: no longer queued";
  EXPECT_THROW(store_->set_job_quiet_only(777, false), StoreError);
}

TEST_P(StoreTest, FindsDoneJobsWithContendedRuns) {
  const RowId contended_job = store_->create_job(make_job(build_id_, 5000));
  const RowId quiet_job = store_->create_job(make_job(build_id_, 6000));
  const RowId old_job = store_->create_job(make_job(build_id_, 100));
  auto add_run = [&](RowId job, bool contended) {
    db::Run run = make_done_run(build_id_, "p", "q4_0", 7000, 100.0, std::nullopt);
    run.job_id = job;
    const RowId id = store_->add_run(run);
    CotenantSummary summary;
    summary.run_id = id;
    summary.available = true;
    summary.contended = contended;
    store_->put_cotenant(summary, {});
  };
  add_run(contended_job, false);
  add_run(contended_job, true);
  add_run(quiet_job, false);
  add_run(old_job, true);
  for (RowId j : {contended_job, quiet_job, old_job}) store_->update_job_state(j, JobState::Done, std::nullopt, std::nullopt);
  EXPECT_EQ(store_->jobs_with_contended_runs(1000), (std::vector<RowId>{contended_job}));
  EXPECT_EQ(store_->jobs_with_contended_runs(0), (std::vector<RowId>{contended_job, old_job}));
}

TEST_P(StoreTest, ConcurrentClaimsNeverShareAJob) {
  constexpr int kJobs = 40;
  for (int i = 0; i < kJobs; ++i) store_->create_job(make_job(build_id_, 1000 + i));
  // Two daemons' worth of connections on one file, two threads each.
  auto other = reopen();
  std::mutex claimed_mutex;
  std::vector<RowId> claimed;
  auto claim_all = [&](Store& store) {
    while (auto job = store.claim_next_job(std::nullopt)) {
      std::lock_guard lock(claimed_mutex);
      claimed.push_back(job->id);
    }
  };
  std::vector<std::thread> threads;
  threads.emplace_back(claim_all, std::ref(*store_));
  threads.emplace_back(claim_all, std::ref(*store_));
  threads.emplace_back(claim_all, std::ref(*other));
  threads.emplace_back(claim_all, std::ref(*other));
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(claimed.size(), static_cast<std::size_t>(kJobs));
  EXPECT_EQ(std::set<RowId>(claimed.begin(), claimed.end()).size(),
            static_cast<std::size_t>(kJobs));
}

TEST_P(StoreTest, RunningJobsAreRequeuedAfterACrash) {
  const RowId crashed = store_->create_job(make_job(build_id_, 1000));
  const RowId waiting = store_->create_job(make_job(build_id_, 2000));
  ASSERT_EQ(store_->claim_next_job(std::nullopt)->id, crashed);
  db::Run run = make_done_run(build_id_, "llama-7b", "q4_K", 5000, 0.0, std::nullopt);
  run.job_id = crashed;
  run.state = RunState::Running;
  run.tokens_per_s.reset();
  const RowId run_id = store_->add_run(run);

  store_.reset();  // the daemon dies: nothing is finished or cleaned up
  store_ = reopen();

  const std::vector<RowId> requeued = store_->requeue_interrupted_jobs().requeued;
  ASSERT_EQ(requeued, std::vector<RowId>{crashed});
  const auto job = store_->find_job(crashed);
  EXPECT_EQ(job->state, JobState::Queued);
  EXPECT_EQ(job->attempts, 1);
  EXPECT_FALSE(job->started_ms.has_value());
  EXPECT_EQ(store_->find_job(waiting)->attempts, 0);
  EXPECT_EQ(store_->find_run(run_id)->state, RunState::Interrupted);
  EXPECT_TRUE(store_->requeue_interrupted_jobs().requeued.empty());  // idempotent
  EXPECT_EQ(store_->claim_next_job(std::nullopt)->id, crashed);  // still the oldest

  // The daemon dies under it a second time: it is not run again, and says why.
  store_.reset();
  store_ = reopen();
  const db::InterruptedJobs second = store_->requeue_interrupted_jobs();
  EXPECT_TRUE(second.requeued.empty());
  ASSERT_EQ(second.given_up, std::vector<RowId>{crashed});
  const auto ended = store_->find_job(crashed);
  EXPECT_EQ(ended->state, JobState::Failed);
  EXPECT_EQ(ended->attempts, 2);
  ASSERT_TRUE(ended->error.has_value());
  EXPECT_NE(ended->error->find("the daemon died 2 times while this job ran"), std::string::npos) << *ended->error;
  EXPECT_EQ(ended->disposition, db::Disposition::Crashed);
  EXPECT_TRUE(ended->finished_ms.has_value());
  EXPECT_EQ(store_->claim_next_job(std::nullopt)->id, waiting) << "the given-up job is never claimed again";
}

TEST_P(StoreTest, AnOrderlyStopRequeuesRunningJobsWithoutCountingADeath) {
  const RowId job = store_->create_job(make_job(build_id_, 1000));
  for (int stop = 0; stop < 3; ++stop) {
    ASSERT_EQ(store_->claim_next_job(std::nullopt)->id, job);
    const db::InterruptedJobs stopped = store_->requeue_interrupted_jobs(db::kMaxDaemonDeaths, false);
    EXPECT_EQ(stopped.requeued, std::vector<RowId>{job});
    EXPECT_TRUE(stopped.given_up.empty());
  }
  EXPECT_EQ(store_->find_job(job)->attempts, 0);
  EXPECT_EQ(store_->find_job(job)->state, JobState::Queued);
}

// --- Leases: several daemons on one database ---

/// The claimant a job is held by, read past the store.
std::string claimed_by(detail::SqlConnection& raw, RowId job) {
  detail::ScopedStatement select(raw.prepared("SELECT claimed_by FROM jobs WHERE id = ?"));
  select->bind(1, job);
  return select->step() ? select->text(0) : "(no job)";
}

TEST_P(StoreTest, AStartingDaemonTakesBackItsOwnJobsAndNoOtherLiveDaemons) {
  const RowId mine = store_->create_job(make_job(build_id_, 1000));
  const RowId theirs = store_->create_job(make_job(build_id_, 2000));
  store_->set_claimant({"host-a:/var/lib/qgate", 60000});
  auto other = reopen();
  other->set_claimant({"host-b:/var/lib/qgate", 60000});
  ASSERT_EQ(store_->claim_next_job(std::nullopt)->id, mine);
  ASSERT_EQ(other->claim_next_job(std::nullopt)->id, theirs);
  EXPECT_EQ(claimed_by(*raw(), mine), "host-a:/var/lib/qgate");
  EXPECT_EQ(claimed_by(*raw(), theirs), "host-b:/var/lib/qgate");

  store_ = reopen();  // host-a's daemon dies and starts again, with the same id
  store_->set_claimant({"host-a:/var/lib/qgate", 60000});
  EXPECT_EQ(store_->requeue_interrupted_jobs().requeued, std::vector<RowId>{mine});
  EXPECT_EQ(store_->find_job(mine)->state, JobState::Queued);
  EXPECT_EQ(store_->find_job(mine)->attempts, 1);
  EXPECT_EQ(store_->find_job(theirs)->state, JobState::Running);  // host-b is alive: left alone
  EXPECT_EQ(claimed_by(*raw(), theirs), "host-b:/var/lib/qgate");
  EXPECT_TRUE(store_->requeue_expired_leases().requeued.empty());  // its lease holds
}

TEST_P(StoreTest, AJobWhoseLeaseRanOutGoesBackToTheQueueCountedAsADaemonsDeath) {
  const RowId job = store_->create_job(make_job(build_id_, 1000));
  auto dying = reopen();
  dying->set_claimant({"host-a:/d", 1000});
  ASSERT_EQ(dying->claim_next_job(std::nullopt)->id, job);
  db::Run run = make_done_run(build_id_, "llama-7b", "q4_K", 5000, 0.0, std::nullopt);
  run.job_id = job;
  run.state = RunState::Running;
  run.tokens_per_s.reset();
  const RowId run_id = dying->add_run(run);
  // Renewed, the lease holds past its first term.
  // (Margins of a second, so a loaded machine's stalls cannot decide it.)
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(dying->renew_leases().held.size(), 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  store_->set_claimant({"host-b:/d", 60000});
  EXPECT_TRUE(store_->requeue_expired_leases().requeued.empty());
  // Then its daemon stops renewing (it died, or lost the database): the next sweep takes it back.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(store_->requeue_expired_leases().requeued, std::vector<RowId>{job});
  const auto queued = store_->find_job(job);
  EXPECT_EQ(queued->state, JobState::Queued);
  EXPECT_EQ(queued->attempts, 1);
  EXPECT_EQ(store_->find_run(run_id)->state, RunState::Interrupted);  // recorded, never in a trend
  EXPECT_EQ(claimed_by(*raw(), job), "");
  EXPECT_EQ(store_->claim_next_job(std::nullopt)->id, job);  // any daemon may run it now
  EXPECT_EQ(claimed_by(*raw(), job), "host-b:/d");
  EXPECT_TRUE(dying->renew_leases().held.empty());  // the old claimant holds nothing any more
}

TEST_P(StoreTest, OnlyTheJobsClaimantWritesItsVerdictSoItIsWrittenOnce) {
  const RowId job = store_->create_job(make_job(build_id_, 1000));
  auto lost = reopen();
  lost->set_claimant({"host-a:/d", 1});
  ASSERT_EQ(lost->claim_next_job(std::nullopt)->id, job);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  store_->set_claimant({"host-b:/d", 60000});
  ASSERT_EQ(store_->requeue_expired_leases().requeued, std::vector<RowId>{job});
  ASSERT_EQ(store_->claim_next_job(std::nullopt)->id, job);

  Verdict verdict;
  verdict.job_id = job;
  verdict.verdict = qgate::Verdict::Pass;
  verdict.comparison = Comparison::Same;
  const JobEnding ok{Disposition::Ok, ""};
  verdict.pairs = 4;
  EXPECT_FALSE(lost->finish_job_with_verdict(verdict, ok, "{}"));  // its lease ran out: nothing written
  EXPECT_FALSE(store_->find_verdict(job).has_value());
  verdict.pairs = 8;
  EXPECT_TRUE(store_->finish_job_with_verdict(verdict, ok, "{}"));
  EXPECT_EQ(store_->find_verdict(job)->pairs, 8);
  EXPECT_EQ(raw_count("verdicts"), 1);
}

// --- Runs ---

TEST_P(StoreTest, FinishRunStoresResultAndSamples) {
  const RowId job = store_->create_job(make_job(build_id_, 1000));
  db::Run run = make_done_run(build_id_, "llama-7b", "q4_K", 5000, 0.0, std::nullopt);
  run.job_id = job;
  run.arm = "A";
  run.state = RunState::Running;
  run.tokens_per_s.reset();
  const RowId run_id = store_->add_run(run);
  EXPECT_EQ(store_->find_run(run_id)->state, RunState::Running);
  EXPECT_EQ(store_->find_run(run_id)->series_key,
            make_series_key("mmq-k", run));  // computed from the build's name

  RunResult result;
  result.finished_ms = 6000;
  result.tokens_per_s = 412.5;
  result.gemm_ms = 1.25;
  result.contended = false;
  const std::vector<Sample> samples{{"gemm_us", "us", 1250.0}, {"tokens_per_s", "tok/s", 412.5}};
  store_->finish_run(run_id, result, samples);

  const auto stored = store_->find_run(run_id);
  EXPECT_EQ(stored->state, RunState::Done);
  EXPECT_EQ(stored->finished_ms, 6000);
  EXPECT_EQ(stored->tokens_per_s, 412.5);
  EXPECT_EQ(stored->contended, false);
  EXPECT_EQ(stored->arm, "A");
  const auto read_samples = store_->run_samples(run_id);
  ASSERT_EQ(read_samples.size(), 2u);
  EXPECT_EQ(read_samples[0].metric, "gemm_us");
  EXPECT_EQ(read_samples[1].value, 412.5);
  EXPECT_EQ(store_->count_runs(job), 1);
  EXPECT_EQ(store_->count_runs(std::nullopt), 1);
  EXPECT_THROW(store_->finish_run(424242, result, {}), StoreError);
}

// A job's run of a profile with several weight types is stored whole, and each type's GEMMs as a part:
// a run row of its own, with the type, its figures and the whole run's placement and co-tenant mark.
// A part is a series of its own in trends; a job's own listing and count read whole runs only.
TEST_P(StoreTest, RunsOfOtherSettingsAreOtherSeriesAndTheirPointsNameThem) {
  // One llama-bench test at two micro-batch sizes: two series, never one pooled point.
  db::Run batched = make_done_run(build_id_, "llama 8B Q4_K - Medium", "", 5000, 11000.0, std::nullopt);
  db::Run smaller = batched;
  smaller.settings = "n_ubatch=256";
  smaller.tokens_per_s = 10300.0;
  const RowId batched_id = store_->add_run(batched);
  const RowId smaller_id = store_->add_run(smaller);
  EXPECT_NE(store_->find_run(batched_id)->series_key, store_->find_run(smaller_id)->series_key);
  // A run without settings keeps the key runs had before settings were stored.
  EXPECT_EQ(store_->find_run(batched_id)->series_key, make_series_key("mmq-k", batched));
  EXPECT_EQ(store_->find_run(smaller_id)->settings, "n_ubatch=256");

  TrendQuery all;
  all.include_unknown = true;
  const auto points = store_->query_trend_summaries(all);
  ASSERT_EQ(points.size(), 2u);
  std::map<std::string, double> median_by_settings;
  for (const auto& p : points) median_by_settings[p.settings] = p.median_tokens_per_s;
  EXPECT_EQ(median_by_settings[""], 11000.0);
  EXPECT_EQ(median_by_settings["n_ubatch=256"], 10300.0);
  const auto rows = store_->query_trend(all);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].settings, "n_ubatch=256");
  CompareRunsQuery of_build;
  of_build.build_id = build_id_;
  const auto compared = store_->compare_runs(of_build);
  ASSERT_EQ(compared.size(), 2u);
  EXPECT_NE(compared[0].settings, compared[1].settings);
}

TEST_P(StoreTest, ARunsPartsAreRunsOfTheirTypeThatAJobsOwnListingLeavesOut) {
  const RowId job = store_->create_job(make_job(build_id_, 1000));
  db::Run run = make_done_run(build_id_, "llama-7b-q4_K_M", "", 5000, 0.0, std::nullopt);
  run.weight_type.reset();
  run.job_id = job;
  run.arm = "A";
  run.state = RunState::Running;
  run.tokens_per_s.reset();
  const RowId run_id = store_->add_run(run);

  RunResult result;
  result.finished_ms = 6000;
  result.tokens = 512;
  result.tokens_per_s = 400.0;
  result.gemm_ms = 1280.0;
  result.parts = {{"q4_K", 1000.0, 512.0}, {"q6_K", 280.0, 512.0 / 0.28}};
  store_->finish_run(run_id, result, {});

  EXPECT_EQ(store_->count_runs(job), 1) << "parts are not runs of the job";
  EXPECT_EQ(store_->count_runs(std::nullopt), 3);
  ASSERT_EQ(store_->job_compare_runs(job).size(), 1u);
  EXPECT_EQ(store_->job_compare_runs(job)[0].run_id, run_id);

  // A trend without a weight type reads whole runs; each type's parts are that type's series.
  TrendQuery all;
  all.include_unknown = true;
  ASSERT_EQ(store_->query_trend(all).size(), 1u);
  EXPECT_EQ(store_->query_trend(all)[0].tokens_per_s, 400.0);
  ASSERT_EQ(store_->query_trend_summaries(all).size(), 1u) << "the parts are not in the whole runs' point";
  std::map<std::string, TrendRow> by_type;
  for (const char* type : {"q4_K", "q6_K"}) {
    TrendQuery of_type = all;
    of_type.weight_type = type;
    const auto rows = store_->query_trend(of_type);
    ASSERT_EQ(rows.size(), 1u) << type;
    by_type[type] = rows[0];
  }
  EXPECT_EQ(by_type["q4_K"].tokens_per_s, 512.0);
  EXPECT_EQ(by_type["q4_K"].job_id, job);
  EXPECT_NE(by_type["q4_K"].series_key, store_->find_run(run_id)->series_key);
  EXPECT_NE(by_type["q4_K"].series_key, by_type["q6_K"].series_key);
  const auto part = store_->find_run(by_type["q6_K"].run_id);
  ASSERT_TRUE(part);
  EXPECT_EQ(part->part_of, run_id);
  EXPECT_EQ(part->arm, "A");
  EXPECT_EQ(part->tokens, 512);
  EXPECT_EQ(part->gemm_ms, 280.0);
  EXPECT_FALSE(store_->find_run(run_id)->part_of);
  CompareRunsQuery of_build;
  of_build.build_id = build_id_;
  EXPECT_EQ(store_->compare_runs(of_build).size(), 1u);
  of_build.weight_type = "q6_K";
  EXPECT_EQ(store_->compare_runs(of_build).size(), 1u);

  TrendQuery q4;
  q4.include_unknown = true;
  q4.weight_type = "q4_K";
  ASSERT_EQ(store_->query_trend(q4).size(), 1u);
  ASSERT_EQ(store_->query_trend_summaries(q4).size(), 1u) << "the part has its trend point";
  TrendQuery of_job = all;
  of_job.job_id = job;
  ASSERT_EQ(store_->query_trend(of_job).size(), 1u) << "a job's runs are its whole runs";

  // The co-tenant mark of the run is its parts' too: a contended run's parts leave the quiet trend.
  CotenantSummary summary;
  summary.run_id = run_id;
  summary.available = true;
  summary.contended = true;
  store_->put_cotenant(summary, {});
  EXPECT_EQ(store_->find_run(by_type["q4_K"].run_id)->contended, true);
  q4.include_unknown = false;
  EXPECT_TRUE(store_->query_trend(q4).empty());
  EXPECT_TRUE(store_->query_trend_summaries(q4).empty());

  // Written again, the finish replaces the parts rather than adding to them.
  result.parts = {{"q4_K", 900.0, 512.0 / 0.9}};
  store_->finish_run(run_id, result, {});
  EXPECT_EQ(store_->count_runs(std::nullopt), 2);
}

TEST_P(StoreTest, RunWhoseSampleFailsMidwayLeavesNoRow) {
  RunBundle good;
  good.run = make_done_run(build_id_, "llama-7b", "q4_K", 1000, 400.0, false);
  good.samples = {{"tokens_per_s", "tok/s", 400.0}};
  RunBundle bad = good;
  bad.samples = {{"gemm_us", "us", 1.0}, {"", "us", 2.0}};  // the second sample breaks a CHECK

  EXPECT_THROW(store_->record_runs(std::vector<RunBundle>{bad}), StoreError);
  EXPECT_EQ(store_->count_runs(std::nullopt), 0);
  EXPECT_EQ(raw_count("samples"), 0);

  // A good run before the bad one in the same batch goes too: the batch is one transaction.
  EXPECT_THROW(store_->record_runs(std::vector<RunBundle>{good, bad}), StoreError);
  EXPECT_EQ(store_->count_runs(std::nullopt), 0);
  EXPECT_EQ(raw_count("samples"), 0);

  EXPECT_EQ(store_->record_runs(std::vector<RunBundle>{good}).size(), 1u);
  EXPECT_EQ(store_->count_runs(std::nullopt), 1);
}

TEST_P(StoreTest, ImportStoresBuildsAndRunsTogetherOrNothing) {
  ExternalImport batch;
  Build external = make_build("llama.cpp@abc/CUDA0/NVIDIA H200", "ext-sha-1");
  external.external = true;
  batch.builds = {external};
  ImportedRun good;
  good.bundle.run = make_done_run(0, "mul_mat-m4096-k14336", "q4_0", 1000, 1.5e6, std::nullopt);
  good.bundle.samples = {{"gemm_us", "us", 341.0}};
  ImportedRun bad = good;
  bad.bundle.run.started_ms = 3000;
  bad.bundle.samples = {{"", "us", 2.0}};  // breaks a CHECK
  batch.runs = {good, good, bad};
  batch.runs[1].bundle.run.started_ms = 2000;

  EXPECT_THROW(store_->import_external(batch), StoreError);
  EXPECT_FALSE(store_->find_build_by_sha256("ext-sha-1"));
  EXPECT_EQ(store_->count_runs(std::nullopt), 0);

  batch.runs.pop_back();
  const ImportOutcome first = store_->import_external(batch);
  EXPECT_EQ(first.builds_added, 1);
  ASSERT_EQ(first.run_ids.size(), 2u);
  const auto stored = store_->find_build(first.build_ids.at(0));
  ASSERT_TRUE(stored);
  EXPECT_TRUE(stored->external);
  EXPECT_EQ(store_->find_run(first.run_ids[0])->build_id, stored->id);
  EXPECT_EQ(store_->run_samples(first.run_ids[1]).size(), 1u);

  // The same results again: the build is found, the runs are not stored twice.
  const ImportOutcome again = store_->import_external(batch);
  EXPECT_EQ(again.builds_added, 0);
  EXPECT_EQ(again.build_ids, first.build_ids);
  EXPECT_TRUE(again.run_ids.empty());
  EXPECT_EQ(again.runs_already_stored, 2);
  EXPECT_EQ(store_->count_runs(std::nullopt), 2);
}

TEST_P(StoreTest, FailedFinishLeavesTheRunUnfinished) {
  db::Run run = make_done_run(build_id_, "llama-7b", "q4_K", 1000, 0.0, std::nullopt);
  run.state = RunState::Running;
  run.tokens_per_s.reset();
  const RowId run_id = store_->add_run(run);
  RunResult result;
  result.tokens_per_s = 400.0;
  const std::vector<Sample> samples{{"gemm_us", "us", 1.0}, {"", "", 2.0}};
  EXPECT_THROW(store_->finish_run(run_id, result, samples), StoreError);
  const auto stored = store_->find_run(run_id);
  EXPECT_EQ(stored->state, RunState::Running);
  EXPECT_FALSE(stored->tokens_per_s.has_value());
  EXPECT_TRUE(store_->run_samples(run_id).empty());
}

// --- Parity, verdicts, co-tenant ---

TEST_P(StoreTest, ParityCasesAreStoredAsOneBatch) {
  const RowId job = store_->create_job(make_job(build_id_, 1000));
  ParityCaseRecord parity;
  parity.job_id = job;
  parity.build_id = build_id_;
  parity.path = "mmq";
  parity.weight_type = "q6_K";
  parity.nt = 512;
  parity.od = 4096;
  parity.k = 4096;
  parity.seed = 0xFFFFFFFFFFFFFFF0ULL;  // above INT64_MAX: must come back bit for bit
  parity.outcome = "passed";
  parity.reference = "cpu-q8-dot";
  parity.tolerance = 1e-3;
  parity.max_abs_diff = 2.5e-5;
  parity.nmse = 1e-9;
  ParityCaseRecord orphan = parity;
  orphan.job_id = 9999;  // no such job: the foreign key refuses it

  EXPECT_THROW(store_->add_parity_cases(std::vector<ParityCaseRecord>{parity, orphan}), StoreError);
  EXPECT_TRUE(store_->parity_cases(job).empty());

  store_->add_parity_cases(std::vector<ParityCaseRecord>{parity, parity});
  const auto cases = store_->parity_cases(job);
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_EQ(cases[0].seed, 0xFFFFFFFFFFFFFFF0ULL);
  EXPECT_EQ(cases[0].weight_type, "q6_K");
  EXPECT_EQ(cases[0].max_abs_diff, 2.5e-5);
  EXPECT_GT(cases[0].created_ms, 0);
}

TEST_P(StoreTest, VerdictIsInsertedThenReplaced) {
  const RowId job = store_->create_job(make_job(build_id_, 1000));
  Verdict verdict;
  verdict.job_id = job;
  verdict.verdict = qgate::Verdict::Inconclusive;
  verdict.comparison = Comparison::Unknown;
  verdict.pairs = 8;
  verdict.reasons = {"3 of 8 pairs contended (sglang@96%)"};
  store_->put_verdict(verdict);
  EXPECT_EQ(store_->find_verdict(job)->reasons, verdict.reasons);

  verdict.verdict = qgate::Verdict::Pass;
  verdict.comparison = Comparison::Same;
  verdict.ratio = 0.987;
  verdict.ci_low = 0.962;
  verdict.ci_high = 1.012;
  verdict.reasons = {"SAME within 2%", "parity green"};
  store_->put_verdict(verdict);
  const auto stored = store_->find_verdict(job);
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->verdict, qgate::Verdict::Pass);
  EXPECT_EQ(stored->comparison, Comparison::Same);
  EXPECT_EQ(stored->ratio, 0.987);
  EXPECT_EQ(stored->reasons, verdict.reasons);
  EXPECT_EQ(raw_count("verdicts"), 1);
  EXPECT_FALSE(store_->find_verdict(job + 1).has_value());
}

TEST_P(StoreTest, FinishingAJobWritesItsVerdictAndStateTogether) {
  const RowId job = store_->create_job(make_job(build_id_, 1000));
  Verdict verdict;
  verdict.job_id = job;
  verdict.verdict = qgate::Verdict::Pass;
  verdict.comparison = Comparison::Same;
  verdict.pairs = 8;
  // Not running yet: nothing is written.
  const JobEnding ok{Disposition::Ok, ""};
  EXPECT_FALSE(store_->finish_job_with_verdict(verdict, ok, R"({"done":true})"));
  EXPECT_FALSE(store_->find_verdict(job).has_value());
  EXPECT_EQ(store_->find_job(job)->state, JobState::Queued);

  ASSERT_EQ(store_->claim_next_job(std::nullopt)->id, job);
  EXPECT_TRUE(store_->finish_job_with_verdict(verdict, ok, R"({"done":true})"));
  const auto done = store_->find_job(job);
  EXPECT_EQ(done->state, JobState::Done);
  EXPECT_TRUE(done->finished_ms.has_value());
  EXPECT_EQ(done->progress_json, R"({"done":true})");
  EXPECT_EQ(store_->find_verdict(job)->pairs, 8);
  EXPECT_EQ(done->disposition, Disposition::Ok);
  EXPECT_THROW(store_->finish_job_with_verdict(Verdict{.job_id = 777}, ok, "{}"), StoreError);
}

TEST_P(StoreTest, CotenantSummaryMarksTheRunAndKeepsSamples) {
  const RowId run_id = store_->add_run(make_done_run(build_id_, "p", "q4_0", 1000, 155.0, std::nullopt));
  CotenantSummary summary;
  summary.run_id = run_id;
  summary.available = true;
  summary.sample_period_ms = 100;
  summary.max_foreign_sm = 96.0;
  summary.top_processes = "sglang@96%";
  summary.contended = true;
  summary.policy = "foreign_sm>5";
  std::vector<CotenantSample> samples(3);
  for (int i = 0; i < 3; ++i) {
    samples[i].t_ms = 1000 + 100 * i;
    samples[i].foreign_sm = 90.0 + i;
    samples[i].throttle_reasons = 4;
    samples[i].foreign_processes = "sglang";
  }
  store_->put_cotenant(summary, samples);
  EXPECT_EQ(store_->find_run(run_id)->contended, true);
  EXPECT_EQ(store_->find_cotenant(run_id)->top_processes, "sglang@96%");
  ASSERT_EQ(store_->cotenant_samples(run_id).size(), 3u);
  EXPECT_EQ(store_->cotenant_samples(run_id)[2].foreign_sm, 92.0);

  // Re-measured annotation replaces the summary and the samples, not adds to them.
  summary.contended = false;
  summary.top_processes = "";
  store_->put_cotenant(summary, std::vector<CotenantSample>(samples.begin(), samples.begin() + 1));
  EXPECT_EQ(store_->find_run(run_id)->contended, false);
  EXPECT_EQ(store_->cotenant_samples(run_id).size(), 1u);
  EXPECT_EQ(raw_count("cotenant"), 1);

  summary.run_id = 99999;
  EXPECT_THROW(store_->put_cotenant(summary, {}), StoreError);
}

// --- History ---

class TrendTest : public testing::TwoBuildsFixture {
 protected:
  void SetUp() override {
    TwoBuildsFixture::SetUp();
    if (IsSkipped()) return;
    f16_ = store_->insert_build(make_build("f16-x", "sha-f", 30)).id;
    std::vector<RunBundle> bundles;
    auto add = [&](RowId build, const char* profile, const char* type, std::int64_t started,
                   double tps, std::optional<bool> contended) {
      RunBundle bundle;
      bundle.run = make_done_run(build, profile, type, started, tps, contended);
      bundles.push_back(bundle);
    };
    add(mmq_a_, "llama-7b", "q4_K", 1000, 400, false);   // 0
    add(mmq_a_, "llama-7b", "q4_K", 2000, 155, true);    // 1 contended
    add(mmq_a_, "llama-7b", "q8_0", 3000, 300, false);   // 2 other type
    add(mmq_b_, "llama-7b", "q4_K", 4000, 441, false);   // 3
    add(mmq_b_, "llama-13b", "q4_K", 5000, 200, false);  // 4 other profile
    add(f16_, "llama-7b", "q4_K", 6000, 380, false);     // 5 other name
    add(mmq_b_, "llama-7b", "q4_K", 7000, 430, std::nullopt);  // 6 co-tenant unknown
    ids_ = store_->record_runs(bundles);
    // A run still in progress never shows in a trend.
    db::Run running = make_done_run(mmq_a_, "llama-7b", "q4_K", 8000, 999, false);
    running.state = RunState::Running;
    store_->add_run(running);
  }

  std::vector<RowId> run_ids(const TrendQuery& query) {
    std::vector<RowId> ids;
    for (const TrendRow& row : store_->query_trend(query)) ids.push_back(row.run_id);
    return ids;
  }
  std::vector<RowId> pick(std::initializer_list<int> indexes) {
    std::vector<RowId> ids;
    for (int index : indexes) ids.push_back(ids_[index]);
    return ids;
  }

  RowId f16_ = 0;
  std::vector<RowId> ids_;
};
INSTANTIATE_FOR_BOTH_ENGINES(TrendTest);

TEST_P(TrendTest, DefaultsToQuietRunsOnly) {
  TrendQuery query;
  query.profile = "llama-7b";
  query.weight_type = "q4_K";
  EXPECT_EQ(run_ids(query), pick({0, 3, 5}));
  query.include_contended = true;
  EXPECT_EQ(run_ids(query), pick({0, 1, 3, 5, 6}));
}

TEST_P(TrendTest, FiltersByProfileTypeSinceAndGlob) {
  TrendQuery query;
  query.profile = "llama-7b";
  EXPECT_EQ(run_ids(query), pick({0, 2, 3, 5}));
  query.weight_type = "q4_K";
  query.since_ms = 3500;
  EXPECT_EQ(run_ids(query), pick({3, 5}));
  query.build_name_glob = "mmq-*";
  EXPECT_EQ(run_ids(query), pick({3}));
  query.since_ms = 0;
  query.include_contended = true;
  EXPECT_EQ(run_ids(query), pick({0, 1, 3, 6}));

  TrendQuery by_profile;
  by_profile.profile = "llama-13b";
  EXPECT_EQ(run_ids(by_profile), pick({4}));
  TrendQuery limited;
  limited.limit = 2;
  EXPECT_EQ(run_ids(limited), pick({0, 2}));
}

TEST_P(TrendTest, RowsCarryBuildNameAndSha) {
  TrendQuery query;
  query.build_name_glob = "f16-?";
  const auto rows = store_->query_trend(query);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].build_name, "f16-x");
  EXPECT_EQ(rows[0].build_sha256, "sha-f");
  EXPECT_EQ(rows[0].started_ms, 6000);
  EXPECT_EQ(rows[0].tokens_per_s, 380.0);
  EXPECT_EQ(rows[0].contended, false);
}

TEST_P(TrendTest, CompareRunsReturnsOneBuildsFinishedRunsWithTheirSeriesFields) {
  CompareRunsQuery query;
  query.build_id = mmq_a_;
  const auto runs = store_->compare_runs(query);
  // Contended runs come back flagged (the caller counts what it leaves out); running ones never do.
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].run_id, ids_[0]);
  EXPECT_EQ(runs[1].run_id, ids_[1]);
  EXPECT_EQ(runs[1].contended, true);
  EXPECT_EQ(runs[2].weight_type, "q8_0");
  EXPECT_EQ(runs[0].backend, "cuda");
  EXPECT_EQ(runs[0].gpu_name, "NVIDIA H200");
  EXPECT_EQ(runs[0].gpu_uuid, "GPU-00000000-0000-0000-0000-000000000000");
  EXPECT_EQ(runs[0].tokens, 512);
  EXPECT_EQ(runs[0].tokens_per_s, 400.0);
  EXPECT_FALSE(runs[0].job_id.has_value());
  EXPECT_FALSE(runs[0].job_timing.has_value());

  query.weight_type = "q4_K";
  EXPECT_EQ(store_->compare_runs(query).size(), 2u);
  query.tokens = 64;
  EXPECT_TRUE(store_->compare_runs(query).empty());
  query = CompareRunsQuery{};
  query.build_id = mmq_b_;
  query.profile = "llama-13b";
  ASSERT_EQ(store_->compare_runs(query).size(), 1u);
  EXPECT_EQ(store_->compare_runs(query)[0].run_id, ids_[4]);
}

TEST_P(TrendTest, CompareRunsCarryTheirJobAndItsTiming) {
  Job job;
  job.kind = "gate";
  job.build_id = mmq_a_;
  job.baseline_build_id = mmq_b_;
  job.timing = TimingMode::Pass;
  const RowId job_id = store_->create_job(job);
  db::Run run = make_done_run(mmq_a_, "llama-7b", "q4_K", 9000, 410, false);
  run.job_id = job_id;
  run.arm = "A";
  run.pair_index = 3;
  RunBundle bundle;
  bundle.run = run;
  const RowId id = store_->record_runs(std::vector<RunBundle>{bundle}).at(0);
  CompareRunsQuery query;
  query.build_id = mmq_a_;
  const auto runs = store_->compare_runs(query);
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_EQ(runs.back().run_id, id);
  EXPECT_EQ(runs.back().job_id, job_id);
  EXPECT_EQ(runs.back().arm, "A");
  EXPECT_EQ(runs.back().pair_index, 3);
  EXPECT_EQ(runs.back().job_timing, TimingMode::Pass);
}

// --- Failure paths ---

TEST(SqliteStoreFailure, ReadOnlyDatabaseRefusesWritesAndKeepsData) {
  TempDir dir;
  const auto path = dir.file("qgate.db");
  {
    auto store = open_store(path);
    store->insert_build(make_build("k", "sha-1"));
  }
  std::filesystem::permissions(path, std::filesystem::perms::owner_read);

  SqliteOptions options;
  options.path = path;
  options.read_only = true;
  auto store = open_sqlite_store(options);
  ASSERT_TRUE(store->find_build_by_sha256("sha-1").has_value());  // reads work
  try {
    store->insert_build(make_build("k", "sha-2"));
    FAIL() << "write on a read-only database succeeded";
  } catch (const StoreError& error) {
    EXPECT_EQ(error.kind(), StoreErrorKind::ReadOnly) << error.what();
    const std::string message = error.what();
    EXPECT_NE(message.find("insert_build"), std::string::npos) << message;
    EXPECT_NE(message.find("readonly"), std::string::npos) << message;  // SQLite's own words
  }
  EXPECT_THROW(store->create_job(make_job(1, 1000)), StoreError);
  store.reset();

  std::filesystem::permissions(path, std::filesystem::perms::owner_read |
                                         std::filesystem::perms::owner_write);
  auto reopened = open_store(path);
  EXPECT_FALSE(reopened->find_build_by_sha256("sha-2").has_value());
  EXPECT_TRUE(reopened->list_jobs(JobFilter{}).empty());
  EXPECT_EQ(raw_count(path, "builds"), 1);
}

TEST(SqliteStoreFailure, FullDiskIsAStoreErrorAndLeavesNoHalfBatch) {
  TempDir dir;
  const auto path = dir.file("qgate.db");
  SqliteOptions options;
  options.path = path;
  options.max_size_bytes = 256 * 1024;  // the schema fits; a few hundred runs do not
  auto store = open_sqlite_store(options);
  const RowId build = store->insert_build(make_build("k", "sha-1")).id;

  std::vector<RunBundle> batch(50);
  for (auto& bundle : batch) {
    bundle.run = make_done_run(build, "llama-7b", "q4_K", 1000, 400, false);
    bundle.run.options_json = std::string(400, 'x');  // fills pages quickly
    bundle.samples = {{"tokens_per_s", "tok/s", 400}};
  }
  std::int64_t stored = 0;
  bool full = false;
  for (int attempt = 0; attempt < 100 && !full; ++attempt) {
    try {
      stored += static_cast<std::int64_t>(store->record_runs(batch).size());
    } catch (const StoreError& error) {
      EXPECT_EQ(error.kind(), StoreErrorKind::Full) << error.what();
      full = true;
    }
  }
  ASSERT_TRUE(full) << "the size limit was never reached";
  EXPECT_GT(stored, 0);
  EXPECT_EQ(store->count_runs(std::nullopt), stored);  // whole batches only
  EXPECT_EQ(store->integrity_check(), "ok");
}

}  // namespace
}  // namespace qgate::db
