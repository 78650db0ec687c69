// Writes llama-shaped GGUF models with real quantized tensors for qgate-prefill: a tiny one for CPU
// tests and one of llama-7B's dimensions in llama.cpp's q4_K_M type mix. The weights are seeded and
// shaped so that greedy tokens have a margin (see docs/prefill-engine.md, "Why the tokens are stable").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qgate::prefill {

enum class ModelShape { tiny, llama7b_q4_K_M };
/// "tiny" or "7b-q4_K_M"; empty for anything else.
std::optional<ModelShape> parse_model_shape(std::string_view name);
std::string_view to_string(ModelShape shape);

/// The dimensions of a model to write.
struct ModelSpec {
  ModelShape shape = ModelShape::tiny;
  std::string name;
  int64_t n_embd = 0, n_head = 0, n_head_kv = 0, n_ff = 0, n_vocab = 0, n_layer = 0;
  float rms_eps = 1e-5f;
  uint32_t file_type = 0;   ///< general.file_type (llama_ftype): 15 = MOSTLY_Q4_K_M, 1 = MOSTLY_F16
  uint32_t embd_type = 0;   ///< ggml type of token_embd.weight
};

/// The shape's dimensions with `layers` blocks (layers >= 1).
ModelSpec model_spec(ModelShape shape, int layers);

/// What a tensor's weights are made of (see make_row in model_writer.cpp).
enum class TensorRole { embedding, head, linear, norm };

/// One tensor of the plan: name, ggml type id, dims (ne[0] = row length first), role and gain
/// (the L2 norm of each row of a linear tensor).
struct PlannedTensor {
  std::string name;
  uint32_t type = 0;
  std::vector<uint64_t> ne;
  TensorRole role = TensorRole::linear;
  float gain = 1.0f;
};

/// llama.cpp's use_more_bits(i_layer, n_layers) of llama_tensor_get_type: the layers whose attn_v
/// and ffn_down q4_K_M stores as q6_K.
bool use_more_bits(int layer, int n_layers);

/// The tensors of a model in file order: token_embd, then per block attn_norm, attn_q, attn_k, attn_v,
/// attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down, then output_norm and output.
/// tiny: token_embd f16; the linears cycle through all eight gated types; output q6_K.
/// 7b-q4_K_M: token_embd q4_K; linears q4_K, except attn_v and ffn_down of the use_more_bits layers
/// and output.weight, which are q6_K (llama.cpp's LLAMA_FTYPE_MOSTLY_Q4_K_M choices for llama).
std::vector<PlannedTensor> plan_tensors(const ModelSpec& spec);

/// Writes the model to `path`, streaming one tensor at a time (a 7B-dimension file never sits in
/// memory whole). The same spec and seed give the same bytes. `progress` (optional) hears each
/// tensor's name. Throws std::runtime_error naming the path on an I/O error.
void write_model(const std::string& path, const ModelSpec& spec, uint64_t seed,
                 const std::function<void(const PlannedTensor&)>& progress = {});

}  // namespace qgate::prefill
