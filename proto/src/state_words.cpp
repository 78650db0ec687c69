// Job states and dispositions across the seam between the domain and the API (state_words.h).
#include "qgate/v1/state_words.h"

namespace qgate::words {

v1::JobState to_proto(JobState state) {
  switch (state) {
    case JobState::Queued: return v1::JOB_STATE_QUEUED;
    case JobState::Running: return v1::JOB_STATE_RUNNING;
    case JobState::Done: return v1::JOB_STATE_DONE;
    case JobState::Failed: return v1::JOB_STATE_FAILED;
    case JobState::Cancelled: return v1::JOB_STATE_CANCELLED;
    case JobState::Expired: return v1::JOB_STATE_EXPIRED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

std::optional<JobState> from_proto(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_QUEUED:
    case v1::JOB_STATE_WAITING_QUIET: return JobState::Queued;
    case v1::JOB_STATE_RUNNING: return JobState::Running;
    case v1::JOB_STATE_DONE: return JobState::Done;
    case v1::JOB_STATE_FAILED: return JobState::Failed;
    case v1::JOB_STATE_CANCELLED: return JobState::Cancelled;
    case v1::JOB_STATE_EXPIRED: return JobState::Expired;
    default: return std::nullopt;
  }
}

v1::Disposition to_proto(Disposition disposition) {
  switch (disposition) {
    case Disposition::Unspecified: return v1::DISPOSITION_UNSPECIFIED;
    case Disposition::Ok: return v1::DISPOSITION_OK;
    case Disposition::Crashed: return v1::DISPOSITION_CRASHED;
    case Disposition::Timeout: return v1::DISPOSITION_TIMEOUT;
    case Disposition::Incorrect: return v1::DISPOSITION_INCORRECT;
    case Disposition::Rejected: return v1::DISPOSITION_REJECTED;
    case Disposition::Error: return v1::DISPOSITION_ERROR;
    case Disposition::Leaked: return v1::DISPOSITION_LEAKED;
  }
  return v1::DISPOSITION_UNSPECIFIED;
}

Disposition from_proto(v1::Disposition disposition) {
  switch (disposition) {
    case v1::DISPOSITION_OK: return Disposition::Ok;
    case v1::DISPOSITION_CRASHED: return Disposition::Crashed;
    case v1::DISPOSITION_TIMEOUT: return Disposition::Timeout;
    case v1::DISPOSITION_INCORRECT: return Disposition::Incorrect;
    case v1::DISPOSITION_REJECTED: return Disposition::Rejected;
    case v1::DISPOSITION_ERROR: return Disposition::Error;
    case v1::DISPOSITION_LEAKED: return Disposition::Leaked;
    default: return Disposition::Unspecified;
  }
}

namespace {
constexpr std::string_view kWaitingQuiet = "waiting-quiet";
}  // namespace

std::string_view state_word(v1::JobState state) {
  if (state == v1::JOB_STATE_WAITING_QUIET) return kWaitingQuiet;
  const std::optional<JobState> domain = from_proto(state);
  return domain ? to_string(*domain) : "?";
}

std::optional<v1::JobState> job_state_from_word(std::string_view word) {
  if (word == kWaitingQuiet) return v1::JOB_STATE_WAITING_QUIET;
  if (const std::optional<JobState> domain = job_state_from_string(word)) return to_proto(*domain);
  return std::nullopt;
}

const std::vector<std::string>& job_state_words() {
  static const std::vector<std::string> words = [] {
    std::vector<std::string> out;
    for (v1::JobState state : {v1::JOB_STATE_QUEUED, v1::JOB_STATE_WAITING_QUIET, v1::JOB_STATE_RUNNING,
                               v1::JOB_STATE_DONE, v1::JOB_STATE_FAILED, v1::JOB_STATE_CANCELLED,
                               v1::JOB_STATE_EXPIRED}) {
      out.emplace_back(state_word(state));
    }
    return out;
  }();
  return words;
}

std::string_view disposition_word(v1::Disposition disposition) { return to_string(from_proto(disposition)); }

}  // namespace qgate::words
