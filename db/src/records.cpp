// Text forms of the stored enumerations and the series fingerprint of a run.
#include "qgate/db/records.h"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "qgate/common/fnv1a.h"
#include "qgate/db/store_error.h"
#include "record_declarations.h"

namespace qgate::db {

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

JobState stored_job_state(std::string_view text) { return stored_word(job_state_from_string(text), "job state", text); }
RunState stored_run_state(std::string_view text) { return stored_word(run_state_from_string(text), "run state", text); }
Disposition stored_disposition(std::string_view text) {
  return stored_word(disposition_from_string(text), "disposition", text);
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
  // Fields that came later (settings, migration 0011) are appended when set, in their declared
  // order: a run without them keeps the key it always had.
  std::string keyed = canonical;
  for (const SeriesDimension& dimension : series_dimensions()) {
    if (dimension.key_part != SeriesKeyPart::appended_when_set) continue;
    const StoredValue value = dimension.column.store(run);
    std::string text;  // unset: '', 0 or NULL
    if (const auto* word = std::get_if<std::string>(&value)) text = *word;
    else if (const auto* number = std::get_if<std::int64_t>(&value); number && *number != 0) text = std::to_string(*number);
    else if (const auto* real = std::get_if<double>(&value); real && *real != 0) text = fmt::format("{}", *real);
    if (!text.empty()) keyed += "\x1f" + text;
  }
  // FNV-1a 64: fixed by its definition, so the key is the same on every platform and release, and
  // good enough to tell a few thousand series apart.
  return fmt::format("{:016x}", common::fnv1a64(keyed));
}

std::string build_label(std::string_view name, std::string_view sha256) {
  return fmt::format("{}@{}", name, sha256.substr(0, 8));
}

}  // namespace qgate::db
