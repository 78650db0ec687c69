// GGUF (v2/v3) header reader and a small writer, and the model profile a GGUF file implies.
// (Tensor data is read by GgufTensorSource, qgate/profiles/gguf_tensors.h.)
//
// Only the header is read: magic, version, counts, metadata key/values and tensor infos. The reader
// takes untrusted bytes (it is fuzzed under AddressSanitizer): every count, length and offset is
// checked against the bytes that exist and against sane limits before anything is read or
// allocated, and every failure is a returned message, never a crash or an exception.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qgate/profiles/model_profile.h"

namespace qgate::profiles {

/// GGUF metadata value types, with the file's numbering.
enum class GgufValueType : uint32_t {
  uint8 = 0,
  int8 = 1,
  uint16 = 2,
  int16 = 3,
  uint32 = 4,
  int32 = 5,
  float32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  uint64 = 10,
  int64 = 11,
  float64 = 12,
};
std::string_view to_string(GgufValueType t);

/// One metadata value. Scalars live in the field of their kind; arrays carry their element type and
/// length, and their elements when short (see GgufLimits::max_kept_array_elements).
struct GgufValue {
  GgufValueType type = GgufValueType::uint32;
  uint64_t u = 0;  // uint8/16/32/64 and bool
  int64_t i = 0;   // int8/16/32/64
  double f = 0;    // float32/64
  std::string s;   // string
  GgufValueType array_type = GgufValueType::uint8;
  uint64_t array_length = 0;     // as read; the writer uses array.size()
  std::vector<GgufValue> array;  // reader: empty when the array is longer than the kept limit

  static GgufValue of_uint8(uint8_t v);
  static GgufValue of_int8(int8_t v);
  static GgufValue of_uint16(uint16_t v);
  static GgufValue of_int16(int16_t v);
  static GgufValue of_uint32(uint32_t v);
  static GgufValue of_int32(int32_t v);
  static GgufValue of_float32(float v);
  static GgufValue of_bool(bool v);
  static GgufValue of_string(std::string v);
  static GgufValue of_uint64(uint64_t v);
  static GgufValue of_int64(int64_t v);
  static GgufValue of_float64(double v);
  /// Every element must have type `element_type` (arrays of arrays are allowed).
  static GgufValue of_array(GgufValueType element_type, std::vector<GgufValue> elements);
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

inline constexpr int kGgufMaxDims = 4;  // ggml's GGML_MAX_DIMS

struct GgufTensorInfo {
  std::string name;
  uint32_t n_dims = 0;
  std::array<uint64_t, kGgufMaxDims> ne{1, 1, 1, 1};  // ne[0] = k (row length), ne[1] = od for 2-D weights
  uint32_t type = 0;                                   // ggml type id (quant::WeightType for the supported ones)
  uint64_t offset = 0;                                 // from the start of the data section
};

struct GgufHeader {
  uint32_t version = 3;
  uint64_t tensor_count = 0;
  uint64_t kv_count = 0;
  std::vector<GgufKeyValue> metadata;
  std::vector<GgufTensorInfo> tensors;
  uint32_t alignment = 32;   // general.alignment, or GGUF's default
  uint64_t header_size = 0;  // bytes up to the end of the tensor infos
  uint64_t data_offset = 0;  // header_size rounded up to the alignment

  /// Null when the key is absent.
  const GgufValue* find(std::string_view key) const;
};

/// Limits beyond which a header is called malformed rather than merely large. Real models stay far
/// below them (a 128k-token vocabulary is one array of 128k strings; models have ~300-3000 tensors).
struct GgufLimits {
  uint64_t max_tensors = 1u << 20;
  uint64_t max_kv = 1u << 20;
  uint64_t max_key_length = 65535;        // the GGUF spec's bound on keys
  uint64_t max_name_length = 65535;       // tensor names (ggml itself uses 64)
  uint64_t max_string_length = 1u << 30;  // string values
  uint64_t max_array_length = 1ull << 32;
  int max_array_depth = 4;               // arrays of arrays
  uint64_t max_kept_array_elements = 256;  // longer arrays are checked and skipped, not stored
  uint32_t max_type_id = 255;            // ggml type ids are small; anything larger is garbage
};

/// Parses the header in `data[0, size)`. On failure returns nullopt and, when `error` is given, a
/// message naming the byte offset and what was wrong. Never throws, never reads outside the buffer.
std::optional<GgufHeader> parse_gguf_header(const uint8_t* data, size_t size, std::string* error = nullptr,
                                            const GgufLimits& limits = {});
/// Reads only as much of the file as the header needs (models are gigabytes).
std::optional<GgufHeader> read_gguf_header(const std::string& path, std::string* error = nullptr,
                                           const GgufLimits& limits = {});

/// ggml's name for a type id ("f32", "q4_K", ...) or "type N".
std::string ggml_type_name(uint32_t type);

/// ggml's block geometry of a type id: `block_elems` elements are stored in `block_bytes` bytes.
struct GgmlTypeSize {
  uint64_t block_elems = 0;
  uint64_t block_bytes = 0;
};
/// Known for f32, f16, bf16, f64, the integer types, q4_0..q8_1 and q2_K..q8_K; empty for any other id
/// (the IQ types and ids this reader does not know), whose data size cannot be computed.
std::optional<GgmlTypeSize> ggml_type_size(uint32_t type);
/// Bytes of a tensor's data: ne[0] / block_elems * block_bytes * ne[1] * ne[2] * ne[3]. Empty when the
/// type's size is unknown, ne[0] is not a multiple of its block, or the product overflows.
std::optional<uint64_t> gguf_tensor_bytes(const GgufTensorInfo& tensor);

struct GgufWriteOptions {
  uint32_t version = 3;
  /// Header only (the reader needs no more) or header, alignment padding and a data section.
  bool include_data = false;
  /// With include_data: the tensors' bytes, one entry per tensor, in the order of `tensors`. Each must be
  /// exactly gguf_tensor_bytes() long (a type of unknown size takes its entry's length). Left empty, the
  /// data section is zero-filled and tensors of unknown size take no bytes.
  std::vector<std::span<const uint8_t>> tensor_data;
};

/// Writes a GGUF file (by default only its header) for tests and fuzz corpora. Tensor offsets are
/// computed (aligned, in the order given); the `offset` fields of `tensors` are ignored. The alignment
/// is general.alignment when the metadata has it (as uint32), else 32; padding bytes are zero. Throws
/// std::invalid_argument when `tensor_data` has the wrong count or a wrong length.
std::vector<uint8_t> write_gguf_header(std::span<const GgufTensorInfo> tensors,
                                       std::span<const GgufKeyValue> metadata, const GgufWriteOptions& options = {});

/// A tensor that did not become a GEMM, and why.
struct SkippedTensor {
  std::string name;
  std::string reason;
};

struct GgufProfile {
  ModelProfile profile;
  std::vector<SkippedTensor> skipped;
  std::string general_name;  // general.name, empty when absent
};

/// 2-D tensors of a supported type become GEMMs (od = ne[1], k = ne[0]; role from the name:
/// "blk.N.attn_q.weight" -> "attn_q", "output.weight" -> "output"), identical ones merged. token_embd
/// (a lookup), 1-D tensors (norms, biases), 3-D+ tensors and unsupported types (f32, f16, q2_K, ...) are
/// listed in `skipped` with the reason. The profile is named `name`, or general.name when `name` is
/// empty, or "gguf". Fails when the header is malformed.
std::optional<GgufProfile> profile_from_gguf(const GgufHeader& header, std::string_view name,
                                             std::string* error = nullptr);
std::optional<GgufProfile> profile_from_gguf(const uint8_t* data, size_t size, std::string_view name,
                                             std::string* error = nullptr);
std::optional<GgufProfile> profile_from_gguf_file(const std::string& path, std::string_view name,
                                                  std::string* error = nullptr);

}  // namespace qgate::profiles
