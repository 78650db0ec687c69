// qgated's log (see daemon_log.h): the level names, the sinks and the startup lines.
#include "qgate/server/daemon_log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <stdexcept>
#include <string>
#include <vector>

namespace qgate::server {

spdlog::level::level_enum parse_log_level(std::string_view text) {
  if (text == "trace") return spdlog::level::trace;
  if (text == "debug") return spdlog::level::debug;
  if (text == "info") return spdlog::level::info;
  if (text == "warn") return spdlog::level::warn;
  if (text == "error") return spdlog::level::err;
  if (text == "off") return spdlog::level::off;
  // CLI11 puts the option's name in front: "--log-level: log level 'loud' is not one of ...".
  throw std::invalid_argument("log level '" + std::string(text) + "' is not one of " + std::string(kLogLevelNames));
}

LogFormat parse_log_format(std::string_view text) {
  if (text == "text") return LogFormat::Text;
  if (text == "json") return LogFormat::Json;
  throw std::invalid_argument("log format '" + std::string(text) + "' is not one of text, json");
}

namespace {

/// One JSON object a line: the time (UTC, milliseconds), the level, the logger and the message, written
/// by nlohmann::json, so a message holding quotes, backslashes or control characters stays one valid line.
class JsonLineFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const auto since_epoch = msg.time.time_since_epoch();
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
    const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - seconds).count();
    const std::time_t t = static_cast<std::time_t>(seconds.count());
    std::tm tm{};
    gmtime_r(&t, &tm);
    char stamp[32];
    std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(millis));
    // Invalid UTF-8 in a message is replaced, not thrown: a log line never fails.
    const nlohmann::ordered_json line = {{"time", stamp},
                                         {"level", std::string_view(spdlog::level::to_string_view(msg.level).data(),
                                                                    spdlog::level::to_string_view(msg.level).size())},
                                         {"logger", std::string_view(msg.logger_name.data(), msg.logger_name.size())},
                                         {"msg", std::string_view(msg.payload.data(), msg.payload.size())}};
    const std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JsonLineFormatter>(); }
};

}  // namespace

void install_daemon_log(spdlog::level::level_enum level, const std::string& file, LogFormat format) {
  std::vector<spdlog::sink_ptr> sinks{std::make_shared<spdlog::sinks::stderr_color_sink_mt>()};
  if (!file.empty()) {
    try {
      sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(file, /*truncate=*/false));
    } catch (const spdlog::spdlog_ex& e) {
      throw std::runtime_error("cannot open the log file " + file + ": " + e.what());
    }
  }
  auto logger = std::make_shared<spdlog::logger>("qgated", sinks.begin(), sinks.end());
  if (format == LogFormat::Json) logger->set_formatter(std::make_unique<JsonLineFormatter>());
  else logger->set_pattern(kLogPattern, spdlog::pattern_time_type::utc);
  logger->set_level(level);
  // Every line reaches the file at once: a test or an operator reads it while qgated runs, and a
  // crash loses nothing.
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(std::move(logger));
}

void log_always(std::string_view message) {
  const auto logger = spdlog::default_logger();
  const auto level = logger->level();
  if (level <= spdlog::level::info) {
    logger->info(message);
    return;
  }
  // A sink-sharing twin at info, so the line keeps the log's pattern and destinations.
  spdlog::logger always(logger->name(), logger->sinks().begin(), logger->sinks().end());
  always.set_level(spdlog::level::info);
  always.flush_on(spdlog::level::info);
  always.info(message);
}

}  // namespace qgate::server
