// qgated's log: spdlog lines with a UTC timestamp and a level on stderr (as text, or as one JSON
// object a line), and optionally appended to a file. Installed as spdlog's default logger, so any part of the daemon logs with spdlog::info().
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <spdlog/common.h>
#include <spdlog/logger.h>

namespace qgate::server {

/// The levels --log-level takes, in the order they are listed to the user.
inline constexpr const char* kLogLevelNames = "trace, debug, info, warn, error, off";

/// "trace", "debug", "info", "warn", "error" or "off"; throws std::invalid_argument naming the
/// accepted values for anything else.
spdlog::level::level_enum parse_log_level(std::string_view text);

/// Every line reads "2026-12-01T01:02:03.456Z [info] qgated: <message>".
inline constexpr const char* kLogPattern = "%Y-%m-%dT%H:%M:%S.%eZ [%l] %n: %v";

/// How a line is written: Text is kLogPattern; Json is one object a line,
/// {"time":"2026-12-01T01:02:03.456Z","level":"info","logger":"qgated","msg":"..."}, for log shippers.
enum class LogFormat { Text, Json };
/// "text" or "json"; throws std::invalid_argument naming the accepted values for anything else.
LogFormat parse_log_format(std::string_view text);

/// Makes qgated's logger (stderr, plus `file` appended to unless empty) the default one, at `level`,
/// writing `format`. Throws std::runtime_error when the file cannot be opened.
void install_daemon_log(spdlog::level::level_enum level, const std::string& file, LogFormat format = LogFormat::Text);

/// Writes `message` at info whatever the level: the startup lines ("listening on", "ready") that
/// scripts and tests wait for. Goes to the default logger's sinks.
void log_always(std::string_view message);

}  // namespace qgate::server
