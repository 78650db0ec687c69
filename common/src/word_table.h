// One table per enum drives both directions of its words (verdicts.cpp, job_settings.cpp), so a
// word and its value cannot drift apart.
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <utility>

namespace qgate::detail {

template <class Enum, std::size_t N>
using WordTable = std::array<std::pair<Enum, std::string_view>, N>;

template <class Enum, std::size_t N>
std::string_view word_of(const WordTable<Enum, N>& words, Enum value) {
  for (const auto& [v, word] : words) {
    if (v == value) return word;
  }
  return "?";  // only an out-of-range cast gets here
}

template <class Enum, std::size_t N>
std::optional<Enum> value_of(const WordTable<Enum, N>& words, std::string_view text) {
  for (const auto& [v, word] : words) {
    if (word == text) return v;
  }
  return std::nullopt;
}

}  // namespace qgate::detail
