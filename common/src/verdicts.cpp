// The word lists of the gate's verdicts and comparisons (verdicts.h): one table each drives both
// directions, so the words and the values cannot drift apart.
#include "qgate/common/verdicts.h"

#include <array>
#include <utility>

namespace qgate {
namespace {

constexpr std::array<std::pair<Verdict, std::string_view>, 3> kVerdictWords{
    {{Verdict::Pass, "PASS"}, {Verdict::Fail, "FAIL"}, {Verdict::Inconclusive, "INCONCLUSIVE"}}};
constexpr std::array<std::pair<Comparison, std::string_view>, 3> kComparisonWords{
    {{Comparison::Same, "SAME"}, {Comparison::Different, "DIFFERENT"}, {Comparison::Unknown, "UNKNOWN"}}};

template <class Enum, std::size_t N>
std::string_view word_of(const std::array<std::pair<Enum, std::string_view>, N>& words, Enum value) {
  for (const auto& [v, word] : words) {
    if (v == value) return word;
  }
  return "?";  // only an out-of-range cast gets here
}

template <class Enum, std::size_t N>
std::optional<Enum> value_of(const std::array<std::pair<Enum, std::string_view>, N>& words, std::string_view text) {
  for (const auto& [v, word] : words) {
    if (word == text) return v;
  }
  return std::nullopt;
}

}  // namespace

std::string_view to_string(Verdict verdict) { return word_of(kVerdictWords, verdict); }
std::optional<Verdict> verdict_from_string(std::string_view text) { return value_of(kVerdictWords, text); }
std::string_view to_string(Comparison comparison) { return word_of(kComparisonWords, comparison); }
std::optional<Comparison> comparison_from_string(std::string_view text) { return value_of(kComparisonWords, text); }

}  // namespace qgate
