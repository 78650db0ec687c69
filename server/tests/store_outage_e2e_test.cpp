// A cut to the database under a real qgated (a private PostgreSQL server of the test's own, stopped
// and started again; the CPU backend): the daemon says once that the store is unreachable and stops
// claiming, /healthz answers 503 naming the store and /metrics says qgate_store_reachable 0; once the
// server is back it says so once, claims again and /healthz answers 200. The job it was running when
// the store went goes back to the queue (no attempt counted, no run left running) and runs to one
// verdict, and a job submitted after the cut runs too (docs/fleet.md, "When the database is
// unreachable").
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>

#include "daemon_under_test.h"
#include "test_postgres.h"

using namespace std::chrono_literals;
using namespace qgate::testing;
using qgate::test_support::TestPostgres;

namespace {

/// The HTTP status and body of one GET on 127.0.0.1:`port` (status 0 when nothing answered).
struct HttpAnswer {
  int status = 0;
  std::string body;
};

HttpAnswer http_get(int port, const std::string& target) {
  HttpAnswer answer;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return answer;
  }
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string request = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  (void)!send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) text.append(buf, static_cast<size_t>(n));
  close(fd);
  if (text.rfind("HTTP/1.1 ", 0) == 0) answer.status = std::stoi(text.substr(9, 3));
  if (const auto body = text.find("\r\n\r\n"); body != std::string::npos) answer.body = text.substr(body + 4);
  return answer;
}

/// How many times `text` is in the log.
int count_in(const std::string& log, const std::string& text) {
  int n = 0;
  for (auto at = log.find(text); at != std::string::npos; at = log.find(text, at + text.size())) ++n;
  return n;
}

/// Waits up to `limit` for `ready`; whether it came.
template <typename Ready>
bool wait_until(std::chrono::seconds limit, Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ready()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return ready();
}

const char* const kUnreachable = "the store postgresql is unreachable";
const char* const kAnswersAgain = "the store postgresql answers again";

TEST(StoreOutageE2e, TheDaemonSaysOnceThatTheStoreIsOutWaitsAndResumesWithNothingLost) {
  // A private server: the test stops and starts it (the shared one serves other tests meanwhile).
  std::unique_ptr<TestPostgres> server = TestPostgres::start_private();
  if (!server->available()) GTEST_SKIP() << "no PostgreSQL server: " << server->why_unavailable();
  const auto database = server->fresh_database();

  DaemonUnderTest d;
  d.threads = "1";
  std::string why;
  // A lease longer than the cut: the cut-off job comes back through the daemon itself, not through
  // its lease running out (which counts a daemon's death).
  // /healthz and /metrics need no dashboard; its files are one empty page here.
  const std::string site = d.dir() + "/site";
  std::filesystem::create_directories(site);
  std::ofstream(site + "/index.html") << "<!doctype html>\n";
  ASSERT_TRUE(d.try_start({"--store", database.store_address(), "--lease-s", "30", "--http", "127.0.0.1:0",
                           "--http-root", site},
                          "", &why))
      << why;
  std::smatch port_match;
  const std::string started_log = d.log();
  ASSERT_TRUE(std::regex_search(started_log, port_match, std::regex(R"(dashboard on https?://[^ ]*:([0-9]+)/)")))
      << started_log;
  const int http_port = std::stoi(port_match[1].str());
  ASSERT_TRUE(wait_until(10s, [&] { return http_get(http_port, "/healthz").status == 200; }))
      << http_get(http_port, "/healthz").body;

  // A job under way when the database goes: claimed, and one of its runs finished.
  const int64_t cut_off = submit_no_wait(d, "--name ref --kind ab --profile cpu-tiny --min-pairs 8 --max-pairs 8");
  const std::string cut_id = std::to_string(cut_off);
  ASSERT_TRUE(wait_until(120s, [&] {
    return database.query_value("SELECT count(*) FROM runs WHERE state = 'done' AND job_id = " + cut_id) != "0" &&
           database.query_value("SELECT state FROM jobs WHERE id = " + cut_id) == "running";
  })) << d.log();

  server->stop(TestPostgres::StopMode::kFast);
  // Six seconds out: the daemon says it once, and the failed claims, renewals and the job's writes
  // that follow are quiet.
  ASSERT_TRUE(wait_until(10s, [&] { return d.log().find(kUnreachable) != std::string::npos; })) << d.log();
  std::this_thread::sleep_for(6s);
  const std::string out_log = d.log();
  EXPECT_EQ(count_in(out_log, kUnreachable), 1) << out_log;
  EXPECT_NE(out_log.find("not claiming jobs until it answers"), std::string::npos) << out_log;
  EXPECT_EQ(count_in(out_log, "cannot claim a job"), 0) << out_log;
  EXPECT_EQ(count_in(out_log, "cannot renew the leases"), 0) << out_log;
  EXPECT_EQ(count_in(out_log, "cannot read its end state"), 0) << out_log;
  const HttpAnswer out_health = http_get(http_port, "/healthz");
  EXPECT_EQ(out_health.status, 503) << out_health.body;
  EXPECT_NE(out_health.body.find(kUnreachable), std::string::npos) << out_health.body;
  const HttpAnswer out_metrics = http_get(http_port, "/metrics");
  EXPECT_EQ(out_metrics.status, 200) << out_metrics.body;
  EXPECT_NE(out_metrics.body.find("\nqgate_store_reachable 0\n"), std::string::npos) << out_metrics.body;
  // The job it was running stopped with the store; it is not ended (nothing could record it).
  EXPECT_NE(out_log.find("job " + cut_id + " stopped: the store was lost while it ran"), std::string::npos)
      << out_log;

  server->start();
  ASSERT_TRUE(wait_until(20s, [&] { return d.log().find(kAnswersAgain) != std::string::npos; })) << d.log();
  EXPECT_TRUE(wait_until(10s, [&] { return http_get(http_port, "/healthz").status == 200; }))
      << http_get(http_port, "/healthz").body;
  EXPECT_NE(http_get(http_port, "/metrics").body.find("\nqgate_store_reachable 1\n"), std::string::npos);

  // The cut-off job went back to the queue (no daemon died: no attempt counted) and ran to its end,
  // and a job submitted after the cut runs too.
  const int64_t after = submit_no_wait(d, "--name ref --kind ab --profile cpu-tiny --min-pairs 3 --max-pairs 3");
  for (const int64_t job : {cut_off, after}) {
    const std::string id = std::to_string(job);
    std::string state;
    wait_until(240s, [&] {
      state = database.query_value("SELECT state FROM jobs WHERE id = " + id);
      return state == "done" || state == "failed" || state == "cancelled";
    });
    EXPECT_EQ(state, "done") << "job " << id << "\n" << d.log();
    EXPECT_EQ(database.query_value("SELECT count(*) FROM verdicts WHERE job_id = " + id), "1");
  }
  EXPECT_EQ(database.query_value("SELECT attempts FROM jobs WHERE id = " + cut_id), "0");
  EXPECT_EQ(database.query_value("SELECT count(*) FROM runs WHERE state = 'running'"), "0");

  const std::string end_log = d.log();
  EXPECT_NE(end_log.find("job " + cut_id + ": the store was lost while it ran; queued again"), std::string::npos)
      << end_log;
  EXPECT_EQ(count_in(end_log, kUnreachable), 1) << end_log;
  EXPECT_EQ(count_in(end_log, kAnswersAgain), 1) << end_log;
  EXPECT_EQ(http_get(http_port, "/healthz").status, 200);
}

}  // namespace
