// The word lists of job states, run states and dispositions (job_states.h).
#include "qgate/common/job_states.h"

#include "word_table.h"

namespace qgate {
namespace {

using detail::value_of;
using detail::word_of;

constexpr detail::WordTable<JobState, 6> kJobStateWords{{{JobState::Queued, "queued"},
                                                         {JobState::Running, "running"},
                                                         {JobState::Done, "done"},
                                                         {JobState::Failed, "failed"},
                                                         {JobState::Cancelled, "cancelled"},
                                                         {JobState::Expired, "expired"}}};
constexpr detail::WordTable<RunState, 4> kRunStateWords{{{RunState::Running, "running"},
                                                         {RunState::Done, "done"},
                                                         {RunState::Failed, "failed"},
                                                         {RunState::Interrupted, "interrupted"}}};
constexpr detail::WordTable<Disposition, 8> kDispositionWords{{{Disposition::Unspecified, "unspecified"},
                                                               {Disposition::Ok, "ok"},
                                                               {Disposition::Crashed, "crashed"},
                                                               {Disposition::Timeout, "timeout"},
                                                               {Disposition::Incorrect, "incorrect"},
                                                               {Disposition::Rejected, "rejected"},
                                                               {Disposition::Error, "error"},
                                                               {Disposition::Leaked, "leaked"}}};

}  // namespace

std::string_view to_string(JobState state) { return word_of(kJobStateWords, state); }
std::optional<JobState> job_state_from_string(std::string_view text) { return value_of(kJobStateWords, text); }
bool is_terminal(JobState state) {
  return state == JobState::Done || state == JobState::Failed || state == JobState::Cancelled ||
         state == JobState::Expired;
}

std::string_view to_string(RunState state) { return word_of(kRunStateWords, state); }
std::optional<RunState> run_state_from_string(std::string_view text) { return value_of(kRunStateWords, text); }

std::string_view to_string(Disposition disposition) { return word_of(kDispositionWords, disposition); }
std::optional<Disposition> disposition_from_string(std::string_view text) {
  return value_of(kDispositionWords, text);
}

}  // namespace qgate
