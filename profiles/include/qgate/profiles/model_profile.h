// Model profiles: the list of linear-layer GEMMs of one model at one quantization mix, the thing a
// tok/s figure is measured on (prompt tokens / summed GEMM time of these GEMMs, docs/measurement.md
// "Figures"). Built-in profiles cover the models the gate is judged on plus a tiny CPU one; GGUF
// files give the rest (gguf.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "qgate/common/weight_types.h"

namespace qgate::profiles {

/// One weight matrix shape, run `count` times per pass (once per layer that has it).
struct ProfileGemm {
  quant::WeightType type = quant::WeightType::q4_0;
  int64_t od = 0;     // output rows (ggml ne[1])
  int64_t k = 0;      // reduction length (ggml ne[0]); a multiple of the type's block size
  int32_t count = 1;  // identical (type, od, k, role) GEMMs merged into one entry
  std::string role;   // GGUF's name for it: attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down, output

  /// od * k * count: multiply-accumulates for one token through every copy.
  int64_t macs_per_token() const;
  /// Bytes of the quantized weights of every copy.
  uint64_t weight_bytes() const;
  bool operator==(const ProfileGemm&) const = default;
};

struct ModelProfile {
  std::string name;
  std::string description;
  int64_t default_tokens = 512;  // prompt tokens of one pass when the job does not say
  std::vector<ProfileGemm> gemms;

  int64_t macs_per_token() const;
  uint64_t weight_bytes() const;
  /// What one worker holds once it has prepared this profile for `tokens`, at most: one set of
  /// weights per entry (merged copies are run from the same weights) kept as f16, the most any of
  /// qgate's paths keeps; one f32 activation block per distinct k; one f32 output for the widest.
  uint64_t prepared_bytes(int64_t tokens) const;
  /// GEMMs in one pass, counting every merged copy.
  int64_t gemm_count() const;
  /// Adds a GEMM, merging it into an existing entry with the same (type, od, k, role).
  void add_gemm(quant::WeightType type, int64_t od, int64_t k, std::string_view role, int32_t count = 1);
};

/// llama.cpp's Q4_K_M choice of "more bits" layers for attn_v and ffn_down (q6_K instead of q4_K):
/// layer < n/8, or layer >= 7n/8, or (layer - n/8) % 3 == 2 (integer division). For 32 layers that
/// is layers 0-3, 28-31 and 6, 9, ..., 27: 16 layers.
bool q4_k_m_uses_more_bits(int layer, int n_layers);

/// The built-in profiles, in a fixed order: llama-7b-q4_0, llama-7b-q4_K_M, llama-3-8b-q4_K_M, cpu-tiny.
std::span<const ModelProfile> builtin_profiles();
/// Null when no built-in profile has that name (exact match).
const ModelProfile* find_builtin_profile(std::string_view name);
std::vector<std::string> builtin_profile_names();

}  // namespace qgate::profiles
