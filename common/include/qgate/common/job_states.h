// Where a job and a run stand, and how a job's build behaved, as domain enums, each with its one
// word list: the store keeps these words, the CLI reads and prints them, and each process converts
// them to the API's enums at one seam (qgate/v1/spec_words.h).
#pragma once

#include <optional>
#include <string_view>

namespace qgate {

/// A job's place in the queue. The API's "waiting-quiet" is a Queued job that waits for a quiet GPU.
enum class JobState { Queued, Running, Done, Failed, Cancelled, Expired };
std::string_view to_string(JobState state);  // "queued", "running", "done", "failed", "cancelled", "expired"
std::optional<JobState> job_state_from_string(std::string_view text);
/// Done, Failed, Cancelled and Expired: a job in one of them never runs again.
bool is_terminal(JobState state);

/// One timed run of a job.
enum class RunState { Running, Done, Failed, Interrupted };
std::string_view to_string(RunState state);  // "running", "done", "failed", "interrupted"
std::optional<RunState> run_state_from_string(std::string_view text);

/// How a job's build behaved: every ended job has one; Unspecified until then.
enum class Disposition { Unspecified, Ok, Crashed, Timeout, Incorrect, Rejected, Error, Leaked };
std::string_view to_string(Disposition disposition);  // "unspecified", "ok", "crashed", ... "leaked"
std::optional<Disposition> disposition_from_string(std::string_view text);

}  // namespace qgate
