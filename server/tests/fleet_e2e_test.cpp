// Two real qgated daemons on one PostgreSQL database (a fresh one on the tests' throwaway server),
// each with its own data dir, on the CPU backend: a job submitted to one is run by whichever claims
// it; kill -9 of the daemon that runs it, mid-job, and the other takes the job back when its lease
// runs out and runs it to the end. Nothing is lost or doubled: one verdict, the job counted one
// daemon's death, its cut-off runs kept as interrupted, no run left running (docs/fleet.md).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "daemon_under_test.h"
#include "test_postgres.h"

using namespace std::chrono_literals;
using namespace qgate::testing;

namespace {

TEST(FleetE2e, AJobWhoseDaemonIsKilledMidJobFinishesOnTheOtherDaemonOnce) {
  auto& server = qgate::test_support::TestPostgres::for_process();
  if (!server.available()) GTEST_SKIP() << "no PostgreSQL server: " << server.why_unavailable();
  const auto database = server.fresh_database();
  const std::string store = database.store_address();
  const std::vector<std::string> flags = {"--store", store, "--lease-s", "3"};

  DaemonUnderTest first, second;
  first.threads = "1";
  second.threads = "1";
  std::string why;
  ASSERT_TRUE(first.try_start(flags, "", &why)) << why;
  ASSERT_TRUE(second.try_start(flags, "", &why)) << why;

  const int64_t job = submit_no_wait(first, "--name ref --kind ab --profile cpu-tiny --min-pairs 6 --max-pairs 6");
  const std::string id = std::to_string(job);
  // Wait for the job to be under way: claimed, and at least one of its runs finished.
  std::string claimant;
  const auto under_way = std::chrono::steady_clock::now() + 120s;
  while (std::chrono::steady_clock::now() < under_way) {
    claimant = database.query_value("SELECT claimed_by FROM jobs WHERE id = " + id);
    if (!claimant.empty() &&
        database.query_value("SELECT count(*) FROM runs WHERE state = 'done' AND job_id = " + id) != "0")
      break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_FALSE(claimant.empty()) << "the job was never claimed";
  const bool first_runs_it = claimant.find(first.dir()) != std::string::npos;
  DaemonUnderTest& victim = first_runs_it ? first : second;
  DaemonUnderTest& survivor = first_runs_it ? second : first;
  ASSERT_EQ(database.query_value("SELECT state FROM jobs WHERE id = " + id), "running");
  victim.kill9();

  // The survivor takes it back once the lease (3 s) runs out, and runs it to the end.
  const auto finished = std::chrono::steady_clock::now() + 240s;
  std::string state;
  while (std::chrono::steady_clock::now() < finished) {
    state = database.query_value("SELECT state FROM jobs WHERE id = " + id);
    if (state == "done" || state == "failed" || state == "cancelled") break;
    std::this_thread::sleep_for(200ms);
  }
  ASSERT_EQ(state, "done") << survivor.log();
  EXPECT_NE(database.query_value("SELECT claimed_by FROM jobs WHERE id = " + id).find(survivor.dir()),
            std::string::npos);
  EXPECT_EQ(database.query_value("SELECT attempts FROM jobs WHERE id = " + id), "1");
  EXPECT_EQ(database.query_value("SELECT count(*) FROM verdicts WHERE job_id = " + id), "1");
  EXPECT_EQ(database.query_value("SELECT count(*) FROM runs WHERE state = 'running'"), "0");
  EXPECT_NE(database.query_value(
                        "SELECT count(*) FROM runs WHERE state = 'interrupted' AND job_id = " + id),
            "0")
      << "the killed daemon's run under way is kept, marked interrupted";
  // The survivor answers for the whole database: the job and its verdict, whichever daemon ran it.
  const json shown = show(survivor, job);
  EXPECT_EQ(state_of(shown), "JOB_STATE_DONE") << shown.dump();
  EXPECT_NE(survivor.log().find("lease ran out"), std::string::npos) << survivor.log();
}

}  // namespace
