// qgated's log without a daemon: the --log-level names, one line per job event with its id, state,
// phase and message, the level filter, and the startup lines that are written at any level.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "qgate/server/daemon_log.h"
#include "qgate/server/event_hub.h"
#include "qgate/server/job_event_log.h"

namespace qgate::server {
namespace {

std::shared_ptr<spdlog::logger> logger_into(std::ostringstream& out, spdlog::level::level_enum level) {
  auto logger = std::make_shared<spdlog::logger>("qgated", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  logger->set_pattern(kLogPattern, spdlog::pattern_time_type::utc);
  logger->set_level(level);
  return logger;
}

v1::JobEvent event(int64_t job, v1::JobState state, const std::string& phase, const std::string& message) {
  v1::JobEvent e;
  e.set_job_id(job);
  e.set_state(state);
  e.mutable_progress()->set_phase(phase);
  e.set_message(message);
  return e;
}

TEST(DaemonLog, ParsesEveryLevelName) {
  EXPECT_EQ(parse_log_level("trace"), spdlog::level::trace);
  EXPECT_EQ(parse_log_level("debug"), spdlog::level::debug);
  EXPECT_EQ(parse_log_level("info"), spdlog::level::info);
  EXPECT_EQ(parse_log_level("warn"), spdlog::level::warn);
  EXPECT_EQ(parse_log_level("error"), spdlog::level::err);
  EXPECT_EQ(parse_log_level("off"), spdlog::level::off);
}

TEST(DaemonLog, UnknownLevelNamesTheAcceptedOnes) {
  try {
    parse_log_level("loud");
    FAIL() << "'loud' was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'loud'"), std::string::npos) << what;
    EXPECT_NE(what.find("trace, debug, info, warn, error, off"), std::string::npos) << what;
  }
  EXPECT_THROW(parse_log_level("INFO"), std::invalid_argument);
  EXPECT_THROW(parse_log_level(""), std::invalid_argument);
}

TEST(DaemonLog, OneTimestampedLinePerJobEventOfAnyJob) {
  std::ostringstream out;
  EventHub hub;
  JobEventLog log(hub, logger_into(out, spdlog::level::info));
  hub.publish(event(12, v1::JOB_STATE_RUNNING, "parity", "parity sweep started"));
  hub.publish(event(13, v1::JOB_STATE_QUEUED, "", ""));
  const std::string text = out.str();
  const std::regex line(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[info\] qgated: job 12 running, phase parity: )"
                        R"(parity sweep started\n)"
                        R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[info\] qgated: job 13 queued\n)");
  EXPECT_TRUE(std::regex_match(text, line)) << text;
}

TEST(DaemonLog, EventLineCarriesTheVerdict) {
  v1::JobEvent e = event(7, v1::JOB_STATE_DONE, "verdict", "");
  e.mutable_progress()->set_message("parity: 64 passed");
  e.mutable_verdict()->set_verdict(v1::VERDICT_FAIL);
  EXPECT_EQ(JobEventLog::describe(e), "job 7 done, phase verdict: parity: 64 passed (verdict FAIL)");
}

TEST(DaemonLog, LevelAboveInfoDropsJobEvents) {
  std::ostringstream out;
  EventHub hub;
  JobEventLog log(hub, logger_into(out, spdlog::level::warn));
  hub.publish(event(12, v1::JOB_STATE_RUNNING, "parity", "parity sweep started"));
  EXPECT_EQ(out.str(), "");
}

TEST(DaemonLog, UnsubscribesWhenDestroyed) {
  std::ostringstream out;
  EventHub hub;
  { JobEventLog log(hub, logger_into(out, spdlog::level::info)); }
  hub.publish(event(12, v1::JOB_STATE_RUNNING, "", ""));
  EXPECT_EQ(out.str(), "");
}

TEST(DaemonLog, StartupLinesAreWrittenAtAnyLevel) {
  std::ostringstream out;
  const auto before = spdlog::default_logger();
  spdlog::set_default_logger(logger_into(out, spdlog::level::off));
  log_always("ready");
  spdlog::info("not at level off");
  spdlog::set_default_logger(before);
  EXPECT_NE(out.str().find("[info] qgated: ready\n"), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("not at level off"), std::string::npos) << out.str();
}

TEST(DaemonLog, FileGetsTheSameLines) {
  char dir_template[] = "/tmp/qgated-log-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string file = dir + "/qgated.log";
  const auto before = spdlog::default_logger();
  install_daemon_log(spdlog::level::debug, file);
  spdlog::debug("a debug line");
  spdlog::trace("a trace line");
  spdlog::set_default_logger(before);
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("[debug] qgated: a debug line\n"), std::string::npos) << text.str();
  EXPECT_EQ(text.str().find("a trace line"), std::string::npos) << text.str();
  std::filesystem::remove_all(dir);
}

TEST(DaemonLog, JsonLinesStayValidWhateverTheMessageHolds) {
  char dir_template[] = "/tmp/qgated-log-XXXXXX";
  const std::string dir = mkdtemp(dir_template);
  const std::string file = dir + "/qgated.log";
  const auto before = spdlog::default_logger();
  install_daemon_log(spdlog::level::info, file, LogFormat::Json);
  const std::string hostile = "a \"quoted\" C:\\path,\ta tab,\na newline and a bell \x07";
  spdlog::info("{}", hostile);
  log_always("ready");
  spdlog::set_default_logger(before);
  std::ifstream in(file);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 2u) << "one line per message, the newline inside escaped";
  EXPECT_EQ(lines[0]["msg"], hostile);
  EXPECT_EQ(lines[0]["level"], "info");
  EXPECT_EQ(lines[0]["logger"], "qgated");
  EXPECT_TRUE(std::regex_match(lines[0]["time"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
  EXPECT_EQ(lines[1]["msg"], "ready");
  EXPECT_EQ(parse_log_format("text"), LogFormat::Text);
  EXPECT_THROW(parse_log_format("xml"), std::invalid_argument);
  std::filesystem::remove_all(dir);
}

TEST(DaemonLog, UnwritableFileIsAClearError) {
  try {
    install_daemon_log(spdlog::level::info, "/proc/no-such-dir/qgated.log");
    FAIL() << "opened a file under /proc";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open the log file /proc/no-such-dir/qgated.log"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace qgate::server
