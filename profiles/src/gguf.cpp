// GGUF header reader (bounds-checked, for untrusted input), the test/corpus writer, and the
// conversion of a header's weight tensors into a model profile.
#include "qgate/profiles/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <stdexcept>
#include <type_traits>

namespace qgate::profiles {

static_assert(std::endian::native == std::endian::little, "GGUF is little-endian; this reader copies bytes as-is");

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint32_t kDefaultAlignment = 32;
constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// Smallest encodings, used to reject counts that the remaining bytes cannot possibly hold before
// anything is reserved: a key/value is a key length (8), a 1-byte key, a type (4) and a 1-byte value;
// a tensor info is a name length (8), n_dims (4), one dim (8), a type (4) and an offset (8).
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

// Bytes of one scalar of a metadata type; 0 for string and array, which have their own encoding.
uint64_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::uint8:
    case GgufValueType::int8:
    case GgufValueType::boolean: return 1;
    case GgufValueType::uint16:
    case GgufValueType::int16: return 2;
    case GgufValueType::uint32:
    case GgufValueType::int32:
    case GgufValueType::float32: return 4;
    case GgufValueType::uint64:
    case GgufValueType::int64:
    case GgufValueType::float64: return 8;
    case GgufValueType::string:
    case GgufValueType::array: return 0;
  }
  return 0;
}

bool is_value_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufValueType::float64); }

// ggml's block geometry for the types whose size is known here: {elements per block, bytes per block}.
struct GgmlTypeEntry {
  uint32_t id;
  const char* name;
  uint64_t block_elems;
  uint64_t block_bytes;
};
constexpr GgmlTypeEntry kGgmlTypes[] = {
    {0, "f32", 1, 4},      {1, "f16", 1, 2},       {2, "q4_0", 32, 18},    {3, "q4_1", 32, 20},
    {6, "q5_0", 32, 22},   {7, "q5_1", 32, 24},    {8, "q8_0", 32, 34},    {9, "q8_1", 32, 36},
    {10, "q2_K", 256, 84}, {11, "q3_K", 256, 110}, {12, "q4_K", 256, 144}, {13, "q5_K", 256, 176},
    {14, "q6_K", 256, 210}, {15, "q8_K", 256, 292}, {24, "i8", 1, 1},      {25, "i16", 1, 2},
    {26, "i32", 1, 4},     {27, "i64", 1, 8},      {28, "f64", 1, 8},      {30, "bf16", 1, 2},
};

const GgmlTypeEntry* find_ggml_type(uint32_t id) {
  for (const GgmlTypeEntry& t : kGgmlTypes) {
    if (t.id == id) return &t;
  }
  return nullptr;
}

bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool checked_add(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }

uint64_t align_up(uint64_t v, uint64_t alignment) { return (v + alignment - 1) / alignment * alignment; }

// Bytes of a tensor's data, when its type's size is known and nothing overflows.
std::optional<uint64_t> tensor_bytes(const GgufTensorInfo& t) {
  const GgmlTypeEntry* ts = find_ggml_type(t.type);
  if (ts == nullptr || t.ne[0] % ts->block_elems != 0) return std::nullopt;
  uint64_t bytes = t.ne[0] / ts->block_elems * ts->block_bytes;
  for (uint32_t d = 1; d < t.n_dims && d < kGgufMaxDims; ++d) {
    if (!checked_mul(bytes, t.ne[d], &bytes)) return std::nullopt;
  }
  return bytes;
}

// A cursor over the bytes that are in memory (`size`) of a file of `total` bytes. Reads past `size`
// are truncation (the file variant may read more and retry); lengths that exceed `total` are plain
// errors, however the bytes were obtained.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size, uint64_t total, const GgufLimits& limits)
      : data_(data), size_(size), total_(total), limits_(limits) {}

  bool fail(const std::string& message) {
    if (error_.empty()) error_ = "GGUF: " + message;
    return false;
  }
  const std::string& error() const { return error_; }
  bool truncated() const { return truncated_; }
  uint64_t pos() const { return pos_; }
  uint64_t left_in_file() const { return total_ - pos_; }

  bool need(uint64_t n, const std::string& what) {
    if (n <= size_ - pos_) return true;
    if (size_ < total_) truncated_ = true;
    return fail("truncated at byte " + std::to_string(pos_) + " reading " + what + ": need " + std::to_string(n) +
                " bytes, " + std::to_string(size_ - pos_) + " left");
  }
  template <typename T>
  bool read(T* v, const std::string& what) {
    if (!need(sizeof(T), what)) return false;
    std::memcpy(v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool skip(uint64_t n, const std::string& what) {
    if (!need(n, what)) return false;
    pos_ += n;
    return true;
  }
  // A length-prefixed string; `out` may be null to skip it.
  bool string(std::string* out, uint64_t max_length, const std::string& what) {
    const uint64_t at = pos_;
    uint64_t length = 0;
    if (!read(&length, what + " length")) return false;
    if (length > max_length) {
      return fail(what + " at byte " + std::to_string(at) + " has length " + std::to_string(length) +
                  ", beyond the limit of " + std::to_string(max_length));
    }
    if (length > left_in_file()) {
      return fail(what + " at byte " + std::to_string(at) + " has length " + std::to_string(length) +
                  ", beyond the end of the file (" + std::to_string(left_in_file()) + " bytes left)");
    }
    if (!need(length, what)) return false;
    if (out != nullptr) out->assign(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(length));
    pos_ += length;
    return true;
  }

  // A value of type `type`; `out` may be null to check and skip it.
  bool value(GgufValueType type, int depth, GgufValue* out, const std::string& what) {
    if (out != nullptr) out->type = type;
    switch (type) {
      case GgufValueType::uint8: return scalar<uint8_t>(out, what);
      case GgufValueType::int8: return scalar<int8_t>(out, what);
      case GgufValueType::uint16: return scalar<uint16_t>(out, what);
      case GgufValueType::int16: return scalar<int16_t>(out, what);
      case GgufValueType::uint32: return scalar<uint32_t>(out, what);
      case GgufValueType::int32: return scalar<int32_t>(out, what);
      case GgufValueType::uint64: return scalar<uint64_t>(out, what);
      case GgufValueType::int64: return scalar<int64_t>(out, what);
      case GgufValueType::float32: {
        float f = 0;
        if (!read(&f, what)) return false;
        if (out != nullptr) out->f = f;
        return true;
      }
      case GgufValueType::float64: {
        double f = 0;
        if (!read(&f, what)) return false;
        if (out != nullptr) out->f = f;
        return true;
      }
      case GgufValueType::boolean: {
        const uint64_t at = pos_;
        uint8_t b = 0;
        if (!read(&b, what)) return false;
        if (b > 1) return fail(what + " at byte " + std::to_string(at) + " is a bool of value " + std::to_string(b));
        if (out != nullptr) out->u = b;
        return true;
      }
      case GgufValueType::string: return string(out != nullptr ? &out->s : nullptr, limits_.max_string_length, what);
      case GgufValueType::array: return array(depth, out, what);
    }
    return fail(what + ": unknown value type " + std::to_string(static_cast<uint32_t>(type)));
  }

 private:
  template <typename T>
  bool scalar(GgufValue* out, const std::string& what) {
    T v{};
    if (!read(&v, what)) return false;
    if (out != nullptr) {
      if constexpr (std::is_signed_v<T>) {
        out->i = v;
      } else {
        out->u = v;
      }
    }
    return true;
  }

  bool array(int depth, GgufValue* out, const std::string& what) {
    const uint64_t at = pos_;
    if (depth >= limits_.max_array_depth) {
      return fail(what + " at byte " + std::to_string(at) + " nests arrays deeper than " +
                  std::to_string(limits_.max_array_depth));
    }
    uint32_t element_type = 0;
    uint64_t length = 0;
    if (!read(&element_type, what + " element type")) return false;
    if (!is_value_type(element_type)) {
      return fail(what + " at byte " + std::to_string(at) + " has unknown element type " + std::to_string(element_type));
    }
    if (!read(&length, what + " length")) return false;
    const auto etype = static_cast<GgufValueType>(element_type);
    // Each element takes at least this many bytes, so the remaining file bounds the length without
    // any multiplication that could overflow.
    const uint64_t min_element = etype == GgufValueType::string  ? 8
                                 : etype == GgufValueType::array ? 12
                                                                 : scalar_size(etype);
    if (length > limits_.max_array_length || length > left_in_file() / min_element) {
      return fail(what + " at byte " + std::to_string(at) + " has " + std::to_string(length) + " elements of " +
                  std::string(to_string(etype)) + ", more than the file's " + std::to_string(left_in_file()) +
                  " remaining bytes can hold");
    }
    const bool keep = out != nullptr && length <= limits_.max_kept_array_elements;
    if (out != nullptr) {
      out->array_type = etype;
      out->array_length = length;
      if (keep) out->array.reserve(static_cast<size_t>(length));
    }
    if (scalar_size(etype) != 0 && !keep) return skip(length * scalar_size(etype), what + " elements");
    for (uint64_t i = 0; i < length; ++i) {
      GgufValue* element = nullptr;
      if (keep) element = &out->array.emplace_back();
      if (!value(etype, depth + 1, element, what + "[" + std::to_string(i) + "]")) return false;
    }
    return true;
  }

  const uint8_t* data_;
  uint64_t size_;
  uint64_t total_;
  const GgufLimits& limits_;
  uint64_t pos_ = 0;
  bool truncated_ = false;
  std::string error_;
};

std::optional<GgufHeader> parse(const uint8_t* data, size_t size, uint64_t total, const GgufLimits& limits,
                                std::string* error, bool* truncated) {
  Reader r(data, data == nullptr ? 0 : size, data == nullptr ? 0 : total, limits);
  auto failed = [&]() -> std::optional<GgufHeader> {
    if (error != nullptr) *error = r.error();
    if (truncated != nullptr) *truncated = r.truncated();
    return std::nullopt;
  };

  GgufHeader h;
  uint32_t magic = 0;
  if (!r.read(&magic, "the magic")) return failed();
  if (magic != kMagic) {
    // The bytes found are not repeated: the message may reach people who could not read the file.
    r.fail("bad magic, not a GGUF file");
    return failed();
  }
  if (!r.read(&h.version, "the version")) return failed();
  if (h.version != 2 && h.version != 3) {
    if (h.version == 0x02000000u || h.version == 0x03000000u) {
      r.fail("big-endian GGUF is not supported");
    } else if (h.version == 1) {
      r.fail("GGUF version 1 (32-bit counts) is not supported; convert the file to v3");
    } else {
      r.fail("unsupported GGUF version " + std::to_string(h.version) + " (this reader knows 2 and 3)");
    }
    return failed();
  }
  if (!r.read(&h.tensor_count, "the tensor count") || !r.read(&h.kv_count, "the metadata count")) return failed();
  if (h.tensor_count > limits.max_tensors) {
    r.fail("absurd tensor count " + std::to_string(h.tensor_count) + " (limit " + std::to_string(limits.max_tensors) + ")");
    return failed();
  }
  if (h.kv_count > limits.max_kv) {
    r.fail("absurd metadata count " + std::to_string(h.kv_count) + " (limit " + std::to_string(limits.max_kv) + ")");
    return failed();
  }
  // Both counts are at most 2^20 here, so these products cannot overflow.
  if (h.kv_count * kMinKvBytes + h.tensor_count * kMinTensorInfoBytes > r.left_in_file()) {
    r.fail(std::to_string(h.kv_count) + " key/values and " + std::to_string(h.tensor_count) +
           " tensor infos cannot fit in the file's " + std::to_string(r.left_in_file()) +
           " remaining bytes (a truncated or corrupt file)");
    return failed();
  }

  h.metadata.reserve(static_cast<size_t>(h.kv_count));
  for (uint64_t i = 0; i < h.kv_count; ++i) {
    GgufKeyValue& kv = h.metadata.emplace_back();
    const std::string what = "metadata " + std::to_string(i);
    if (!r.string(&kv.key, limits.max_key_length, what + " key")) return failed();
    if (kv.key.empty()) {
      r.fail(what + " has an empty key");
      return failed();
    }
    uint32_t type = 0;
    const uint64_t type_at = r.pos();
    if (!r.read(&type, what + " type")) return failed();
    if (!is_value_type(type)) {
      r.fail("metadata '" + kv.key + "' at byte " + std::to_string(type_at) + " has unknown value type " +
             std::to_string(type));
      return failed();
    }
    if (!r.value(static_cast<GgufValueType>(type), 0, &kv.value, "metadata '" + kv.key + "'")) return failed();
  }

  h.alignment = kDefaultAlignment;
  if (const GgufValue* a = h.find("general.alignment")) {
    if (a->type != GgufValueType::uint32 || a->u == 0 || !std::has_single_bit(a->u) || a->u > (1u << 20)) {
      r.fail("general.alignment must be a uint32 power of two up to 1 MiB");
      return failed();
    }
    h.alignment = static_cast<uint32_t>(a->u);
  }

  h.tensors.reserve(static_cast<size_t>(h.tensor_count));
  std::set<std::string, std::less<>> names;
  for (uint64_t i = 0; i < h.tensor_count; ++i) {
    GgufTensorInfo& t = h.tensors.emplace_back();
    const std::string what = "tensor " + std::to_string(i);
    if (!r.string(&t.name, limits.max_name_length, what + " name")) return failed();
    const std::string named = what + " '" + t.name + "'";
    if (!names.insert(t.name).second) {
      r.fail(named + " is a duplicate name");
      return failed();
    }
    if (!r.read(&t.n_dims, named + " n_dims")) return failed();
    if (t.n_dims < 1 || t.n_dims > kGgufMaxDims) {
      r.fail(named + " has n_dims " + std::to_string(t.n_dims) + "; must be 1 to " + std::to_string(kGgufMaxDims));
      return failed();
    }
    uint64_t elements = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      if (!r.read(&t.ne[d], named + " ne[" + std::to_string(d) + "]")) return failed();
      if (t.ne[d] == 0 || t.ne[d] > kInt64Max) {
        r.fail(named + " has ne[" + std::to_string(d) + "] = " + std::to_string(t.ne[d]));
        return failed();
      }
      if (!checked_mul(elements, t.ne[d], &elements) || elements > kInt64Max) {
        r.fail(named + " has an element count that overflows int64");
        return failed();
      }
    }
    if (!r.read(&t.type, named + " type")) return failed();
    if (t.type > limits.max_type_id) {
      r.fail(named + " has ggml type id " + std::to_string(t.type) + " (limit " + std::to_string(limits.max_type_id) + ")");
      return failed();
    }
    if (const GgmlTypeEntry* ts = find_ggml_type(t.type); ts != nullptr && t.ne[0] % ts->block_elems != 0) {
      r.fail(named + " has row length " + std::to_string(t.ne[0]) + ", not a multiple of the " + ts->name +
             " block of " + std::to_string(ts->block_elems));
      return failed();
    }
    if (!r.read(&t.offset, named + " offset")) return failed();
    if (t.offset % h.alignment != 0) {
      r.fail(named + " has offset " + std::to_string(t.offset) + ", not a multiple of the alignment " +
             std::to_string(h.alignment));
      return failed();
    }
  }
  h.header_size = r.pos();
  h.data_offset = align_up(h.header_size, h.alignment);

  // When the file carries a data section, every tensor of known size must lie inside it. A header-only
  // file (what the writer produces by default, and what a fuzzer feeds) has nothing to check.
  if (total > h.data_offset) {
    const uint64_t data_bytes = total - h.data_offset;
    for (const GgufTensorInfo& t : h.tensors) {
      const std::optional<uint64_t> bytes = tensor_bytes(t);
      uint64_t end = 0;
      if (bytes && (!checked_add(t.offset, *bytes, &end) || end > data_bytes)) {
        const uint64_t short_by = end >= t.offset ? end - data_bytes : 0;  // 0 only when the sum overflowed
        r.fail("tensor '" + t.name + "' (" + ggml_type_name(t.type) + ") data [" + std::to_string(t.offset) + ", +" +
               std::to_string(*bytes) + ") runs past the " + std::to_string(data_bytes) +
               "-byte data section of this " + std::to_string(total) + "-byte file" +
               (short_by > 0 ? " (" + std::to_string(short_by) + " bytes missing: truncated file?)" : ""));
        return failed();
      }
    }
  }
  if (truncated != nullptr) *truncated = false;
  return h;
}

// Little-endian appends for the writer.
template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void put_value(std::vector<uint8_t>& out, const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::uint8: put(out, static_cast<uint8_t>(v.u)); break;
    case GgufValueType::int8: put(out, static_cast<int8_t>(v.i)); break;
    case GgufValueType::uint16: put(out, static_cast<uint16_t>(v.u)); break;
    case GgufValueType::int16: put(out, static_cast<int16_t>(v.i)); break;
    case GgufValueType::uint32: put(out, static_cast<uint32_t>(v.u)); break;
    case GgufValueType::int32: put(out, static_cast<int32_t>(v.i)); break;
    case GgufValueType::float32: put(out, static_cast<float>(v.f)); break;
    case GgufValueType::boolean: put(out, static_cast<uint8_t>(v.u != 0)); break;
    case GgufValueType::string: put_string(out, v.s); break;
    case GgufValueType::uint64: put(out, v.u); break;
    case GgufValueType::int64: put(out, v.i); break;
    case GgufValueType::float64: put(out, v.f); break;
    case GgufValueType::array:
      put(out, static_cast<uint32_t>(v.array_type));
      put<uint64_t>(out, v.array.size());
      for (const GgufValue& e : v.array) put_value(out, e);
      break;
  }
}

// "blk.12.attn_q.weight" -> "attn_q"; "output.weight" -> "output".
std::string role_of(std::string_view name) {
  if (name.starts_with("blk.")) {
    const size_t dot = name.find('.', 4);
    if (dot != std::string_view::npos) name.remove_prefix(dot + 1);
  }
  if (name.ends_with(".weight")) name.remove_suffix(7);
  return std::string(name);
}

}  // namespace

std::string_view to_string(GgufValueType t) {
  switch (t) {
    case GgufValueType::uint8: return "uint8";
    case GgufValueType::int8: return "int8";
    case GgufValueType::uint16: return "uint16";
    case GgufValueType::int16: return "int16";
    case GgufValueType::uint32: return "uint32";
    case GgufValueType::int32: return "int32";
    case GgufValueType::float32: return "float32";
    case GgufValueType::boolean: return "bool";
    case GgufValueType::string: return "string";
    case GgufValueType::array: return "array";
    case GgufValueType::uint64: return "uint64";
    case GgufValueType::int64: return "int64";
    case GgufValueType::float64: return "float64";
  }
  return "unknown";
}

GgufValue GgufValue::of_uint8(uint8_t v) { GgufValue x; x.type = GgufValueType::uint8; x.u = v; return x; }
GgufValue GgufValue::of_int8(int8_t v) { GgufValue x; x.type = GgufValueType::int8; x.i = v; return x; }
GgufValue GgufValue::of_uint16(uint16_t v) { GgufValue x; x.type = GgufValueType::uint16; x.u = v; return x; }
GgufValue GgufValue::of_int16(int16_t v) { GgufValue x; x.type = GgufValueType::int16; x.i = v; return x; }
GgufValue GgufValue::of_uint32(uint32_t v) { GgufValue x; x.type = GgufValueType::uint32; x.u = v; return x; }
GgufValue GgufValue::of_int32(int32_t v) { GgufValue x; x.type = GgufValueType::int32; x.i = v; return x; }
GgufValue GgufValue::of_float32(float v) { GgufValue x; x.type = GgufValueType::float32; x.f = v; return x; }
GgufValue GgufValue::of_bool(bool v) { GgufValue x; x.type = GgufValueType::boolean; x.u = v ? 1 : 0; return x; }
GgufValue GgufValue::of_string(std::string v) { GgufValue x; x.type = GgufValueType::string; x.s = std::move(v); return x; }
GgufValue GgufValue::of_uint64(uint64_t v) { GgufValue x; x.type = GgufValueType::uint64; x.u = v; return x; }
GgufValue GgufValue::of_int64(int64_t v) { GgufValue x; x.type = GgufValueType::int64; x.i = v; return x; }
GgufValue GgufValue::of_float64(double v) { GgufValue x; x.type = GgufValueType::float64; x.f = v; return x; }
GgufValue GgufValue::of_array(GgufValueType element_type, std::vector<GgufValue> elements) {
  GgufValue x;
  x.type = GgufValueType::array;
  x.array_type = element_type;
  x.array_length = elements.size();
  x.array = std::move(elements);
  return x;
}

const GgufValue* GgufHeader::find(std::string_view key) const {
  for (const GgufKeyValue& kv : metadata) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

std::string ggml_type_name(uint32_t type) {
  if (const GgmlTypeEntry* t = find_ggml_type(type)) return t->name;
  return "type " + std::to_string(type);
}

std::optional<GgmlTypeSize> ggml_type_size(uint32_t type) {
  const GgmlTypeEntry* t = find_ggml_type(type);
  if (t == nullptr) return std::nullopt;
  return GgmlTypeSize{t->block_elems, t->block_bytes};
}

std::optional<uint64_t> gguf_tensor_bytes(const GgufTensorInfo& tensor) { return tensor_bytes(tensor); }

std::optional<GgufHeader> parse_gguf_header(const uint8_t* data, size_t size, std::string* error,
                                            const GgufLimits& limits) {
  return parse(data, size, size, limits, error, nullptr);
}

std::optional<GgufHeader> read_gguf_header(const std::string& path, std::string* error, const GgufLimits& limits) {
  auto fail = [&](const std::string& message) -> std::optional<GgufHeader> {
    if (error != nullptr) *error = path + ": " + message;
    return std::nullopt;
  };
  std::error_code ec;
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) return fail("cannot stat: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail("cannot open");

  // Read a prefix and widen it until the header fits: the header of a 5 GB model is a few MB.
  constexpr uint64_t kFirstChunk = 1u << 20;
  constexpr uint64_t kMaxHeaderBytes = 2ull << 30;
  std::vector<uint8_t> buffer;
  uint64_t want = std::min(file_size, kFirstChunk);
  for (;;) {
    const size_t have = buffer.size();
    buffer.resize(static_cast<size_t>(want));
    in.seekg(static_cast<std::streamoff>(have));
    in.read(reinterpret_cast<char*>(buffer.data() + have), static_cast<std::streamsize>(want - have));
    if (static_cast<uint64_t>(in.gcount()) != want - have) return fail("short read");
    std::string message;
    bool truncated = false;
    auto h = parse(buffer.data(), buffer.size(), file_size, limits, &message, &truncated);
    if (h) return h;
    if (!truncated || want >= file_size) return fail(message);
    if (want >= kMaxHeaderBytes) return fail("header larger than 2 GiB");
    want = std::min({file_size, want * 4, kMaxHeaderBytes});
  }
}

std::vector<uint8_t> write_gguf_header(std::span<const GgufTensorInfo> tensors, std::span<const GgufKeyValue> metadata,
                                       const GgufWriteOptions& options) {
  uint64_t alignment = kDefaultAlignment;
  for (const GgufKeyValue& kv : metadata) {
    if (kv.key == "general.alignment" && kv.value.type == GgufValueType::uint32 && kv.value.u != 0) alignment = kv.value.u;
  }
  std::vector<uint8_t> out;
  put(out, kMagic);
  put(out, options.version);
  put<uint64_t>(out, tensors.size());
  put<uint64_t>(out, metadata.size());
  for (const GgufKeyValue& kv : metadata) {
    put_string(out, kv.key);
    put(out, static_cast<uint32_t>(kv.value.type));
    put_value(out, kv.value);
  }
  const bool with_bytes = options.include_data && !options.tensor_data.empty();
  if (with_bytes && options.tensor_data.size() != tensors.size()) {
    throw std::invalid_argument("write_gguf_header: " + std::to_string(options.tensor_data.size()) +
                                " tensor_data entries for " + std::to_string(tensors.size()) + " tensors");
  }
  std::vector<uint64_t> offsets;
  offsets.reserve(tensors.size());
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorInfo& t = tensors[i];
    const std::optional<uint64_t> known = tensor_bytes(t);
    uint64_t bytes = known.value_or(0);
    if (with_bytes) {
      if (known && *known != options.tensor_data[i].size()) {
        throw std::invalid_argument("write_gguf_header: tensor '" + t.name + "' (" + ggml_type_name(t.type) +
                                    ") needs " + std::to_string(*known) + " bytes, got " +
                                    std::to_string(options.tensor_data[i].size()));
      }
      bytes = options.tensor_data[i].size();
    }
    put_string(out, t.name);
    put(out, t.n_dims);
    for (uint32_t d = 0; d < t.n_dims && d < kGgufMaxDims; ++d) put(out, t.ne[d]);
    put(out, t.type);
    put(out, offset);
    offsets.push_back(offset);
    offset = align_up(offset + bytes, alignment);
  }
  if (options.include_data) {
    // Each tensor, the last one too, is padded to the alignment, as ggml writes them.
    const uint64_t data_start = align_up(out.size(), alignment);
    out.resize(static_cast<size_t>(data_start + offset), 0);
    if (with_bytes) {
      for (size_t i = 0; i < tensors.size(); ++i) {
        const std::span<const uint8_t> d = options.tensor_data[i];
        if (!d.empty()) std::memcpy(out.data() + data_start + offsets[i], d.data(), d.size());
      }
    }
  }
  return out;
}

std::optional<GgufProfile> profile_from_gguf(const GgufHeader& header, std::string_view name, std::string* error) {
  GgufProfile result;
  if (const GgufValue* v = header.find("general.name"); v != nullptr && v->type == GgufValueType::string) {
    result.general_name = v->s;
  }
  ModelProfile& p = result.profile;
  p.name = !name.empty() ? std::string(name) : !result.general_name.empty() ? result.general_name : "gguf";
  p.default_tokens = 512;

  for (const GgufTensorInfo& t : header.tensors) {
    const std::string role = role_of(t.name);
    auto skip = [&](std::string reason) { result.skipped.push_back({t.name, std::move(reason)}); };
    if (role == "token_embd") {
      skip("token embedding is a row lookup, not a GEMM");
      continue;
    }
    if (t.n_dims <= 1) {
      skip("1-D tensor (norm or bias), not a GEMM");
      continue;
    }
    if (t.n_dims > 2 && t.ne[2] * t.ne[3] > 1) {
      skip(std::to_string(t.n_dims) + "-D tensor (stacked matrices), not a single GEMM");
      continue;
    }
    if (!quant::is_valid_type_id(static_cast<int32_t>(t.type))) {
      skip("type " + ggml_type_name(t.type) + " is not one of the quantized types the kernels run");
      continue;
    }
    const auto type = static_cast<quant::WeightType>(t.type);
    const auto k = static_cast<int64_t>(t.ne[0]);
    const auto od = static_cast<int64_t>(t.ne[1]);
    if (k % quant::traits(type).block_elems != 0) {
      skip("row length " + std::to_string(k) + " is not a multiple of the " + std::string(quant::traits(type).name) +
           " block");
      continue;
    }
    try {
      p.add_gemm(type, od, k, role);
    } catch (const std::exception& e) {
      if (error != nullptr) *error = e.what();
      return std::nullopt;
    }
  }

  p.description = "from GGUF";
  if (!result.general_name.empty()) p.description += " '" + result.general_name + "'";
  if (const GgufValue* v = header.find("general.architecture"); v != nullptr && v->type == GgufValueType::string) {
    p.description += " (" + v->s + ")";
  }
  p.description += ": " + std::to_string(p.gemm_count()) + " GEMMs in " + std::to_string(p.gemms.size()) +
                   " shapes, " + std::to_string(result.skipped.size()) +
                   " tensors skipped; tok/s = prompt tokens / summed GEMM time";
  return result;
}

std::optional<GgufProfile> profile_from_gguf(const uint8_t* data, size_t size, std::string_view name,
                                             std::string* error) {
  const auto header = parse_gguf_header(data, size, error);
  if (!header) return std::nullopt;
  return profile_from_gguf(*header, name, error);
}

std::optional<GgufProfile> profile_from_gguf_file(const std::string& path, std::string_view name, std::string* error) {
  const auto header = read_gguf_header(path, error);
  if (!header) return std::nullopt;
  return profile_from_gguf(*header, name, error);
}

}  // namespace qgate::profiles
