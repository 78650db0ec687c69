// Text forms of the stored enumerations and the series fingerprint of a run.
#include "qgate/db/records.h"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "qgate/common/fnv1a.h"
#include "qgate/db/store_error.h"

namespace qgate::db {
namespace {

// One table per enum drives both directions, so to_string and from_string cannot drift apart.
template <class Enum, std::size_t N>
using NameTable = std::array<std::pair<Enum, std::string_view>, N>;

constexpr NameTable<JobState, 6> kJobStateNames{{{JobState::Queued, "queued"},
                                                 {JobState::Running, "running"},
                                                 {JobState::Done, "done"},
                                                 {JobState::Failed, "failed"},
                                                 {JobState::Cancelled, "cancelled"},
                                                 {JobState::Expired, "expired"}}};
constexpr NameTable<RunState, 4> kRunStateNames{{{RunState::Running, "running"},
                                                 {RunState::Done, "done"},
                                                 {RunState::Failed, "failed"},
                                                 {RunState::Interrupted, "interrupted"}}};
constexpr NameTable<Disposition, 8> kDispositionNames{{{Disposition::Unspecified, "unspecified"},
                                                      {Disposition::Ok, "ok"},
                                                      {Disposition::Crashed, "crashed"},
                                                      {Disposition::Timeout, "timeout"},
                                                      {Disposition::Incorrect, "incorrect"},
                                                      {Disposition::Rejected, "rejected"},
                                                      {Disposition::Error, "error"},
                                                      {Disposition::Leaked, "leaked"}}};

template <class Enum, std::size_t N>
std::string_view name_of(const NameTable<Enum, N>& table, Enum value) {
  for (const auto& [candidate, name] : table) {
    if (candidate == value) return name;
  }
  return "unknown";
}

template <class Enum, std::size_t N>
Enum value_of(const NameTable<Enum, N>& table, std::string_view text, std::string_view what) {
  for (const auto& [value, name] : table) {
    if (name == text) return value;
  }
  throw StoreError(StoreErrorKind::InvalidValue,
                   fmt::format("unknown {} '{}' in the database", what, text));
}

}  // namespace

std::string_view to_string(JobState state) { return name_of(kJobStateNames, state); }
JobState job_state_from_string(std::string_view text) {
  return value_of(kJobStateNames, text, "job state");
}
bool is_terminal(JobState state) {
  return state == JobState::Done || state == JobState::Failed || state == JobState::Cancelled ||
         state == JobState::Expired;
}

std::string_view to_string(RunState state) { return name_of(kRunStateNames, state); }
RunState run_state_from_string(std::string_view text) {
  return value_of(kRunStateNames, text, "run state");
}

// A stored word of a domain enum (verdicts, job settings), or StoreError(InvalidValue).
template <class Enum>
Enum stored_word(std::optional<Enum> value, std::string_view what, std::string_view text) {
  if (value) return *value;
  throw StoreError(StoreErrorKind::InvalidValue, fmt::format("unknown {} '{}' in the database", what, text));
}

qgate::Verdict stored_verdict(std::string_view text) { return stored_word(verdict_from_string(text), "verdict", text); }
Comparison stored_comparison(std::string_view text) {
  return stored_word(comparison_from_string(text), "comparison", text);
}

std::string_view to_string(Disposition disposition) {
  return name_of(kDispositionNames, disposition);
}
Disposition disposition_from_string(std::string_view text) {
  return value_of(kDispositionNames, text, "disposition");
}

RunOrder stored_run_order(std::string_view text) { return stored_word(run_order_from_string(text), "run order", text); }
TimingMode stored_timing_mode(std::string_view text) {
  return stored_word(timing_mode_from_string(text), "timing mode", text);
}
ShapeSet stored_shape_set(std::string_view text) {
  return stored_word(shape_set_from_string(text), "parity shape set", text);
}

std::string make_series_key(std::string_view build_name, const Run& run) {
  // Unit separator between fields so ("ab", "c") and ("a", "bc") differ. The field list is part of
  // the stored data's meaning: changing it splits every existing series.
  const std::string canonical = fmt::format(
      "v1\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}\x1f{}", build_name, run.path, run.profile,
      run.weight_type.value_or(""), run.gpu_name, run.gpu_uuid, run.driver_version,
      run.cuda_version, run.backend);
  // FNV-1a 64: fixed by its definition, so the key is the same on every platform and release, and
  // good enough to tell a few thousand series apart.
  return fmt::format("{:016x}", common::fnv1a64(canonical));
}

std::string build_label(std::string_view name, std::string_view sha256) {
  return fmt::format("{}@{}", name, sha256.substr(0, 8));
}

}  // namespace qgate::db
