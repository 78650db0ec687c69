// Twenty clients at once against two real qgated daemons on one PostgreSQL database (a fresh one on
// the tests' throwaway server; the CPU backend). Each client is a thread that runs the real qgate CLI:
// it submits a small job (a two-pair A/B job of cpu-tiny, a second or two) to one daemon, and reads while
// the jobs run (`jobs`, `device`, `show`, then `trend` and `watch`), all with --json, from both. No
// call may fail (every exit code 0, every document parses), every job ends done exactly once with
// one verdict, and no job is started by both daemons (docs/fleet.md).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon_under_test.h"
#include "process_run.h"
#include "test_postgres.h"

using namespace std::chrono_literals;
using namespace qgate::testing;

namespace {

constexpr int kClients = 20;

/// How many times `text` is in `log`.
int count_in(const std::string& log, const std::string& text) {
  int n = 0;
  for (auto at = log.find(text); at != std::string::npos; at = log.find(text, at + text.size())) ++n;
  return n;
}

/// What the clients found wrong, from every thread.
class Problems {
 public:
  void add(const std::string& what) {
    std::lock_guard lock(mu_);
    list_.push_back(what);
  }
  std::vector<std::string> list() const {
    std::lock_guard lock(mu_);
    return list_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> list_;
};

/// One CLI call against `daemon` that must exit 0 (or, with `exit_code`, any code, which it returns
/// there) and print a --json document with `key`; the document's `key`, or null after recording what
/// went wrong.
json call(const DaemonUnderTest& daemon, const std::string& args, const std::string& key, Problems& problems,
          int* exit_code = nullptr) {
  // A call that hangs is a failure too (timeout exits 124), not a test that never ends.
  const auto r = qgate::test_support::run_process("timeout 120 " + std::string(QGATE_CLI_BINARY),
                                                  "--server unix://" + daemon.socket_path() + " --json " + args);
  if (exit_code) *exit_code = r.exit_code;
  if (r.exit_code != 0 && !exit_code) {
    problems.add("qgate " + args + ": exit " + std::to_string(r.exit_code) + ": " + r.err);
    return nullptr;
  }
  const json doc = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains(key)) {
    problems.add("qgate " + args + ": not a --json document with '" + key + "': " + r.out);
    return nullptr;
  }
  return doc[key];
}

bool terminal(const std::string& state) {
  return state == "JOB_STATE_DONE" || state == "JOB_STATE_FAILED" || state == "JOB_STATE_CANCELLED" ||
         state == "JOB_STATE_EXPIRED";
}

TEST(FleetConcurrencyE2e, TwentyClientsOnTwoDaemonsSubmitAndReadWithoutAnErrorAndEveryJobRunsOnce) {
  auto& server = qgate::test_support::TestPostgres::for_process();
  if (!server.available()) GTEST_SKIP() << "no PostgreSQL server: " << server.why_unavailable();
  const auto database = server.fresh_database();
  const std::string store = database.store_address();

  DaemonUnderTest first, second;
  first.threads = "1";
  second.threads = "1";
  std::string why;
  ASSERT_TRUE(first.try_start({"--store", store}, "", &why)) << why;
  ASSERT_TRUE(second.try_start({"--store", store}, "", &why)) << why;
  const DaemonUnderTest* daemons[2] = {&first, &second};

  Problems problems;
  std::vector<int64_t> ids(kClients, 0);
  std::atomic<int> reads{0};
  std::vector<std::thread> clients;
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      const DaemonUnderTest& mine = *daemons[i % 2];
      const DaemonUnderTest& other = *daemons[(i + 1) % 2];
      const std::string job_args = "--kind ab --profile cpu-tiny --min-pairs 2 --max-pairs 2";
      const json submitted =
          call(mine, "submit --build " + std::string(QGATE_REF_LIBRARY) + " --name ref " + job_args, "submission",
               problems);
      if (submitted.is_null()) return;
      const int64_t id = submitted.value("job_id", int64_t(0));
      ids[i] = id;
      const std::string job = std::to_string(id);
      // Read from both daemons while the jobs run, until this client's job has ended.
      const auto limit = std::chrono::steady_clock::now() + 180s;
      for (int round = 0; std::chrono::steady_clock::now() < limit; ++round) {
        const DaemonUnderTest& reader = round % 2 == 0 ? mine : other;
        call(reader, "jobs --limit 30", "jobs", problems);
        call(reader, "device", "device", problems);
        const json shown = call(reader, "show " + job, "job", problems);
        reads += 3;
        if (shown.is_null() || terminal(shown.value("state", ""))) break;
        std::this_thread::sleep_for(500ms);
      }
      // watch exits with the verdict (0 pass, 1 fail, 2 inconclusive: a two-pair A/B on a busy CPU
      // may be any), which must be the one its document gives.
      int watch_code = -1;
      const json watched = call(other, "watch " + job, "job", problems, &watch_code);
      const std::string verdict = watched.is_null() ? "" : watched.value("verdict", json::object()).value("verdict", "");
      const int expected = verdict == "VERDICT_PASS" ? 0 : verdict == "VERDICT_FAIL" ? 1
                           : verdict == "VERDICT_INCONCLUSIVE" ? 2 : -2;
      if (watch_code != expected)
        problems.add("qgate watch " + job + ": exit " + std::to_string(watch_code) + " for verdict '" + verdict + "'");
      call(other, "trend --profile cpu-tiny", "points", problems);
      reads += 2;
    });
  }
  for (auto& client : clients) client.join();
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << kClients << " clients, " << reads.load() << " reads, " << took_s << " s\n";

  const std::vector<std::string> found = problems.list();
  EXPECT_TRUE(found.empty()) << found.size() << " calls failed; the first: " << found.front();
  // Every job ended done once, with one verdict, started by one daemon once, never run again.
  const std::string first_log = first.log(), second_log = second.log();
  std::set<int64_t> distinct;
  for (int i = 0; i < kClients; ++i) {
    const int64_t id = ids[i];
    ASSERT_NE(id, 0) << "client " << i << " submitted nothing";
    distinct.insert(id);
    const std::string job = std::to_string(id);
    EXPECT_EQ(database.query_value("SELECT state FROM jobs WHERE id = " + job), "done") << job;
    EXPECT_EQ(database.query_value("SELECT count(*) FROM verdicts WHERE job_id = " + job), "1") << job;
    EXPECT_EQ(database.query_value("SELECT attempts FROM jobs WHERE id = " + job), "0") << job;
    const std::string started_line = "job " + job + " started: ";
    EXPECT_EQ(count_in(first_log, started_line) + count_in(second_log, started_line), 1)
        << "job " << job << " started on " << count_in(first_log, started_line) << " and "
        << count_in(second_log, started_line) << " times";
  }
  EXPECT_EQ(distinct.size(), size_t(kClients));
  EXPECT_EQ(database.query_value("SELECT count(*) FROM jobs"), std::to_string(kClients));
  EXPECT_EQ(database.query_value("SELECT count(*) FROM runs WHERE state = 'running'"), "0");
  // Both daemons took part (each claims the oldest queued job when it is free).
  EXPECT_GT(count_in(first_log, " started: "), 0) << first_log;
  EXPECT_GT(count_in(second_log, " started: "), 0) << second_log;
}

}  // namespace
