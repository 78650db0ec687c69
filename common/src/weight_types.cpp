// Name and id lookups over the weight types' table (weight_types.h).
#include "qgate/common/weight_types.h"

#include <cctype>
#include <stdexcept>
#include <string>

namespace qgate::quant {

namespace {

constexpr std::array<WeightType, kTypeTraits.size()> all_types_in_table_order() {
  std::array<WeightType, kTypeTraits.size()> types{};
  for (size_t i = 0; i < kTypeTraits.size(); ++i) types[i] = kTypeTraits[i].type;
  return types;
}

constexpr std::array<WeightType, kTypeTraits.size()> kAllTypes = all_types_in_table_order();

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

void throw_unknown_weight_type(WeightType type) {
  throw std::invalid_argument("unknown weight type id " + std::to_string(static_cast<int32_t>(type)));
}

std::span<const WeightType> all_types() { return kAllTypes; }

std::optional<WeightType> parse_type(std::string_view name) {
  for (const TypeTraits& t : kTypeTraits) {
    if (equals_ignoring_case(name, t.name)) return t.type;
  }
  return std::nullopt;
}

bool is_valid_type_id(int32_t id) {
  for (const TypeTraits& t : kTypeTraits) {
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
