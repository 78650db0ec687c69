// The short words of a job spec's enumerations, read by the CLI and printed everywhere: run order (abba,
// sequential), timing mode (gemm, pass), parity shape set (standard, quick, none), job kind, and a
// command job's toggle.
#pragma once

#include <optional>
#include <string_view>

#include "qgate/common/job_settings.h"
#include "qgate/v1/harness.pb.h"

namespace qgate::words {

/// The word for a value; UNSPECIFIED reads as the default it means (abba, gemm, standard).
std::string_view spec_word(v1::RunOrder order);
std::string_view spec_word(v1::TimingMode timing);
std::string_view spec_word(v1::ShapeSet shapes);
std::string_view spec_word(v1::JobKind kind);          // gate, ab, parity, command ("unknown")
std::string_view spec_word(v1::CommandToggle toggle);  // env, commands, builds

/// The one seam between a job's settings in the domain (qgate/common/job_settings.h, whose words these
/// are) and the API's enums. UNSPECIFIED reads as the default it means (abba, gemm); a shape set's
/// UNSPECIFIED is a value of its own.
v1::RunOrder to_proto(RunOrder order);
RunOrder from_proto(v1::RunOrder order);
v1::TimingMode to_proto(TimingMode timing);
TimingMode from_proto(v1::TimingMode timing);
v1::ShapeSet to_proto(ShapeSet shapes);
ShapeSet from_proto(v1::ShapeSet shapes);

/// The value a word names; none for a word that names nothing.
std::optional<v1::RunOrder> run_order_from_word(std::string_view word);
std::optional<v1::TimingMode> timing_mode_from_word(std::string_view word);
std::optional<v1::ShapeSet> shape_set_from_word(std::string_view word);
std::optional<v1::JobKind> job_kind_from_word(std::string_view word);

}  // namespace qgate::words
