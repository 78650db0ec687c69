// Argument helpers of the qgate CLI that hold rules rather than plumbing: where the server is,
// what --since means, which job kind a submit asks for. Pure functions, so the rules are tested
// without a parser or a server.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "qgate/v1/harness.pb.h"

namespace qgate::client {

/// A mistake in the command line; reported like a CLI11 error (one line, exit 3).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// --server if given, else $QGATE_SERVER if non-empty, else qgate::paths::default_server_address().
/// The environment value is passed in (not read here) so the precedence is testable.
std::string resolve_server_address(const std::optional<std::string>& flag,
                                   const char* env_value);

/// The gRPC target for what the user typed: "unix:///p", "unix:/p", "/p" or "host:port".
/// Throws UsageError on empty text.
std::string normalize_address(const std::string& address);

/// "30d" -> now_ms minus 30 days. Accepts <N><unit> with unit s, m, h, d or w and N a positive
/// integer; anything else (no unit, a fraction, a sign, spaces, overflow) throws UsageError.
std::int64_t parse_since(const std::string& text, std::int64_t now_ms);

/// The job kind a submit asks for, from --kind (empty when not given) and --baseline (empty when
/// not given): a baseline implies gate; gate needs a baseline; a baseline with ab or parity is a
/// contradiction. Throws UsageError on a contradiction or an unknown kind.
v1::JobKind resolve_kind(const std::string& kind, const std::string& baseline);

/// "queued" ... "cancelled" -> JobState; empty -> UNSPECIFIED (all). Throws UsageError otherwise.
v1::JobState parse_state(const std::string& text);

/// Build names are letters, digits, '.', '_' and '-' (never a path: the server stores by name).
/// Checked here too so the mistake is reported before a large upload. Throws UsageError.
void check_build_name(const std::string& name);

/// The candidate nearest to `word` by edit distance (insertions, deletions, substitutions, and swaps of
/// two neighbours), when it is at most 2 edits away and fewer than half the word's length: what a typo
/// (`--stat`, `--profle`) most likely meant. None when nothing is that close.
std::optional<std::string> nearest_word(const std::string& word, const std::vector<std::string>& candidates);

/// A command line split into words as a POSIX shell would split it, without running a shell:
/// blanks separate words; '...' quotes literally; "..." quotes with \" \\ \$ \` escapes; a backslash
/// outside quotes escapes the next character. No expansion of any kind. Throws UsageError on an
/// unclosed quote, a trailing backslash, or no words.
std::vector<std::string> split_command_line(const std::string& text);

/// An output reader from its word form: "llama-bench-json", "llama-bench-jsonl" (optionally
/// ":FIELD"), "json-pointer:/a/0/b", "regex:EXPR". Throws UsageError on anything else.
v1::OutputReader parse_output_reader(const std::string& text);

/// --gpu's value: one GPU ordinal ("1"), or with --split-gpus a pair ("0,1"). Throws UsageError on
/// anything but comma-separated non-negative integers, on more than two, or on a pair without a split.
std::vector<int> parse_gpu_choice(const std::string& text, bool split);

/// --gpu-model's value as typed, when the daemon would take it (qgate/common/gpu_routing.h: 1 to 64
/// characters with a letter or digit). Throws UsageError naming --gpu-model otherwise.
std::string check_gpu_model(const std::string& text);

/// --gpu-uuid's value as typed: 1 to 128 printable characters without blanks ("GPU-5a8e...",
/// "MIG-..."). Throws UsageError naming --gpu-uuid otherwise.
std::string check_gpu_uuid(const std::string& text);

/// Every --label given (repeatable, each may hold several comma-separated) as the labels a job
/// carries: each checked by the daemon's rule (gpu_routing.h), then sorted without repeats. Throws
/// UsageError naming --label on an empty or malformed label.
std::vector<std::string> parse_labels(const std::vector<std::string>& values);

/// Sets a job's fleet routing (JobSpec.gpu_model, gpu_uuid, labels) from --gpu-model, --gpu-uuid
/// and --label, each checked as above (a flag given with an empty value is a mistake, not "any");
/// flags not given leave their field empty: any daemon of the fleet may take the job.
void set_gpu_routing(v1::JobSpec* spec, const std::optional<std::string>& gpu_model,
                     const std::optional<std::string>& gpu_uuid, const std::vector<std::string>& labels);

/// "VAR=a|b" -> the env toggle's variable and values. Throws UsageError when malformed.
void parse_env_toggle(const std::string& text, v1::CommandSpec* command);

}  // namespace qgate::client
