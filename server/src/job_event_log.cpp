// One log line per job event (see job_event_log.h).
#include "qgate/server/job_event_log.h"

#include <spdlog/spdlog.h>

#include <cctype>

namespace qgate::server {

namespace {

std::string lower_state(v1::JobState state) {
  std::string name = v1::JobState_Name(state);
  const std::string prefix = "JOB_STATE_";
  if (name.rfind(prefix, 0) == 0) name = name.substr(prefix.size());
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name.empty() ? "unknown" : name;
}

std::string verdict_word(v1::Verdict verdict) {
  std::string name = v1::Verdict_Name(verdict);
  const std::string prefix = "VERDICT_";
  return name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
}

}  // namespace

JobEventLog::JobEventLog(EventHub& events, std::shared_ptr<spdlog::logger> logger)
    : events_(events), logger_(std::move(logger)) {
  token_ = events_.subscribe_all([this](const v1::JobEvent& event) {
    const auto logger = logger_ ? logger_ : spdlog::default_logger();
    logger->info(describe(event));
  });
}

JobEventLog::~JobEventLog() { events_.unsubscribe(token_); }

std::string JobEventLog::describe(const v1::JobEvent& event) {
  std::string line = "job " + std::to_string(event.job_id()) + " " + lower_state(event.state());
  const std::string& phase = event.progress().phase();
  if (!phase.empty()) line += ", phase " + phase;
  const std::string& message = !event.message().empty() ? event.message() : event.progress().message();
  if (!message.empty()) line += ": " + message;
  if (event.has_verdict() && event.verdict().verdict() != v1::VERDICT_UNSPECIFIED)
    line += " (verdict " + verdict_word(event.verdict().verdict()) + ")";
  return line;
}

}  // namespace qgate::server
