// The gate's two answers as domain enums, each with its one word list: a Verdict (PASS, FAIL,
// INCONCLUSIVE) and a Comparison (SAME, DIFFERENT, UNKNOWN). The statistics produce them, the store
// keeps their words, and each process converts them to the proto enums at one seam.
#pragma once

#include <optional>
#include <string_view>

namespace qgate {

/// The gate's verdict on a candidate against its baseline (docs/measurement.md).
enum class Verdict { Pass, Fail, Inconclusive };
std::string_view to_string(Verdict verdict);  // "PASS", "FAIL", "INCONCLUSIVE"
std::optional<Verdict> verdict_from_string(std::string_view text);

/// Did A and B perform differently? (docs/ab-statistics.md)
enum class Comparison { Same, Different, Unknown };
std::string_view to_string(Comparison comparison);  // "SAME", "DIFFERENT", "UNKNOWN"
std::optional<Comparison> comparison_from_string(std::string_view text);

}  // namespace qgate
