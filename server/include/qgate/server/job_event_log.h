// Writes one log line per job event: subscribes to every job on the EventHub for its lifetime.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <spdlog/logger.h>

#include "qgate/server/event_hub.h"

namespace qgate::server {

class JobEventLog {
 public:
  /// Logs to `logger` (default: spdlog's default logger at the time of each event) at info.
  explicit JobEventLog(EventHub& events, std::shared_ptr<spdlog::logger> logger = nullptr);
  ~JobEventLog();
  JobEventLog(const JobEventLog&) = delete;
  JobEventLog& operator=(const JobEventLog&) = delete;

  /// "job 12 running, phase parity: case 3/64" (the verdict appended when the event carries one).
  static std::string describe(const v1::JobEvent& event);

 private:
  EventHub& events_;
  std::shared_ptr<spdlog::logger> logger_;
  int64_t token_ = 0;
};

}  // namespace qgate::server
