// Weight block formats of the eight quantized types, byte-compatible with ggml/GGUF, and the
// per-type facts (block size, bytes, whether a min term exists) that every other part reads.
#pragma once

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
inline constexpr int kKScaleBytes = 12;

// ggml's block layouts. f16 fields are stored as raw IEEE binary16 bits.
struct BlockQ4_0 { uint16_t d; uint8_t qs[kQK / 2]; };
struct BlockQ4_1 { uint16_t d; uint16_t m; uint8_t qs[kQK / 2]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[kQK / 2]; };
struct BlockQ5_1 { uint16_t d; uint16_t m; uint8_t qh[4]; uint8_t qs[kQK / 2]; };
struct BlockQ8_0 { uint16_t d; int8_t qs[kQK]; };
struct BlockQ4_K { uint16_t d; uint16_t dmin; uint8_t scales[kKScaleBytes]; uint8_t qs[kQKK / 2]; };
struct BlockQ5_K { uint16_t d; uint16_t dmin; uint8_t scales[kKScaleBytes]; uint8_t qh[kQKK / 8]; uint8_t qs[kQKK / 2]; };
struct BlockQ6_K { uint8_t ql[kQKK / 2]; uint8_t qh[kQKK / 4]; int8_t scales[kQKK / 16]; uint16_t d; };

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);

struct TypeTraits {
  WeightType type;
  std::string_view name;  // "q4_0", "q4_K", ... as ggml spells them
  int block_elems;        // 32 or 256
  int block_bytes;
  bool has_min;           // carries the rank-1 `dm * sum(q)` term
};

/// The eight types in a fixed order (the order of the parity sweep).
std::span<const WeightType> all_types();
const TypeTraits& traits(WeightType type);
/// Accepts ggml's spelling, case-insensitively ("q4_k" == "q4_K"). Empty for anything else.
std::optional<WeightType> parse_type(std::string_view name);
bool is_valid_type_id(int32_t id);
/// Bytes of one row of k elements; k must be a multiple of the block size.
size_t row_bytes(WeightType type, int64_t k);

}  // namespace qgate::quant
