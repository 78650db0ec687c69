// qgated's log (see daemon_log.h): the level names, the sinks and the startup lines.
#include "qgate/server/daemon_log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <stdexcept>
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

void install_daemon_log(spdlog::level::level_enum level, const std::string& file) {
  std::vector<spdlog::sink_ptr> sinks{std::make_shared<spdlog::sinks::stderr_color_sink_mt>()};
  if (!file.empty()) {
    try {
      sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_mt>(file, /*truncate=*/false));
    } catch (const spdlog::spdlog_ex& e) {
      throw std::runtime_error("cannot open the log file " + file + ": " + e.what());
    }
  }
  auto logger = std::make_shared<spdlog::logger>("qgated", sinks.begin(), sinks.end());
  logger->set_pattern(kLogPattern, spdlog::pattern_time_type::utc);
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
