// The prefill forward pass: a model's linear layers prepared once in a kernel build, then whole
// prompts run through them, greedy tokens out. The pass (docs/prefill-engine.md):
//
//   x = token_embd[prompt]                                     (host, dequantized)
//   per block:
//     h = rmsnorm(x) * attn_norm
//     q = attn_q(h), k = attn_k(h), v = attn_v(h)               (kernel build)
//     per head: g = sigmoid(q_head . k_kvhead / sqrt(head_dim))  each token attends only to itself:
//     a_head = g * v_kvhead                                      no softmax across tokens, no RoPE
//     x += attn_output(a)                                        (kernel build)
//     h = rmsnorm(x) * ffn_norm
//     x += ffn_down(silu(ffn_gate(h)) * ffn_up(h))               (kernel build)
//   logits = output(rmsnorm(x) * output_norm)                    (kernel build)
//   token[t] = argmax logits[t]
//
// Every linear layer keeps its real shape and cost; the attention is collapsed to each token's own
// value, with q and k feeding only the per-head gate g. Norms, the gate, silu and the residual adds
// run on the host: each block uploads its inputs and downloads its outputs (three round trips).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "qgate/prefill/llama_model.h"
#include "qgate/worker/device_api.h"
#include "qgate/worker/kernel_build.h"

namespace qgate::prefill {

/// What one pass produced.
struct PassResult {
  std::vector<int32_t> tokens;  ///< argmax per prompt position (-1 for a row of NaNs)
  double wall_ns = 0;           ///< the whole pass: uploads, GEMMs, host work, downloads
  double host_ns = 0;           ///< of which the host's norms, gate, silu, residuals and argmax
  /// The smallest and the median of (top logit - second logit) / (standard deviation of the row),
  /// over the prompt: how far the greedy choice is from a tie.
  double min_margin = 0, median_margin = 0;
};

class PrefillEngine {
 public:
  /// Creates a context (path from MINFER_MMQ, as qgate-worker does) and prepares every linear layer
  /// for up to `max_tokens` tokens. Throws PrefillError(run) when the build refuses or fails a call.
  /// `progress` hears one line per prepared layer group.
  PrefillEngine(const LlamaModel& model, const worker::KernelBuild& build, worker::DeviceApi& device,
                int threads, int64_t max_tokens, const std::function<void(const std::string&)>& progress = {});
  ~PrefillEngine();
  PrefillEngine(const PrefillEngine&) = delete;
  PrefillEngine& operator=(const PrefillEngine&) = delete;

  /// True when the context resolved to the MMQ path.
  bool mmq() const;
  /// Bytes the build holds resident for the prepared layers.
  int64_t resident_bytes() const;
  /// One full forward pass over `prompt` (1 <= size <= max_tokens). Throws PrefillError(run) when a
  /// GEMM fails, with the layer and the build's message.
  PassResult forward(const std::vector<int32_t>& prompt);

 private:
  struct Layer;
  void run(Layer& layer, const worker::DeviceBuffer& in, int64_t nt, worker::DeviceBuffer& out);
  void upload(worker::DeviceBuffer& dst, const std::vector<float>& src);
  void download(std::vector<float>& dst, const worker::DeviceBuffer& src, size_t count);

  const LlamaModel& model_;
  worker::DeviceApi& device_;
  int64_t max_tokens_;
  std::unique_ptr<worker::BuildContext> ctx_;
  std::vector<std::unique_ptr<Layer>> layers_;  // 7 per block, then the head
  worker::DeviceBuffer in_, out_[3], logits_;
};

}  // namespace qgate::prefill
