// The words of the spec enumerations, both ways, from one table per enum.
#include "qgate/v1/spec_words.h"

#include <array>
#include <utility>

namespace qgate::words {
namespace {

template <class Enum, std::size_t N>
using WordTable = std::array<std::pair<Enum, std::string_view>, N>;

constexpr WordTable<v1::RunOrder, 2> kOrderWords{{{v1::RUN_ORDER_ABBA, "abba"},
                                                  {v1::RUN_ORDER_SEQUENTIAL, "sequential"}}};
constexpr WordTable<v1::TimingMode, 2> kTimingWords{{{v1::TIMING_MODE_GEMM, "gemm"},
                                                     {v1::TIMING_MODE_PASS, "pass"}}};
constexpr WordTable<v1::ShapeSet, 3> kShapeWords{{{v1::SHAPE_SET_STANDARD, "standard"},
                                                  {v1::SHAPE_SET_QUICK, "quick"},
                                                  {v1::SHAPE_SET_NONE, "none"}}};
constexpr WordTable<v1::JobKind, 5> kKindWords{{{v1::JOB_KIND_UNSPECIFIED, "unknown"},
                                                {v1::JOB_KIND_GATE, "gate"},
                                                {v1::JOB_KIND_AB, "ab"},
                                                {v1::JOB_KIND_PARITY, "parity"},
                                                {v1::JOB_KIND_COMMAND, "command"}}};
constexpr WordTable<v1::CommandToggle, 3> kToggleWords{{{v1::COMMAND_TOGGLE_ENV, "env"},
                                                        {v1::COMMAND_TOGGLE_COMMANDS, "commands"},
                                                        {v1::COMMAND_TOGGLE_BUILDS, "builds"}}};

template <class Enum, std::size_t N>
std::string_view word_of(const WordTable<Enum, N>& table, Enum value, Enum fallback) {
  for (const auto& [candidate, word] : table)
    if (candidate == value) return word;
  for (const auto& [candidate, word] : table)
    if (candidate == fallback) return word;
  return "?";
}

template <class Enum, std::size_t N>
std::optional<Enum> value_of(const WordTable<Enum, N>& table, std::string_view word) {
  for (const auto& [value, candidate] : table)
    if (candidate == word) return value;
  return std::nullopt;
}

}  // namespace

std::string_view spec_word(v1::RunOrder order) { return word_of(kOrderWords, order, v1::RUN_ORDER_ABBA); }
std::string_view spec_word(v1::TimingMode timing) { return word_of(kTimingWords, timing, v1::TIMING_MODE_GEMM); }
std::string_view spec_word(v1::ShapeSet shapes) { return word_of(kShapeWords, shapes, v1::SHAPE_SET_STANDARD); }
std::string_view spec_word(v1::JobKind kind) { return word_of(kKindWords, kind, v1::JOB_KIND_UNSPECIFIED); }
std::string_view spec_word(v1::CommandToggle toggle) { return word_of(kToggleWords, toggle, v1::COMMAND_TOGGLE_ENV); }

std::optional<v1::RunOrder> run_order_from_word(std::string_view word) { return value_of(kOrderWords, word); }
std::optional<v1::TimingMode> timing_mode_from_word(std::string_view word) { return value_of(kTimingWords, word); }
std::optional<v1::ShapeSet> shape_set_from_word(std::string_view word) { return value_of(kShapeWords, word); }
std::optional<v1::JobKind> job_kind_from_word(std::string_view word) {
  const auto kind = value_of(kKindWords, word);
  return kind == v1::JOB_KIND_UNSPECIFIED ? std::nullopt : kind;
}

}  // namespace qgate::words
