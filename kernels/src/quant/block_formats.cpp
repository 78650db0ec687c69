// Per-type facts of the eight ggml block formats and the name/id lookups built on them.
#include "qgate/quant/block_formats.h"

#include <array>
#include <cctype>
#include <stdexcept>
#include <string>

namespace qgate::quant {

namespace {

constexpr std::array<WeightType, 8> kAllTypes = {
    WeightType::q4_0, WeightType::q4_1, WeightType::q5_0, WeightType::q5_1,
    WeightType::q8_0, WeightType::q4_K, WeightType::q5_K, WeightType::q6_K,
};

constexpr std::array<TypeTraits, 8> kTraits = {{
    {WeightType::q4_0, "q4_0", kQK, sizeof(BlockQ4_0), false},
    {WeightType::q4_1, "q4_1", kQK, sizeof(BlockQ4_1), true},
    {WeightType::q5_0, "q5_0", kQK, sizeof(BlockQ5_0), false},
    {WeightType::q5_1, "q5_1", kQK, sizeof(BlockQ5_1), true},
    {WeightType::q8_0, "q8_0", kQK, sizeof(BlockQ8_0), false},
    {WeightType::q4_K, "q4_K", kQKK, sizeof(BlockQ4_K), true},
    {WeightType::q5_K, "q5_K", kQKK, sizeof(BlockQ5_K), true},
    {WeightType::q6_K, "q6_K", kQKK, sizeof(BlockQ6_K), false},
}};

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace

std::span<const WeightType> all_types() { return kAllTypes; }

const TypeTraits& traits(WeightType type) {
  for (const TypeTraits& t : kTraits) {
    if (t.type == type) return t;
  }
  // Reaching here means an unchecked cast from an int; callers validate with is_valid_type_id.
  throw std::invalid_argument("unknown weight type id " + std::to_string(static_cast<int>(type)));
}

std::optional<WeightType> parse_type(std::string_view name) {
  for (const TypeTraits& t : kTraits) {
    if (equals_ignoring_case(name, t.name)) return t.type;
  }
  return std::nullopt;
}

bool is_valid_type_id(int32_t id) {
  for (const TypeTraits& t : kTraits) {
    if (static_cast<int32_t>(t.type) == id) return true;
  }
  return false;
}

size_t row_bytes(WeightType type, int64_t k) {
  const TypeTraits& t = traits(type);
  if (k < 0 || k % t.block_elems != 0) {
    throw std::invalid_argument("row length " + std::to_string(k) + " is not a multiple of " +
                                std::to_string(t.block_elems) + " for " + std::string(t.name));
  }
  return static_cast<size_t>(k / t.block_elems) * static_cast<size_t>(t.block_bytes);
}

}  // namespace qgate::quant
