// The one seam between where a job stands and how its build behaved in the domain
// (qgate/common/job_states.h, whose words these are) and the API's enums, with the words the CLI
// reads and prints. The API has one state the domain lacks: waiting-quiet, a queued job that waits
// for a quiet GPU.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qgate/common/job_states.h"
#include "qgate/v1/harness.pb.h"

namespace qgate::words {

v1::JobState to_proto(JobState state);
/// WAITING_QUIET is Queued; UNSPECIFIED (no state asked for) is none.
std::optional<JobState> from_proto(v1::JobState state);
v1::Disposition to_proto(Disposition disposition);
Disposition from_proto(v1::Disposition disposition);

/// A state's word: the domain's, or "waiting-quiet"; "?" for UNSPECIFIED.
std::string_view state_word(v1::JobState state);
/// The state a word names (a state_word); none for a word that names nothing.
std::optional<v1::JobState> job_state_from_word(std::string_view word);
/// Every state's word, in queue order: queued, waiting-quiet, running, done, failed, cancelled, expired.
const std::vector<std::string>& job_state_words();

/// A disposition's word ("ok", "crashed", ...), the domain's; "unspecified" before a job ends.
std::string_view disposition_word(v1::Disposition disposition);

}  // namespace qgate::words
