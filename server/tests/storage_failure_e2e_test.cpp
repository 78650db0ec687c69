// qgated when its storage fails: a full disk (simulated with RLIMIT_FSIZE in qgated's process, with
// SIGXFSZ ignored, so every write past the limit fails with EFBIG as on a full file system) and a
// read-only database file. The daemon must not crash, must say clearly what is wrong, must write
// no verdict for a job it could not finish, keep serving reads, and lose nothing: once the storage
// is healthy again, the cut-off jobs run to their verdicts.
#include <grp.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "daemon_under_test.h"

using namespace std::chrono_literals;
using namespace qgate::testing;

namespace {

const std::string kAbJob = "--name ref --kind ab --profile cpu-tiny --min-pairs 4 --max-pairs 4";

int64_t query_int(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  int64_t value = -1;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 10000);
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW)
      value = sqlite3_column_int64(stmt, 0);
    else
      ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
    sqlite3_finalize(stmt);
  } else {
    ADD_FAILURE() << "cannot open " << db_path << " read-only";
  }
  sqlite3_close(db);
  return value;
}

std::string integrity(const std::string& db_path) {
  sqlite3* db = nullptr;
  std::string result = "cannot open";
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &stmt, nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW)
      result = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    sqlite3_finalize(stmt);
  }
  sqlite3_close(db);
  return result;
}

bool wait_for_log(const DaemonUnderTest& d, const std::string& text, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (d.log().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

bool alive(pid_t pid) { return pid > 0 && waitpid(pid, nullptr, WNOHANG) == 0; }

}  // namespace

TEST(StorageFailure, AFullDiskFailsTheJobClearlyWritesNoVerdictAndLosesNothing) {
  DaemonUnderTest d;
  std::string why;
  ASSERT_TRUE(d.try_start({}, "", &why)) << why;
  const std::string db_path = d.dir() + "/qgate.db";
  // Two jobs in the database, uploaded while the disk had room; stopped before they could finish.
  const int64_t first = submit_no_wait(d, kAbJob);
  const int64_t second = submit_no_wait(d, kAbJob);
  ASSERT_TRUE(d.terminate(20s)) << d.log();
  ASSERT_EQ(query_int(db_path, "SELECT count(*) FROM verdicts"), 0) << "the jobs were stopped before a verdict";

  // The "disk" now holds 48 KiB per file: the WAL fills after a dozen commits, and an upload of the
  // reference build (larger than that) cannot be stored at all.
  constexpr rlim_t kFileLimit = 48 << 10;
  ASSERT_GT(std::filesystem::file_size(QGATE_REF_LIBRARY), kFileLimit);
  ASSERT_LT(std::filesystem::file_size(d.dir() + "/qgated.log"), kFileLimit / 2) << "the log must stay writable";
  d.in_child = [] {
    signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG instead of killing qgated
    const rlimit limit{kFileLimit, kFileLimit};
    setrlimit(RLIMIT_FSIZE, &limit);
  };
  ASSERT_TRUE(d.try_start({}, "", &why)) << why;

  // The running job hits the limit: the daemon says so, and records no end for it.
  ASSERT_TRUE(wait_for_log(d, "the database refused to record it", 120s)) << d.log();
  const std::string log = d.log();
  EXPECT_NE(log.find("qgated could not write its database (disk full or read-only?)"), std::string::npos) << log;
  EXPECT_NE(log.find("is run again at the next start"), std::string::npos) << log;

  // It goes on serving reads, and refuses a new upload with a clear error instead of crashing.
  EXPECT_TRUE(alive(d.pid())) << d.log();
  auto jobs = d.cli("--json jobs");
  EXPECT_EQ(jobs.code, 0) << jobs.err;
  // The daemon answers a trend (its runs, or that none of the profile was ever stored).
  auto trend = d.cli("trend --profile cpu-tiny");
  EXPECT_TRUE(trend.code == 0 || trend.err.find("was ever stored") != std::string::npos) << trend.err;
  auto submit = d.cli("submit --build " + std::string(QGATE_REF_LIBRARY) + " " + kAbJob);
  EXPECT_NE(submit.code, 0);
  EXPECT_NE(submit.err.find("cannot store the upload: File too large"), std::string::npos) << submit.err;
  EXPECT_EQ(submit.err.find("cannot reach qgated"), std::string::npos) << "a full disk is not an unreachable daemon";
  EXPECT_TRUE(alive(d.pid())) << d.log();

  // No half verdict: nothing was recorded as finished while the disk was full.
  EXPECT_EQ(query_int(db_path, "SELECT count(*) FROM verdicts"), 0);
  EXPECT_EQ(query_int(db_path, "SELECT count(*) FROM jobs WHERE state = 'done'"), 0);
  EXPECT_EQ(query_int(db_path, "SELECT count(*) FROM jobs"), 2) << "the refused upload made no job";
  EXPECT_EQ(integrity(db_path), "ok");
  EXPECT_TRUE(d.terminate(20s)) << "a daemon on a full disk still stops on SIGTERM:\n" << d.log();

  // Room again: both jobs run to their verdicts.
  d.in_child = nullptr;
  ASSERT_TRUE(d.try_start({}, "", &why)) << why;
  for (int64_t job : {first, second}) {
    auto w = d.cli("watch " + std::to_string(job));
    EXPECT_TRUE(w.code == 0 || w.code == 1 || w.code == 2) << w.err << w.out;
    const json j = show(d, job);
    EXPECT_EQ(state_of(j), "JOB_STATE_DONE") << j.dump();
    EXPECT_EQ(j["verdict"]["pairs"].get<int>(), 4) << j.dump();
  }
  EXPECT_EQ(query_int(db_path, "SELECT count(*) FROM verdicts"), 2);
  EXPECT_EQ(integrity(db_path), "ok");
}

// A disk already full at start: the first write (queueing again what was running) fails, and
// qgated starts read-only instead of refusing to start: the history stays readable.
TEST(StorageFailure, OnADiskFullAtStartTheDaemonStartsReadOnly) {
  DaemonUnderTest d;
  std::string why;
  ASSERT_TRUE(d.try_start({}, "", &why)) << why;
  const std::string db_path = d.dir() + "/qgate.db";
  const int64_t job = submit_no_wait(d, kAbJob);
  d.kill9();  // its job left RUNNING or QUEUED: the next start must write
  // Every file stops at its size now: the write-ahead log (which a killed daemon leaves behind,
  // larger than its 32 KiB index) can take no more pages, and the log of this start fits.
  const auto wal_bytes = std::filesystem::file_size(db_path + "-wal");
  ASSERT_GT(wal_bytes, 33u << 10) << "the write-ahead log must be larger than its index";
  std::filesystem::resize_file(d.dir() + "/qgated.log", 0);
  d.in_child = [wal_bytes] {
    signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{rlim_t(wal_bytes), rlim_t(wal_bytes)};
    setrlimit(RLIMIT_FSIZE, &limit);
  };
  ASSERT_TRUE(d.try_start({}, "", &why)) << "qgated must start read-only on a full disk: " << why;
  EXPECT_NE(d.log().find("the disk is full or failing"), std::string::npos) << d.log();
  auto jobs = d.cli("--json jobs");
  EXPECT_EQ(jobs.code, 0) << jobs.err;
  EXPECT_NE(jobs.out.find("\"id\": " + std::to_string(job)), std::string::npos) << jobs.out;
  auto refused = d.cli("cancel " + std::to_string(job));
  EXPECT_NE(refused.code, 0);
  EXPECT_NE(refused.err.find("qgated is read-only"), std::string::npos) << refused.err;
  EXPECT_TRUE(d.terminate(20s)) << d.log();
  EXPECT_EQ(integrity(db_path), "ok");
}

TEST(StorageFailure, OnAReadOnlyDatabaseTheDaemonStartsReadOnlyServesReadsAndRefusesWrites) {
  DaemonUnderTest d;
  std::string why;
  ASSERT_TRUE(d.try_start({}, "", &why)) << why;
  const std::string db_path = d.dir() + "/qgate.db";
  const int64_t job = submit_no_wait(d, kAbJob);
  ASSERT_TRUE(d.terminate(20s)) << d.log();
  const int64_t jobs_before = query_int(db_path, "SELECT count(*) FROM jobs");
  ASSERT_EQ(jobs_before, 1);

  // Read-only for qgated. Root writes through any mode bits, so as root qgated runs as nobody, with
  // the data dir its own and the database file still root's (0644: readable, not writable).
  constexpr uid_t kNobody = 65534;
  const bool as_root = geteuid() == 0;
  if (as_root) {
    // nobody must be able to reach the binaries (a checkout under a private home cannot be run).
    const pid_t probe = fork();
    if (probe == 0) {
      if (setgroups(0, nullptr) != 0 || setgid(kNobody) != 0 || setuid(kNobody) != 0) _exit(2);
      _exit(access(QGATED_BINARY, X_OK) == 0 && access(QGATE_REF_LIBRARY, R_OK) == 0 ? 0 : 1);
    }
    int probe_status = 0;
    waitpid(probe, &probe_status, 0);
    if (!WIFEXITED(probe_status) || WEXITSTATUS(probe_status) != 0)
      GTEST_SKIP() << "running as root, and uid " << kNobody << " cannot run " << QGATED_BINARY
                   << ": no unprivileged user to make the database read-only for";
    for (const auto& entry : std::filesystem::directory_iterator(d.dir()))
      if (entry.path() != db_path) ASSERT_EQ(chown(entry.path().c_str(), kNobody, kNobody), 0) << entry.path();
    ASSERT_EQ(chown(d.dir().c_str(), kNobody, kNobody), 0);
    ASSERT_EQ(chmod(db_path.c_str(), 0644), 0);
    d.in_child = [] {
      if (setgroups(0, nullptr) != 0 || setgid(kNobody) != 0 || setuid(kNobody) != 0) _exit(126);
    };
  } else {
    ASSERT_EQ(chmod(db_path.c_str(), 0400), 0);
  }
  const auto mtime = std::filesystem::last_write_time(db_path);

  ASSERT_TRUE(d.try_start({}, "", &why)) << "qgated must start read-only: " << why;
  EXPECT_NE(d.log().find("is read-only for uid"), std::string::npos) << d.log();
  EXPECT_NE(d.log().find(db_path), std::string::npos) << d.log();
  EXPECT_NE(d.log().find("it starts read-only"), std::string::npos) << d.log();
  // Reads are served: the job is listed, still queued (nothing runs), and the trend answers.
  auto jobs = d.cli("--json jobs");
  EXPECT_EQ(jobs.code, 0) << jobs.err;
  EXPECT_NE(jobs.out.find("\"id\": " + std::to_string(job)), std::string::npos) << jobs.out;
  const CliResult trend = d.cli("trend --profile cpu-tiny");
  EXPECT_TRUE(trend.code == 0 || trend.err.find("was ever stored") != std::string::npos) << trend.err;
  std::this_thread::sleep_for(2s);
  EXPECT_EQ(state_of(show(d, job)), "JOB_STATE_QUEUED") << "a read-only daemon runs no job";
  // Writes are refused, each with the reason, and the CLI's exit code is not "unreachable".
  for (const std::string& write : {"submit --build " + std::string(QGATE_REF_LIBRARY) + " " + kAbJob,
                                   "cancel " + std::to_string(job)}) {
    auto refused = d.cli(write);
    EXPECT_NE(refused.code, 0) << write;
    EXPECT_NE(refused.err.find("qgated is read-only: the database " + db_path), std::string::npos)
        << write << ": " << refused.err;
    EXPECT_EQ(refused.err.find("cannot reach qgated"), std::string::npos) << refused.err;
  }
  EXPECT_TRUE(d.terminate(20s)) << d.log();
  EXPECT_EQ(d.log().find("AddressSanitizer"), std::string::npos) << d.log();
  EXPECT_EQ(std::filesystem::last_write_time(db_path), mtime) << "nothing was written";
  EXPECT_EQ(integrity(db_path), "ok");
  EXPECT_EQ(query_int(db_path, "SELECT count(*) FROM jobs"), 1) << "the refused submit made no job";

  // Writable again: the job is there and runs to its verdict.
  if (as_root) {
    ASSERT_EQ(chown(d.dir().c_str(), 0, 0), 0);
    for (const auto& entry : std::filesystem::directory_iterator(d.dir()))
      ASSERT_EQ(chown(entry.path().c_str(), 0, 0), 0) << entry.path();
    d.in_child = nullptr;
  }
  ASSERT_EQ(chmod(db_path.c_str(), 0600), 0);
  ASSERT_TRUE(d.try_start({}, "", &why)) << why;
  auto w = d.cli("watch " + std::to_string(job));
  EXPECT_TRUE(w.code == 0 || w.code == 1 || w.code == 2) << w.err << w.out;
  EXPECT_EQ(state_of(show(d, job)), "JOB_STATE_DONE");
}
