// A llama-architecture GGUF model as qgate-prefill runs it: the hyperparameters from the metadata,
// the linear tensors checked against them, the norms and the token embedding read into host memory.
// Linear weights stay on disk until the engine hands them to the kernel build.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qgate/profiles/gguf_tensors.h"

namespace qgate::prefill {

struct LlamaConfig {
  std::string arch;  ///< general.architecture
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0, n_vocab = 0;
  float rms_eps = 1e-5f;
  int64_t head_dim() const { return n_embd / n_head; }
  int64_t kv_dim() const { return head_dim() * n_head_kv; }
};

/// One linear layer: a gated tensor of the file (od rows of k), or, for a tied head whose embedding
/// is f16/f32, blocks made on the host (see LlamaModel::output).
struct LinearWeight {
  std::string name;
  const profiles::GgufTensorEntry* entry = nullptr;  ///< null for host-made blocks
  quant::WeightType type = quant::WeightType::q8_0;
  int64_t od = 0, k = 0;
  std::vector<uint8_t> host_blocks;                   ///< only when entry is null
};

struct LlamaBlock {
  std::vector<float> attn_norm, ffn_norm;
  LinearWeight attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down;
};

class LlamaModel {
 public:
  /// Opens and checks the file. Throws PrefillError(input) with a message naming the file and the
  /// problem: unreadable or truncated, not llama-shaped, a missing tensor, a wrong shape or type.
  static LlamaModel open(const std::string& path);

  const std::string& path() const { return source_.path(); }
  const profiles::GgufTensorSource& source() const { return source_; }
  const LlamaConfig& config() const { return config_; }
  const std::vector<LlamaBlock>& blocks() const { return blocks_; }
  const std::vector<float>& output_norm() const { return output_norm_; }
  /// output.weight, or token_embd.weight when the file has none (a tied head). A tied f16/f32
  /// embedding is quantized to q8_0 on the host (qgate's recipe), since kernel builds take only the
  /// eight quantized types.
  const LinearWeight& output() const { return output_; }
  /// The stored bytes of a linear weight, ready for qgate_gemm_prepare.
  std::vector<uint8_t> read(const LinearWeight& w) const;

  /// Token embeddings of `tokens`, dequantized: tokens.size() rows of n_embd floats.
  std::vector<float> embed(const std::vector<int32_t>& tokens) const;

  /// Bytes and elements of all tensors (llama-bench's model_size and model_n_params).
  uint64_t size_bytes() const;
  uint64_t n_params() const;
  /// llama-bench's model_type: "llama 0.5B Q4_K - Medium" (general.file_type when known, else the
  /// type holding most bytes).
  std::string description() const;

 private:
  explicit LlamaModel(profiles::GgufTensorSource source) : source_(std::move(source)) {}
  profiles::GgufTensorSource source_;
  LlamaConfig config_;
  std::vector<LlamaBlock> blocks_;
  std::vector<float> output_norm_;
  LinearWeight output_;
  const profiles::GgufTensorEntry* token_embd_ = nullptr;
  std::vector<uint8_t> token_embd_bytes_;
};

}  // namespace qgate::prefill
