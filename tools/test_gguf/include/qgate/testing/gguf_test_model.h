// Test support: writes small, valid GGUF v3 files with real tensor data, named and shaped like a
// llama model's, so tests can exercise GgufTensorSource (and a parity run on "real" weights) without
// a multi-gigabyte download. The quantized tensors are made as llama.cpp's quantize tool makes them
// (quantize_row with the ggml recipe, byte for byte), or with qgate's own recipe on request.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qgate/profiles/gguf.h"
#include "qgate/quant/quantize.h"

namespace qgate::profiles::testing {

/// One tensor to write: its name, ggml type id and dims (ne[0] first, the row length).
struct GgufTestTensor {
  std::string name;
  uint32_t type = 0;
  std::vector<uint64_t> ne;
};

/// ggml type ids used by the test models.
inline constexpr uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ4_0 = 2, kGgmlQ4_1 = 3, kGgmlQ5_0 = 6, kGgmlQ5_1 = 7,
                          kGgmlQ8_0 = 8, kGgmlQ2_K = 10, kGgmlQ3_K = 11, kGgmlQ4_K = 12, kGgmlQ5_K = 13,
                          kGgmlQ6_K = 14;

/// A two-block llama-shaped model, hidden size 256, 64-token vocabulary, about 0.6 MB:
///   token_embd.weight f16 256x64, output_norm.weight f32 256, output.weight q6_K 256x64;
///   blk.0: attn_norm f32, attn_q q4_K 256x256, attn_k q8_0 256x64, attn_v q5_1 256x64,
///          attn_output q4_0 256x256, ffn_norm f32, ffn_gate q5_K 256x512, ffn_up q5_0 256x512,
///          ffn_down q6_K 512x256;
///   blk.1: attn_q q4_1 256x256, attn_k q2_K 256x64, attn_v q3_K 256x64, attn_output q4_K 256x256,
///          ffn_gate_exps q4_K 256x128x4 (stacked experts), ffn_down q6_K 512x256.
/// All eight gated types appear; f32, f16, q2_K, q3_K and a 3-D tensor are there to be skipped.
std::vector<GgufTestTensor> llama_test_tensors();

struct GgufTestOptions {
  /// Written as general.alignment when non-zero; zero leaves the key out (GGUF's default of 32).
  uint32_t alignment = 0;
  uint32_t version = 3;
  /// Seeds the weights, so two files made with the same seed are byte-identical.
  uint64_t seed = 1;
  std::string name = "qgate-test-llama";
  /// How the gated types are quantized: ggml's reference quantizer (what real model files hold) by default.
  quant::QuantRecipe recipe = quant::QuantRecipe::ggml;
};

/// A file made by make_test_gguf, with what was put into it.
struct GgufTestFile {
  std::vector<uint8_t> bytes;                ///< the whole file
  std::vector<GgufTensorInfo> tensors;       ///< as written; `offset` is from the start of the data section
  std::vector<std::vector<uint8_t>> data;    ///< each tensor's bytes, in the order of `tensors`
  uint32_t alignment = 32;
  uint64_t data_offset = 0;                  ///< where the data section starts in `bytes`

  /// The bytes written for the named tensor; throws std::out_of_range for an unknown name.
  const std::vector<uint8_t>& data_of(std::string_view name) const;
  /// Absolute offset of the named tensor's data in `bytes`; throws std::out_of_range.
  uint64_t offset_of(std::string_view name) const;
};

/// Builds a GGUF file holding `tensors`. Their data:
///   - the eight gated types: seeded Gaussian weights (a different scale per row) quantized row by row
///     with quant::quantize_row in options.recipe, i.e. od rows of row_bytes(type, k) bytes;
///   - f32 and f16: the same kind of weights, stored as floats or IEEE halves;
///   - other types of known size (q2_K, q3_K, bf16, ...): seeded random bytes of the right length
///     (qgate has no quantizer for them; any bytes are valid blocks);
///   - type ids of unknown size: one seeded byte per element.
/// Metadata: general.architecture "llama", general.name, llama.block_count, a small tokenizer.ggml.tokens
/// array, and general.alignment when options.alignment is set. Throws std::invalid_argument for a tensor
/// whose row length is not a multiple of its type's block.
GgufTestFile make_test_gguf(std::span<const GgufTestTensor> tensors, const GgufTestOptions& options = {});

/// Writes bytes to path (replacing it). False, with a message, on failure.
bool write_file(const std::string& path, std::span<const uint8_t> bytes, std::string* error = nullptr);

}  // namespace qgate::profiles::testing
