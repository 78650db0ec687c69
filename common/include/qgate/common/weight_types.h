// The host facts of the eight quantized weight types: ggml's type ids, names, elements and bytes per
// block, and whether a min term exists. The one table every part of qgate reads; kernels/ adds the
// block layouts (qgate/quant/block_formats.h) and checks them against it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace qgate::quant {

/// ggml's type ids, so GGUF tensor types map one to one (see kernel_abi.h).
enum class WeightType : int32_t {
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q4_K = 12,
  q5_K = 13,
  q6_K = 14,
};

inline constexpr int kQK = 32;    // elements per block of the legacy types
inline constexpr int kQKK = 256;  // elements per K-quant super-block

struct TypeTraits {
  WeightType type;
  std::string_view name;  // "q4_0", "q4_K", ... as ggml spells them
  int block_elems;        // 32 or 256
  int block_bytes;
  bool has_min;           // carries the rank-1 `dm * sum(q)` term
};

/// ggml's sizes (ggml-common.h), in the sweep order of all_types().
inline constexpr std::array<TypeTraits, 8> kTypeTraits = {{
    {WeightType::q4_0, "q4_0", kQK, 18, false},
    {WeightType::q4_1, "q4_1", kQK, 20, true},
    {WeightType::q5_0, "q5_0", kQK, 22, false},
    {WeightType::q5_1, "q5_1", kQK, 24, true},
    {WeightType::q8_0, "q8_0", kQK, 34, false},
    {WeightType::q4_K, "q4_K", kQKK, 144, true},
    {WeightType::q5_K, "q5_K", kQKK, 176, true},
    {WeightType::q6_K, "q6_K", kQKK, 210, false},
}};

/// The eight types in a fixed order (the order of the parity sweep).
std::span<const WeightType> all_types();

/// Throws std::invalid_argument naming the id (traits() of a type that is not one of the eight).
[[noreturn]] void throw_unknown_weight_type(WeightType type);

/// Throws for an id that is not one of the eight (an unchecked cast from an int; validate with
/// is_valid_type_id). constexpr so block layouts can be checked against it at compile time.
constexpr const TypeTraits& traits(WeightType type) {
  for (const TypeTraits& t : kTypeTraits) {
    if (t.type == type) return t;
  }
  throw_unknown_weight_type(type);
}

/// Accepts ggml's spelling, case-insensitively ("q4_k" == "q4_K"). Empty for anything else.
std::optional<WeightType> parse_type(std::string_view name);
bool is_valid_type_id(int32_t id);
/// Bytes of one row of k elements; k must be a multiple of the block size.
size_t row_bytes(WeightType type, int64_t k);

}  // namespace qgate::quant
