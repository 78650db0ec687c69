// Tensor data of a GGUF file: list a model's tensors, pick some by name globs, and read one tensor's
// stored bytes (the blocks exactly as the file holds them) for a parity run on real weights.
//
// Typical use (what `qgate-worker parity --gguf MODEL.gguf --tensors 'blk.0.*'` needs):
//
//   std::string error;
//   auto source = GgufTensorSource::open(path, &error);         // header only; the data stays on disk
//   if (!source) die(error);
//   auto selection = source->select("blk.0.*,output.weight", &error);
//   if (!selection) die(error);                                 // a glob that matches no tensor
//   for (const SkippedTensor& s : selection->skipped) note(s.name, s.reason);
//   for (const GgufTensorEntry* t : selection->gemms) {
//     auto blocks = source->read(*t, &error);                   // od rows of row_bytes(type, k) bytes
//     run_parity(*t->weight_type, t->od, t->k, *blocks);
//   }
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qgate/profiles/gguf.h"
#include "qgate/common/weight_types.h"

namespace qgate::profiles {

/// One tensor of a GGUF file, as the file describes it, and its view as a GEMM weight.
struct GgufTensorEntry {
  std::string name;
  uint32_t type = 0;      ///< ggml type id, as stored
  std::string type_name;  ///< ggml's spelling ("q4_K", "f16") or "type N" for ids of unknown size
  uint32_t n_dims = 0;
  std::array<uint64_t, kGgufMaxDims> ne{1, 1, 1, 1};  ///< ne[0] is the row length, ne[1] the row count
  uint64_t data_offset = 0;  ///< offset of the first byte from the start of the file (already aligned)
  uint64_t bytes = 0;        ///< bytes of data; 0 when the type's size is unknown (size_known is false)
  bool size_known = false;

  /// Set when qgate gates this tensor: a matrix (2-D, or more dims whose ne[2..3] are all 1) of one of
  /// the eight quantized types. Then `od` = ne[1] (rows), `k` = ne[0] (row length, a multiple of the
  /// type's block), and the data is od rows of quant::row_bytes(type, k) bytes, row-major, back to back.
  std::optional<quant::WeightType> weight_type;
  int64_t od = 0;
  int64_t k = 0;
  /// Empty when weight_type is set; otherwise why the tensor is not gated ("type f16 is not one of the
  /// quantized types qgate gates", "1-D tensor (norm or bias), not a matrix", ...).
  std::string skip_reason;

  bool gated() const { return weight_type.has_value(); }
  /// "blk.0.attn_q.weight q4_K 256x256 (od=256 k=256, 36864 bytes at 1056)"-style one-liner.
  std::string describe() const;
};

/// The tensors a list of globs picked, in file order.
struct GgufSelection {
  /// Matched tensors that qgate gates; point into the source's tensors() and live as long as it does.
  std::vector<const GgufTensorEntry*> gemms;
  /// Matched tensors that it does not, each with its reason (the same text as skip_reason).
  std::vector<SkippedTensor> skipped;
};

/// Matches `name` against one glob: '*' is any run of characters (dots included), '?' any one
/// character, everything else itself (case-sensitive). "blk.0.*" matches "blk.0.attn_q.weight" but
/// not "blk.10.attn_q.weight".
bool gguf_glob_match(std::string_view glob, std::string_view name);

/// Splits "a,b , c" into {"a", "b", "c"} (blanks around each trimmed, empty parts dropped).
std::vector<std::string> split_tensor_globs(std::string_view globs);

/// An open GGUF file whose header has been read and checked. The tensor data is not loaded: read()
/// preads one tensor's bytes when asked, so a model of many gigabytes costs only its header in memory.
/// Movable, not copyable; const member functions may be called from several threads at once.
class GgufTensorSource {
 public:
  /// Opens `path` and reads its header (read_gguf_header: bounded, never trusts the file). Fails with a
  /// message naming the path when the header is malformed, when a tensor's row length is not a multiple
  /// of its type's block, or when a tensor of known size lies past the end of the file (a truncated
  /// download: the message names the tensor, its byte range and the file's size). Tensors of types
  /// qgate does not gate, or of ids whose size is unknown, do not fail the open: they are listed with
  /// their skip_reason.
  static std::optional<GgufTensorSource> open(const std::string& path, std::string* error = nullptr,
                                              const GgufLimits& limits = {});

  GgufTensorSource(GgufTensorSource&& other) noexcept;
  GgufTensorSource& operator=(GgufTensorSource&& other) noexcept;
  GgufTensorSource(const GgufTensorSource&) = delete;
  GgufTensorSource& operator=(const GgufTensorSource&) = delete;
  ~GgufTensorSource();

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
  const GgufHeader& header() const { return header_; }
  /// Every tensor, in the file's order.
  std::span<const GgufTensorEntry> tensors() const { return tensors_; }
  /// Null when the file has no tensor of that name.
  const GgufTensorEntry* find(std::string_view name) const;

  /// Picks the tensors whose names match any of the comma-separated globs in `globs` ("blk.0.*",
  /// "blk.0.*,output.weight"; "*" is every tensor). Fails, with a message that quotes the glob and
  /// shows a few of the file's tensor names, when the list is empty or any one glob matches no tensor
  /// (a typo should not silently shrink a parity run). Succeeding with `gemms` empty is possible (every
  /// match skipped); the caller decides whether that is an error.
  std::optional<GgufSelection> select(std::string_view globs, std::string* error = nullptr) const;

  /// Reads the tensor's stored bytes, exactly entry.bytes of them. Fails (never throws) when the type's
  /// size is unknown, when the file has shrunk since open, or on an I/O error; `entry` must come from
  /// this source's tensors() or select().
  std::optional<std::vector<uint8_t>> read(const GgufTensorEntry& entry, std::string* error = nullptr) const;
  /// The same, by name.
  std::optional<std::vector<uint8_t>> read(std::string_view name, std::string* error = nullptr) const;

  /// A human-readable listing for a CLI: the file, its alignment, then one line per tensor (or per
  /// tensor of `selection`, gated then skipped) with type, shape, od x k, bytes and offset or the skip
  /// reason.
  std::string describe(const GgufSelection* selection = nullptr) const;

 private:
  GgufTensorSource() = default;

  std::string path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  GgufHeader header_;
  std::vector<GgufTensorEntry> tensors_;
};

}  // namespace qgate::profiles
