// The words of the spec enumerations, both ways, from one table per enum.
#include "qgate/v1/spec_words.h"

#include <array>
#include <utility>

namespace qgate::words {
namespace {

template <class Enum, std::size_t N>
using WordTable = std::array<std::pair<Enum, std::string_view>, N>;

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

v1::RunOrder to_proto(RunOrder order) {
  return order == RunOrder::Sequential ? v1::RUN_ORDER_SEQUENTIAL : v1::RUN_ORDER_ABBA;
}
RunOrder from_proto(v1::RunOrder order) {
  return order == v1::RUN_ORDER_SEQUENTIAL ? RunOrder::Sequential : RunOrder::Abba;
}
v1::TimingMode to_proto(TimingMode timing) {
  return timing == TimingMode::Pass ? v1::TIMING_MODE_PASS : v1::TIMING_MODE_GEMM;
}
TimingMode from_proto(v1::TimingMode timing) {
  return timing == v1::TIMING_MODE_PASS ? TimingMode::Pass : TimingMode::Gemm;
}
v1::ShapeSet to_proto(ShapeSet shapes) {
  switch (shapes) {
    case ShapeSet::Unspecified: return v1::SHAPE_SET_UNSPECIFIED;
    case ShapeSet::Standard: return v1::SHAPE_SET_STANDARD;
    case ShapeSet::Quick: return v1::SHAPE_SET_QUICK;
    case ShapeSet::None: return v1::SHAPE_SET_NONE;
  }
  return v1::SHAPE_SET_UNSPECIFIED;
}
ShapeSet from_proto(v1::ShapeSet shapes) {
  switch (shapes) {
    case v1::SHAPE_SET_STANDARD: return ShapeSet::Standard;
    case v1::SHAPE_SET_QUICK: return ShapeSet::Quick;
    case v1::SHAPE_SET_NONE: return ShapeSet::None;
    default: return ShapeSet::Unspecified;
  }
}

std::string_view spec_word(v1::RunOrder order) { return to_string(from_proto(order)); }
std::string_view spec_word(v1::TimingMode timing) { return to_string(from_proto(timing)); }
// A shape set's UNSPECIFIED reads as the sweep it runs without a model file: standard.
std::string_view spec_word(v1::ShapeSet shapes) {
  return to_string(shapes == v1::SHAPE_SET_UNSPECIFIED ? ShapeSet::Standard : from_proto(shapes));
}
std::string_view spec_word(v1::JobKind kind) { return word_of(kKindWords, kind, v1::JOB_KIND_UNSPECIFIED); }
std::string_view spec_word(v1::CommandToggle toggle) { return word_of(kToggleWords, toggle, v1::COMMAND_TOGGLE_ENV); }

std::optional<v1::RunOrder> run_order_from_word(std::string_view word) {
  if (const auto order = run_order_from_string(word)) return to_proto(*order);
  return std::nullopt;
}
std::optional<v1::TimingMode> timing_mode_from_word(std::string_view word) {
  if (const auto timing = timing_mode_from_string(word)) return to_proto(*timing);
  return std::nullopt;
}
// "unspecified" is the store's word for a spec that named no set, not one a user names.
std::optional<v1::ShapeSet> shape_set_from_word(std::string_view word) {
  const auto shapes = shape_set_from_string(word);
  if (!shapes || *shapes == ShapeSet::Unspecified) return std::nullopt;
  return to_proto(*shapes);
}
std::optional<v1::JobKind> job_kind_from_word(std::string_view word) {
  const auto kind = value_of(kKindWords, word);
  return kind == v1::JOB_KIND_UNSPECIFIED ? std::nullopt : kind;
}

}  // namespace qgate::words
