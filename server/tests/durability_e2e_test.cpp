// kill -9 of qgated, 20 times, at varied points of a stream of small A/B jobs (cpu-tiny, 4 pairs):
// right after a start, right after a submit, in the middle of a job's runs. After every kill the
// database (opened read-only from here, as a second process would) passes integrity_check and has
// lost no finished run, verdict or finished job; after the last restart every job that was cut off
// runs to the end.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "daemon_under_test.h"

using namespace std::chrono_literals;
using namespace qgate::testing;

namespace {

/// What must never go backwards across a crash, read straight from the SQLite file.
struct Committed {
  int64_t done_runs = 0;
  int64_t verdicts = 0;
  int64_t finished_jobs = 0;  // done, failed or cancelled
  int64_t jobs = 0;
  int64_t interrupted_runs = 0;  // cut off by a kill (marked at the restart)
  std::string integrity;
};

int64_t count(sqlite3* db, const char* sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
    return -1;
  }
  int64_t value = -1;
  if (sqlite3_step(stmt) == SQLITE_ROW) value = sqlite3_column_int64(stmt, 0);
  else ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
  sqlite3_finalize(stmt);
  return value;
}

Committed read_committed(const std::string& db_path) {
  Committed c;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "cannot open " << db_path << " read-only: " << (db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_close(db);
    return c;
  }
  sqlite3_busy_timeout(db, 10000);
  c.done_runs = count(db, "SELECT count(*) FROM runs WHERE state = 'done'");
  c.verdicts = count(db, "SELECT count(*) FROM verdicts");
  c.finished_jobs = count(db, "SELECT count(*) FROM jobs WHERE state IN ('done', 'failed', 'cancelled')");
  c.jobs = count(db, "SELECT count(*) FROM jobs");
  c.interrupted_runs = count(db, "SELECT count(*) FROM runs WHERE state = 'interrupted'");
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &stmt, nullptr) == SQLITE_OK) {
    while (sqlite3_step(stmt) == SQLITE_ROW)
      c.integrity += (c.integrity.empty() ? "" : "; ") + std::string(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)));
  } else {
    c.integrity = std::string("cannot run integrity_check: ") + sqlite3_errmsg(db);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return c;
}

bool ready(DaemonUnderTest& d) {
  std::string why;
  // The kills here are the operator's, not a build's: every job must survive all twenty, so the cap
  // on daemon deaths under one job (docs/security.md) is lifted.
  const bool ok = d.try_start({"--max-daemon-deaths", "1000"}, "", &why);
  EXPECT_TRUE(ok) << "qgated did not restart: " << why;
  return ok;
}

}  // namespace

TEST(Durability, TwentyKill9sLoseNoResultAndEveryJobFinishesAfterTheLastRestart) {
  constexpr int kKills = 20;
  const std::string job_args = "--name ref --kind ab --profile cpu-tiny --min-pairs 4 --max-pairs 4";
  DaemonUnderTest d;
  ASSERT_TRUE(ready(d));
  const std::string db_path = d.dir() + "/qgate.db";
  std::vector<int64_t> jobs;
  jobs.push_back(submit_no_wait(d, job_args));

  // Where each kill lands, in milliseconds after the restart (and the submit, when there is one):
  // 0 kills at once (mid-claim or before), the rest spread over a job's ~2-3 s of runs.
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<int> delay_ms(0, 2500);
  Committed before = read_committed(db_path);
  for (int kill = 0; kill < kKills; ++kill) {
    // A new job every third round keeps the queue fed without making the final drain long.
    if (kill % 3 == 0) jobs.push_back(submit_no_wait(d, job_args));
    const int wait = kill % 5 == 0 ? 0 : delay_ms(rng);
    std::this_thread::sleep_for(std::chrono::milliseconds(wait));
    const Committed seen = read_committed(db_path);  // what the daemon had committed just before
    d.kill9();
    const Committed after = read_committed(db_path);
    SCOPED_TRACE("kill " + std::to_string(kill + 1) + " after " + std::to_string(wait) + " ms");
    EXPECT_EQ(after.integrity, "ok");
    EXPECT_GE(after.done_runs, seen.done_runs) << "a finished run was lost";
    EXPECT_GE(after.verdicts, seen.verdicts) << "a verdict was lost";
    EXPECT_GE(after.finished_jobs, seen.finished_jobs) << "a finished job was lost";
    EXPECT_EQ(after.jobs, int64_t(jobs.size())) << "a submitted job was lost";
    EXPECT_GE(after.done_runs, before.done_runs);
    before = after;
    ASSERT_TRUE(ready(d));
  }

  // After the last restart every job, interrupted or queued, runs to its verdict.
  for (int64_t job : jobs) {
    auto w = d.cli("watch " + std::to_string(job));
    EXPECT_TRUE(w.code == 0 || w.code == 1 || w.code == 2) << "job " << job << ": " << w.err << w.out;
    const json j = show(d, job);
    EXPECT_EQ(state_of(j), "JOB_STATE_DONE") << j.dump();
    EXPECT_EQ(j["verdict"]["pairs"].get<int>(), 4) << j.dump();
  }
  EXPECT_TRUE(d.terminate(20s)) << d.log();
  const Committed end = read_committed(db_path);
  EXPECT_EQ(end.integrity, "ok");
  EXPECT_EQ(end.verdicts, int64_t(jobs.size()));
  EXPECT_EQ(end.finished_jobs, int64_t(jobs.size()));
  EXPECT_GE(end.done_runs, int64_t(jobs.size()) * 8) << "every job's 4 pairs are 8 finished runs";
  EXPECT_GE(end.done_runs, before.done_runs);
  EXPECT_GT(end.interrupted_runs, 0) << "no kill landed in the middle of a run: the test tested nothing";
}
