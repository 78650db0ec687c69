// The word lists of the gate's verdicts and comparisons (verdicts.h).
#include "qgate/common/verdicts.h"

#include "word_table.h"

namespace qgate {
namespace {

using detail::value_of;
using detail::word_of;

constexpr detail::WordTable<Verdict, 3> kVerdictWords{
    {{Verdict::Pass, "PASS"}, {Verdict::Fail, "FAIL"}, {Verdict::Inconclusive, "INCONCLUSIVE"}}};
constexpr detail::WordTable<Comparison, 3> kComparisonWords{
    {{Comparison::Same, "SAME"}, {Comparison::Different, "DIFFERENT"}, {Comparison::Unknown, "UNKNOWN"}}};

}  // namespace

std::string_view to_string(Verdict verdict) { return word_of(kVerdictWords, verdict); }
std::optional<Verdict> verdict_from_string(std::string_view text) { return value_of(kVerdictWords, text); }
std::string_view to_string(Comparison comparison) { return word_of(kComparisonWords, comparison); }
std::optional<Comparison> comparison_from_string(std::string_view text) { return value_of(kComparisonWords, text); }

}  // namespace qgate
