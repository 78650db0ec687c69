// One log line per job event (see job_event_log.h).
#include "qgate/server/job_event_log.h"

#include <spdlog/spdlog.h>

#include "qgate/v1/state_words.h"
#include "qgate/v1/verdict_words.h"

namespace qgate::server {

JobEventLog::JobEventLog(EventHub& events, std::shared_ptr<spdlog::logger> logger)
    : events_(events), logger_(std::move(logger)) {
  token_ = events_.subscribe_all([this](const v1::JobEvent& event) {
    const auto logger = logger_ ? logger_ : spdlog::default_logger();
    logger->info(describe(event));
  });
}

JobEventLog::~JobEventLog() { events_.unsubscribe(token_); }

std::string JobEventLog::describe(const v1::JobEvent& event) {
  std::string line = "job " + std::to_string(event.job_id()) + " " + std::string(words::state_word(event.state()));
  const std::string& phase = event.progress().phase();
  if (!phase.empty()) line += ", phase " + phase;
  const std::string& message = !event.message().empty() ? event.message() : event.progress().message();
  if (!message.empty()) line += ": " + message;
  if (event.has_verdict() && event.verdict().verdict() != v1::VERDICT_UNSPECIFIED)
    line += " (verdict " + std::string(words::verdict_word(event.verdict().verdict())) + ")";
  return line;
}

}  // namespace qgate::server
