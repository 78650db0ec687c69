// The word lists of a job's settings (job_settings.h).
#include "qgate/common/job_settings.h"

#include "word_table.h"

namespace qgate {
namespace {

using detail::value_of;
using detail::word_of;

constexpr detail::WordTable<RunOrder, 2> kRunOrderWords{{{RunOrder::Abba, "abba"}, {RunOrder::Sequential, "sequential"}}};
constexpr detail::WordTable<TimingMode, 2> kTimingWords{{{TimingMode::Gemm, "gemm"}, {TimingMode::Pass, "pass"}}};
constexpr detail::WordTable<ShapeSet, 4> kShapeSetWords{{{ShapeSet::Unspecified, "unspecified"},
                                                         {ShapeSet::Standard, "standard"},
                                                         {ShapeSet::Quick, "quick"},
                                                         {ShapeSet::None, "none"}}};

}  // namespace

std::string_view to_string(RunOrder order) { return word_of(kRunOrderWords, order); }
std::optional<RunOrder> run_order_from_string(std::string_view text) { return value_of(kRunOrderWords, text); }
std::string_view to_string(TimingMode timing) { return word_of(kTimingWords, timing); }
std::optional<TimingMode> timing_mode_from_string(std::string_view text) { return value_of(kTimingWords, text); }
std::string_view to_string(ShapeSet shapes) { return word_of(kShapeSetWords, shapes); }
std::optional<ShapeSet> shape_set_from_string(std::string_view text) { return value_of(kShapeSetWords, text); }

const std::vector<std::string>& run_order_words() {
  static const std::vector<std::string> words{std::string(to_string(RunOrder::Abba)),
                                              std::string(to_string(RunOrder::Sequential))};
  return words;
}
const std::vector<std::string>& timing_mode_words() {
  static const std::vector<std::string> words{std::string(to_string(TimingMode::Gemm)),
                                              std::string(to_string(TimingMode::Pass))};
  return words;
}
const std::vector<std::string>& shape_set_words() {
  static const std::vector<std::string> words{std::string(to_string(ShapeSet::Standard)),
                                              std::string(to_string(ShapeSet::Quick)),
                                              std::string(to_string(ShapeSet::None))};
  return words;
}

}  // namespace qgate
