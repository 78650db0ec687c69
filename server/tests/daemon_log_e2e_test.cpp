// qgated's log end to end: a real daemon's stderr carries timestamped, levelled lines, one per job
// event at info; --log-level filters them; --log-file gets them too; a bad level stops qgated at once.
#include <sys/wait.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "daemon_under_test.h"

namespace qgate::testing {
namespace {

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

int64_t run_quick_parity_job(DaemonUnderTest& d) {
  const int64_t job = submit_no_wait(d, "--name ref --kind parity --parity-shapes quick");
  auto r = d.cli("watch " + std::to_string(job));
  EXPECT_EQ(r.code, 0) << r.err;
  return job;
}

TEST(DaemonLogE2e, EveryJobEventIsAnInfoLine) {
  DaemonUnderTest d;
  std::string why;
  const std::string file = d.dir() + "/also.log";
  ASSERT_TRUE(d.try_start({"--log-file", file}, "", &why)) << why;
  const int64_t job = run_quick_parity_job(d);
  const std::string log = d.log();
  const std::string prefix = "qgated: job " + std::to_string(job) + " ";
  EXPECT_TRUE(std::regex_search(log, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[info\] )" + prefix +
                                                "running")))
      << log;
  EXPECT_NE(log.find("[info] " + prefix + "done"), std::string::npos) << log;
  EXPECT_GE(count_of(log, prefix), 3) << log;
  EXPECT_NE(log.find("[info] qgated: ready"), std::string::npos) << log;
  // The file holds the same lines as stderr.
  const std::string copy = slurp(file);
  EXPECT_EQ(count_of(copy, prefix), count_of(log, prefix)) << copy;
}

TEST(DaemonLogE2e, WarnHidesJobEventsButNotTheReadyLine) {
  DaemonUnderTest d;
  std::string why;
  ASSERT_TRUE(d.try_start({"--log-level", "warn"}, "", &why)) << why;
  const int64_t job = run_quick_parity_job(d);
  const std::string log = d.log();
  EXPECT_EQ(log.find("qgated: job " + std::to_string(job) + " "), std::string::npos) << log;
  EXPECT_NE(log.find("qgated: ready"), std::string::npos) << log;
  EXPECT_NE(log.find("qgated: listening on unix://"), std::string::npos) << log;
}

TEST(DaemonLogE2e, DebugShowsWhatInfoLeavesOut) {
  DaemonUnderTest info, debug;
  std::string why;
  ASSERT_TRUE(info.try_start({}, "", &why)) << why;
  ASSERT_TRUE(debug.try_start({"--log-level", "debug"}, "", &why)) << why;
  EXPECT_EQ(info.log().find("[debug]"), std::string::npos) << info.log();
  EXPECT_NE(debug.log().find("[debug] qgated: co-tenant sampler: "), std::string::npos) << debug.log();
}

TEST(DaemonLogE2e, UnknownLevelIsAClearErrorAndANonzeroExit) {
  DaemonUnderTest d;
  const std::string err = d.dir() + "/err.txt";
  const std::string cmd = std::string(QGATED_BINARY) + " --backend cpu --data-dir " + d.dir() +
                          " --log-level loud 2>" + err + " </dev/null";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0);
  const std::string text = slurp(err);
  EXPECT_NE(text.find("--log-level"), std::string::npos) << text;
  EXPECT_NE(text.find("trace, debug, info, warn, error, off"), std::string::npos) << text;
  EXPECT_NE(text.find("'loud'"), std::string::npos) << text;
  EXPECT_FALSE(std::filesystem::exists(d.dir() + "/qgated.sock")) << "qgated started listening";
}

TEST(DaemonLogE2e, JsonFormatWritesOneValidObjectALine) {
  DaemonUnderTest d;
  std::string why;
  ASSERT_TRUE(d.try_start({"--log-format", "json"}, "", &why)) << why;
  const int64_t job = run_quick_parity_job(d);
  const std::string log = d.log();
  int objects = 0, job_lines = 0;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;  // the test's own "--- start" marker
    const json object = json::parse(line);  // throws, failing the test, on a line that is not JSON
    ++objects;
    EXPECT_TRUE(std::regex_match(object.at("time").get<std::string>(),
                                 std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")))
        << line;
    EXPECT_EQ(object.at("logger"), "qgated") << line;
    EXPECT_FALSE(object.at("level").get<std::string>().empty()) << line;
    if (object.at("msg").get<std::string>().rfind("job " + std::to_string(job) + " ", 0) == 0) ++job_lines;
  }
  EXPECT_GE(objects, 3) << log;
  EXPECT_GE(job_lines, 3) << log;
  EXPECT_NE(log.find("\"msg\":\"ready\""), std::string::npos) << log;
}

TEST(DaemonLogE2e, FlagsComeFromATomlConfigAndTheCommandLineWins) {
  DaemonUnderTest d;
  const std::string config = d.dir() + "/qgated.toml";
  std::ofstream(config) << "# qgated's flags, each under its own name\n"
                        << "log-level = \"debug\"\n"
                        << "max-queued-jobs = 7\n"
                        << "log-format = \"json\"\n";
  std::string why;
  ASSERT_TRUE(d.try_start({"--config", config, "--log-format", "text"}, "", &why)) << why;
  const std::string log = d.log();
  EXPECT_NE(log.find("[debug] qgated: "), std::string::npos) << "log-level came from the file: " << log;
  EXPECT_EQ(log.find("\"msg\":"), std::string::npos) << "--log-format on the command line wins: " << log;

  // The example config that ships with the systemd unit is one qgated reads (its paths and backend
  // overridden here on the command line).
  DaemonUnderTest shipped;
  ASSERT_TRUE(shipped.try_start({"--config", std::string(QGATE_SOURCE_DIR) + "/packaging/qgated.toml",
                                 "--worker-cgroup", "auto"},
                                "", &why))
      << why;
  EXPECT_NE(shipped.log().find("\"msg\":\"ready\""), std::string::npos) << "log-format json came from it";

  // A key that names no flag stops qgated before it listens, naming the key.
  DaemonUnderTest bad;
  const std::string typo = bad.dir() + "/typo.toml";
  std::ofstream(typo) << "max-queued-job = 7\n";
  const std::string err = bad.dir() + "/err.txt";
  const int status = std::system((std::string(QGATED_BINARY) + " --backend cpu --data-dir " + bad.dir() +
                                  " --config " + typo + " 2>" + err + " </dev/null")
                                     .c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_NE(WEXITSTATUS(status), 0);
  EXPECT_NE(slurp(err).find("max-queued-job"), std::string::npos) << slurp(err);
  EXPECT_FALSE(std::filesystem::exists(bad.dir() + "/qgated.sock")) << "qgated started listening";
}

// `qgated --version` exits 0 with the version, the commit and the database schema it writes.
TEST(DaemonLogE2e, VersionNamesTheCommitAndTheDatabaseSchema) {
  DaemonUnderTest d;
  const std::string out = d.dir() + "/version.txt";
  const int status = std::system((std::string(QGATED_BINARY) + " --version >" + out + " 2>&1").c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << slurp(out);
  const std::string text = slurp(out);
  EXPECT_EQ(text.rfind("qgated ", 0), 0u) << text;
  EXPECT_NE(text.find("), database schema "), std::string::npos) << text;
}

}  // namespace
}  // namespace qgate::testing
