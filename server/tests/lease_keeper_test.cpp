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
  LeaseKeeper keeper(*ours_, lease, db::kMaxDaemonDeaths, [&] { ++wakeups; });
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
  LeaseKeeper keeper(*ours_, lease, db::kMaxDaemonDeaths, [&] { ++wakeups; });
  keeper.start();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ours_->find_job(dead)->state != db::JobState::Queued && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  keeper.stop();
  EXPECT_EQ(ours_->find_job(dead)->state, db::JobState::Queued);
  EXPECT_EQ(wakeups.load(), 1);
}

}  // namespace
}  // namespace qgate::server
