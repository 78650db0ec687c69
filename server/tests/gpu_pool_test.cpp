// GpuPool: a GPU's scheduler claims only when no split job holds it; a split job takes its partner
// once the partner's job ends, and no job starts on either meanwhile; two split jobs claimed on the
// two GPUs at once run one after the other instead of waiting on each other; a stop ends the wait;
// the partner of a split is a served GPU of the same name.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "qgate/server/gpu_pool.h"

namespace qgate::server {
namespace {

using namespace std::chrono_literals;

std::vector<ServedGpu> gpus(std::vector<std::string> names) {
  std::vector<ServedGpu> out;
  for (size_t i = 0; i < names.size(); ++i) {
    ServedGpu g;
    g.ordinal = int(i);
    g.name = names[i];
    out.push_back(g);
  }
  return out;
}

TEST(GpuPoolTest, OneClaimAtATimePerGpu) {
  GpuPool pool(gpus({"H200", "H200"}));
  EXPECT_TRUE(pool.begin_claim(0));
  EXPECT_FALSE(pool.begin_claim(0));  // its scheduler is claiming (or running)
  EXPECT_TRUE(pool.begin_claim(1));   // the other GPU is free
  pool.mark_running(0, 7);
  EXPECT_EQ(pool.running_job(0), 7);
  EXPECT_EQ(pool.running_job(1), 0);  // claiming is not running
  pool.release(0);
  EXPECT_EQ(pool.running_job(0), 0);
  EXPECT_TRUE(pool.begin_claim(0));
}

TEST(GpuPoolTest, ASplitJobWaitsForItsPartnerAndHoldsIt) {
  GpuPool pool(gpus({"H200", "H200"}));
  ASSERT_TRUE(pool.begin_claim(1));
  pool.mark_running(1, 5);  // GPU 1 runs job 5
  ASSERT_TRUE(pool.begin_claim(0));
  std::atomic<int> stop{0};
  std::atomic<bool> acquired{false};
  std::thread split([&] { acquired = pool.acquire_pair(0, 1, 9, stop); });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(acquired);
  EXPECT_EQ(pool.split_job(1), 9);  // held for the split job: no new claim on it ...
  pool.release(1);                  // ... job 5 ends
  EXPECT_FALSE(pool.begin_claim(1));
  split.join();
  EXPECT_TRUE(acquired);
  EXPECT_EQ(pool.running_job(0), 9);
  EXPECT_EQ(pool.running_job(1), 9);
  EXPECT_FALSE(pool.begin_claim(0));
  pool.release_pair(0, 1);
  EXPECT_TRUE(pool.begin_claim(0));
  EXPECT_TRUE(pool.begin_claim(1));
}

TEST(GpuPoolTest, TwoSplitJobsClaimedAtOnceRunOneAfterTheOther) {
  GpuPool pool(gpus({"H200", "H200"}));
  ASSERT_TRUE(pool.begin_claim(0));
  ASSERT_TRUE(pool.begin_claim(1));
  std::atomic<int> stop{0};
  std::atomic<int> order{0};
  int first_done = 0, second_done = 0;
  auto job = [&](int self, int partner, int64_t id, int* done) {
    ASSERT_TRUE(pool.acquire_pair(self, partner, id, stop));
    std::this_thread::sleep_for(50ms);
    *done = ++order;
    pool.release_pair(self, partner);
  };
  std::thread a(job, 0, 1, 11, &first_done);
  std::thread b(job, 1, 0, 12, &second_done);
  a.join();
  b.join();
  EXPECT_NE(first_done, second_done);
  EXPECT_EQ(first_done + second_done, 3);
  EXPECT_TRUE(pool.begin_claim(0));
}

TEST(GpuPoolTest, AStopEndsTheWaitHoldingNothing) {
  GpuPool pool(gpus({"H200", "H200"}));
  ASSERT_TRUE(pool.begin_claim(1));
  pool.mark_running(1, 5);
  ASSERT_TRUE(pool.begin_claim(0));
  std::atomic<int> stop{0};
  std::atomic<bool> done{false}, acquired{true};
  std::thread split([&] {
    acquired = pool.acquire_pair(0, 1, 9, stop);
    done = true;
  });
  std::this_thread::sleep_for(50ms);
  stop = 2;
  split.join();
  EXPECT_TRUE(done);
  EXPECT_FALSE(acquired);
  EXPECT_EQ(pool.split_job(0), 0);
  EXPECT_EQ(pool.split_job(1), 0);
  EXPECT_EQ(pool.running_job(1), 5);
}

TEST(GpuPoolTest, ThePartnerIsAServedGpuOfTheSameName) {
  GpuPool pool(gpus({"H200", "A100", "H200", "H200"}));
  EXPECT_EQ(pool.split_partner(0, std::nullopt), 2);
  ASSERT_TRUE(pool.begin_claim(2));
  pool.mark_running(2, 4);
  EXPECT_EQ(pool.split_partner(0, std::nullopt), 3);  // the idle one first
  EXPECT_EQ(pool.split_partner(0, 2), 2);             // a named one even when busy
  EXPECT_EQ(pool.split_partner(0, 1), std::nullopt);  // another model
  EXPECT_EQ(pool.split_partner(0, 0), std::nullopt);  // itself
  EXPECT_EQ(pool.split_partner(0, 9), std::nullopt);  // not served
  EXPECT_EQ(pool.split_partner(1, std::nullopt), std::nullopt);
  EXPECT_THROW(GpuPool(gpus({})), std::invalid_argument);
}

}  // namespace
}  // namespace qgate::server
