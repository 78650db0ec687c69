// Tests of the lease keeper on a real store shared by two daemons' claimants: its pass keeps its own
// running job's lease alive, and takes back (and wakes the scheduler for) a job whose daemon stopped
// renewing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "qgate/db/sqlite_store.h"
#include "qgate/server/lease_keeper.h"

namespace qgate::server {
namespace {

class LeaseKeeperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("qgate-lease-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    ours_ = open();
    theirs_ = open();
    db::Build build;
    build.name = "mmq";
    build.sha256 = "sha-mmq";
    build_ = ours_->insert_build(build).id;
  }
  void TearDown() override {
    ours_.reset();
    theirs_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::unique_ptr<db::Store> open() {
    db::SqliteOptions options;
    options.path = dir_ / "qgate.db";
    return db::open_sqlite_store(options);
  }
  db::RowId queue_job() {
    db::Job job;
    job.kind = "gate";
    job.build_id = build_;
    job.spec_json = "{}";
    return ours_->create_job(job);
  }

  std::filesystem::path dir_;
  std::unique_ptr<db::Store> ours_, theirs_;
  db::RowId build_ = 0;
};

TEST_F(LeaseKeeperTest, ItsPassKeepsItsOwnJobAndTakesBackADeadDaemonsJob) {
  const auto lease = std::chrono::milliseconds(1000);
  ours_->set_claimant({"host-a:/d", lease.count()});
  theirs_->set_claimant({"host-b:/d", lease.count()});
  const db::RowId own = queue_job();
  const db::RowId dead = queue_job();
  ASSERT_EQ(ours_->claim_next_job(std::nullopt)->id, own);
  ASSERT_EQ(theirs_->claim_next_job(std::nullopt)->id, dead);  // host-b then dies: nothing renews it

  int wakeups = 0;
  LeaseKeeper keeper(*ours_, lease, db::kMaxDaemonDeaths, LeaseHooks{[&] { ++wakeups; }, {}, {}, {}});
  for (int i = 0; i < 4; ++i) {  // two leases' time, renewed every half lease
    std::this_thread::sleep_for(lease / 2);
    keeper.pass();
  }
  EXPECT_EQ(ours_->find_job(own)->state, db::JobState::Running);  // renewed all along
  const auto taken = ours_->find_job(dead);
  EXPECT_EQ(taken->state, db::JobState::Queued);
  EXPECT_EQ(taken->attempts, 1);
  EXPECT_EQ(wakeups, 1);
}

TEST_F(LeaseKeeperTest, ItsThreadRunsPassesUntilStopped) {
  const auto lease = std::chrono::milliseconds(400);
  theirs_->set_claimant({"host-b:/d", lease.count()});
  const db::RowId dead = queue_job();
  ASSERT_EQ(theirs_->claim_next_job(std::nullopt)->id, dead);
  ours_->set_claimant({"host-a:/d", lease.count()});
  std::atomic<int> wakeups{0};
  LeaseKeeper keeper(*ours_, lease, db::kMaxDaemonDeaths, LeaseHooks{[&] { ++wakeups; }, {}, {}, {}});
  keeper.start();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ours_->find_job(dead)->state != db::JobState::Queued && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  keeper.stop();
  EXPECT_EQ(ours_->find_job(dead)->state, db::JobState::Queued);
  EXPECT_EQ(wakeups.load(), 1);
}

TEST_F(LeaseKeeperTest, ItsRenewalSaysWhichJobsWereAskedToCancelAndWhichItNoLongerHolds) {
  const auto lease = std::chrono::milliseconds(60000);
  ours_->set_claimant({"host-a:/d", lease.count(), "host-a"});
  const db::RowId kept = queue_job();
  const db::RowId cancelled = queue_job();
  const db::RowId lost = queue_job();
  for (db::RowId id : {kept, cancelled, lost}) ASSERT_EQ(ours_->claim_next_job(std::nullopt)->id, id);
  EXPECT_EQ(ours_->find_job(kept)->host, "host-a");
  // Another daemon's cancel, and a job put back in the queue under host-a (as a sweep does).
  ASSERT_TRUE(theirs_->request_cancel(cancelled));
  ASSERT_TRUE(theirs_->update_job_state(lost, db::JobState::Queued, std::nullopt, db::JobState::Running));

  db::LeaseRenewal seen;
  std::vector<int64_t> running_seen;
  std::vector<db::FleetGpu> published;
  db::FleetGpu gpu;
  gpu.host = "host-a";
  gpu.name = "NVIDIA H200";
  gpu.labels = {"sm90"};
  LeaseHooks hooks;
  hooks.running = [&] { return std::vector<int64_t>{kept, cancelled, lost}; };
  hooks.renewed = [&](const db::LeaseRenewal& renewal, const std::vector<int64_t>& running) {
    seen = renewal;
    running_seen = running;
  };
  hooks.gpus = [&] { return std::vector<db::FleetGpu>{gpu}; };
  LeaseKeeper keeper(*ours_, lease, db::kMaxDaemonDeaths, hooks);
  keeper.pass();
  EXPECT_EQ(seen.held, (std::vector<db::RowId>{kept, cancelled}));
  EXPECT_EQ(seen.cancel_requested, (std::vector<db::RowId>{cancelled}));
  EXPECT_EQ(running_seen, (std::vector<int64_t>{kept, cancelled, lost}));
  const auto fleet = theirs_->list_fleet_gpus(0);
  ASSERT_EQ(fleet.size(), 1u);
  EXPECT_EQ(fleet[0].claimant, "host-a:/d");
  EXPECT_EQ(fleet[0].name, "NVIDIA H200");
  EXPECT_EQ(fleet[0].labels, (std::vector<std::string>{"sm90"}));
}

}  // namespace
}  // namespace qgate::server
