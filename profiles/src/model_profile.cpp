// The built-in model profiles and the arithmetic on a profile (MACs, weight bytes, merging).
#include "qgate/profiles/model_profile.h"

#include <algorithm>
#include <set>

#include <stdexcept>
#include <string>

namespace qgate::profiles {

using quant::WeightType;

int64_t ProfileGemm::macs_per_token() const { return od * k * count; }

uint64_t ProfileGemm::weight_bytes() const {
  return static_cast<uint64_t>(count) * static_cast<uint64_t>(od) * quant::row_bytes(type, k);
}

int64_t ModelProfile::macs_per_token() const {
  int64_t total = 0;
  for (const ProfileGemm& g : gemms) total += g.macs_per_token();
  return total;
}

uint64_t ModelProfile::weight_bytes() const {
  uint64_t total = 0;
  for (const ProfileGemm& g : gemms) total += g.weight_bytes();
  return total;
}

uint64_t ModelProfile::prepared_bytes(int64_t tokens) const {
  uint64_t total = 0;
  int64_t widest = 0;
  std::set<int64_t> ks;
  for (const ProfileGemm& g : gemms) {
    total += uint64_t(g.od) * uint64_t(g.k) * 2;
    widest = std::max(widest, g.od);
    if (ks.insert(g.k).second) total += uint64_t(tokens) * uint64_t(g.k) * 4;
  }
  return total + uint64_t(tokens) * uint64_t(widest) * 4;
}

int64_t ModelProfile::gemm_count() const {
  int64_t total = 0;
  for (const ProfileGemm& g : gemms) total += g.count;
  return total;
}

void ModelProfile::add_gemm(WeightType type, int64_t od, int64_t k, std::string_view role, int32_t count) {
  if (od <= 0 || k <= 0 || count <= 0) {
    throw std::invalid_argument("profile " + name + ": GEMM " + std::string(role) + " needs positive od, k and count");
  }
  for (ProfileGemm& g : gemms) {
    if (g.type == type && g.od == od && g.k == k && g.role == role) {
      g.count += count;
      return;
    }
  }
  gemms.push_back({type, od, k, count, std::string(role)});
}

bool q4_k_m_uses_more_bits(int layer, int n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

namespace {

struct LlamaShape {
  int layers;
  int64_t hidden;
  int64_t kv_dim;  // hidden for multi-head attention, smaller under GQA
  int64_t ffn;
  int64_t vocab;
};

enum class Mix { q4_0, q4_k_m };

// llama.cpp keeps the output head at q6_K for both mixes (it is the most quantization-sensitive
// matrix); token_embd is a row lookup, not a GEMM, so it has no entry.
ModelProfile make_llama(std::string name, std::string description, const LlamaShape& s, Mix mix) {
  ModelProfile p;
  p.name = std::move(name);
  p.description = std::move(description);
  p.default_tokens = 512;
  for (int layer = 0; layer < s.layers; ++layer) {
    const WeightType base = mix == Mix::q4_0 ? WeightType::q4_0 : WeightType::q4_K;
    const WeightType more =
        mix == Mix::q4_k_m && q4_k_m_uses_more_bits(layer, s.layers) ? WeightType::q6_K : base;
    p.add_gemm(base, s.hidden, s.hidden, "attn_q");
    p.add_gemm(base, s.kv_dim, s.hidden, "attn_k");
    p.add_gemm(more, s.kv_dim, s.hidden, "attn_v");
    p.add_gemm(base, s.hidden, s.hidden, "attn_output");
    p.add_gemm(base, s.ffn, s.hidden, "ffn_gate");
    p.add_gemm(base, s.ffn, s.hidden, "ffn_up");
    p.add_gemm(more, s.hidden, s.ffn, "ffn_down");
  }
  p.add_gemm(WeightType::q6_K, s.vocab, s.hidden, "output");
  return p;
}

ModelProfile make_cpu_tiny() {
  ModelProfile p;
  p.name = "cpu-tiny";
  p.description =
      "2 layers, hidden 256, ffn 768, vocab 1024; attn q/k/o q4_0, attn_v and ffn_down q6_K, ffn gate/up q4_K, "
      "q6_K output head. Small enough for a 2-core CPU pass well under a second; tok/s = prompt tokens / summed "
      "GEMM time";
  p.default_tokens = 32;
  constexpr int64_t kHidden = 256, kFfn = 768, kVocab = 1024;
  for (int layer = 0; layer < 2; ++layer) {
    p.add_gemm(WeightType::q4_0, kHidden, kHidden, "attn_q");
    p.add_gemm(WeightType::q4_0, kHidden, kHidden, "attn_k");
    p.add_gemm(WeightType::q6_K, kHidden, kHidden, "attn_v");
    p.add_gemm(WeightType::q4_0, kHidden, kHidden, "attn_output");
    p.add_gemm(WeightType::q4_K, kFfn, kHidden, "ffn_gate");
    p.add_gemm(WeightType::q4_K, kFfn, kHidden, "ffn_up");
    p.add_gemm(WeightType::q6_K, kHidden, kFfn, "ffn_down");
  }
  p.add_gemm(WeightType::q6_K, kVocab, kHidden, "output");
  return p;
}

const std::vector<ModelProfile>& profiles() {
  static const std::vector<ModelProfile> all = {
      make_llama("llama-7b-q4_0",
                 "LLaMA 7B, llama.cpp Q4_0: 32 layers, hidden 4096, ffn 11008, vocab 32000; every layer weight q4_0, "
                 "q6_K output head; tok/s = prompt tokens / summed GEMM time of these linear layers",
                 {32, 4096, 4096, 11008, 32000}, Mix::q4_0),
      make_llama("llama-7b-q4_K_M",
                 "LLaMA 7B, llama.cpp Q4_K_M: q4_K, with q6_K attn_v and ffn_down in the 16 'more bits' layers "
                 "(layer < n/8, >= 7n/8, or (layer - n/8) % 3 == 2), q6_K output head; tok/s = prompt tokens / "
                 "summed GEMM time of these linear layers",
                 {32, 4096, 4096, 11008, 32000}, Mix::q4_k_m),
      make_llama("llama-3-8b-q4_K_M",
                 "Llama 3 8B, llama.cpp Q4_K_M: 32 layers, hidden 4096, GQA kv dim 1024, ffn 14336, vocab 128256; "
                 "q4_K with q6_K attn_v and ffn_down in the 16 'more bits' layers, q6_K output head; tok/s = prompt "
                 "tokens / summed GEMM time of these linear layers",
                 {32, 4096, 1024, 14336, 128256}, Mix::q4_k_m),
      make_cpu_tiny(),
  };
  return all;
}

}  // namespace

std::span<const ModelProfile> builtin_profiles() { return profiles(); }

const ModelProfile* find_builtin_profile(std::string_view name) {
  for (const ModelProfile& p : profiles()) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::vector<std::string> builtin_profile_names() {
  std::vector<std::string> names;
  for (const ModelProfile& p : profiles()) names.push_back(p.name);
  return names;
}

}  // namespace qgate::profiles
