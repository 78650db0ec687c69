// Writes qgate-prefill's test models (see model_writer.h): a plan of tensors, seeded weights row by
// row, quantized with llama.cpp's reference quantizer and streamed to the file.
#include "qgate/prefill/model_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "qgate/common/fnv1a.h"
#include "qgate/profiles/gguf.h"
#include "qgate/quant/half.h"
#include "qgate/quant/quantize.h"

namespace qgate::prefill {

namespace {

constexpr uint32_t kF32 = 0, kF16 = 1;
constexpr uint32_t kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14;
constexpr uint32_t kAlignment = 32;  // GGUF's default; the file does not set general.alignment

// Each 16 consecutive weights of a row share a magnitude 2^U, U uniform in [-kLogSpread, kLogSpread]:
// blocks of very different size, as trained weights have around outlier channels. A kernel that
// takes a block's scale from the wrong block is then wrong by up to 2^(2*kLogSpread), not a few
// percent (docs/prefill-engine.md).
constexpr double kLogSpread = 3.0;
constexpr int kMagnitudeGroup = 16;
// Row norm of attn_output and ffn_down: each block adds a perturbation of RMS about a third of the
// residual stream's (the token embedding, RMS 1), so the embedding stays dominant.
constexpr float kResidualGain = 0.5f;
// How far, in standard deviations of a row of logits, the own token's logit is meant to sit above
// the expected largest of the others (docs/prefill-engine.md, "Why the tokens are stable").
constexpr double kHeadMargin = 2.5;

// splitmix64: the one generator, so a file's bytes do not depend on the standard library.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double gaussian() {                                             // Box-Muller
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

Rng row_rng(uint64_t seed, std::string_view tensor, uint64_t row) {
  Rng r{seed ^ common::fnv1a64(tensor)};
  r.state ^= r.next() + row * 0xD1B54A32D192ED03ull;
  r.next();
  return r;
}

void normalize(std::vector<float>& x, double norm) {
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  const double f = ss > 0 ? norm / std::sqrt(ss) : 0.0;
  for (float& v : x) v = float(v * f);
}

void apply_magnitudes(Rng& rng, std::vector<float>& x) {
  for (size_t i = 0; i < x.size(); i += kMagnitudeGroup) {
    const float s = float(std::exp2(kLogSpread * (2.0 * rng.uniform() - 1.0)));
    for (size_t j = i; j < std::min(x.size(), i + kMagnitudeGroup); ++j) x[j] *= s;
  }
}

// The correlation of output row j with token_embd row j. For a hidden state h near embedding t (RMS 1),
// logit t is about rho*sqrt(d) standard deviations of the other logits above their mean; aim for the
// expected maximum of V-1 of them (sqrt(2 ln V)) plus kHeadMargin.
double head_correlation(const ModelSpec& spec) {
  const double target = std::sqrt(2.0 * std::log(double(spec.n_vocab))) + kHeadMargin;
  return std::min(0.95, target / std::sqrt(double(spec.n_embd)));
}

class RowMaker {
 public:
  RowMaker(const ModelSpec& spec, uint64_t seed) : seed_(seed), rho_(head_correlation(spec)) {}

  std::vector<float> row(const PlannedTensor& t, uint64_t r) const {
    const size_t k = size_t(t.ne[0]);
    std::vector<float> x(k);
    Rng rng = row_rng(seed_, t.name, r);
    switch (t.role) {
      case TensorRole::embedding:
        return embedding_row(t.name, r, k);
      case TensorRole::norm:
        for (float& v : x) v = float(1.0 + 0.1 * rng.gaussian());
        return x;
      case TensorRole::head: {
        // rho * e + sqrt(1 - rho^2) * n, with n orthogonal to e and both of norm sqrt(k): the own
        // token's logit is then the same fraction of |h| for every token, not a random draw.
        const std::vector<float> e = embedding_row("token_embd.weight", r, k);
        for (float& v : x) v = float(rng.gaussian());
        double en = 0;
        for (size_t i = 0; i < k; ++i) en += double(e[i]) * x[i];
        for (size_t i = 0; i < k; ++i) x[i] = float(x[i] - en / double(k) * e[i]);
        normalize(x, std::sqrt(double(k)));
        const double other = std::sqrt(1.0 - rho_ * rho_);
        for (size_t i = 0; i < k; ++i) x[i] = float(rho_ * e[i] + other * x[i]);
        normalize(x, t.gain);
        return x;
      }
      case TensorRole::linear:
        for (float& v : x) v = float(rng.gaussian());
        apply_magnitudes(rng, x);
        normalize(x, t.gain);
        return x;
    }
    return x;
  }

 private:
  std::vector<float> embedding_row(std::string_view name, uint64_t r, size_t k) const {
    Rng rng = row_rng(seed_, name, r);
    std::vector<float> x(k);
    for (float& v : x) v = float(rng.gaussian());
    normalize(x, std::sqrt(double(k)));  // RMS 1
    return x;
  }

  uint64_t seed_;
  double rho_;
};

size_t encoded_row_bytes(uint32_t type, size_t k) {
  if (type == kF32) return k * 4;
  if (type == kF16) return k * 2;
  return size_t(quant::row_bytes(static_cast<quant::WeightType>(type), int64_t(k)));
}

/// One row in the file's encoding, written to `out` (encoded_row_bytes of it).
void encode_row(uint32_t type, const std::vector<float>& x, uint8_t* out) {
  if (type == kF32) {
    std::memcpy(out, x.data(), x.size() * 4);
  } else if (type == kF16) {
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t h = quant::f32_to_f16(x[i]);
      std::memcpy(out + 2 * i, &h, 2);
    }
  } else {
    quant::quantize_row(static_cast<quant::WeightType>(type), x.data(), out, int64_t(x.size()),
                        quant::QuantRecipe::ggml);
  }
}

std::vector<profiles::GgufKeyValue> metadata_of(const ModelSpec& spec) {
  using profiles::GgufValue;
  std::vector<profiles::GgufKeyValue> kv = {
      {"general.architecture", GgufValue::of_string("llama")},
      {"general.name", GgufValue::of_string(spec.name)},
      {"llama.context_length", GgufValue::of_uint32(4096)},
      {"llama.embedding_length", GgufValue::of_uint32(uint32_t(spec.n_embd))},
      {"llama.block_count", GgufValue::of_uint32(uint32_t(spec.n_layer))},
      {"llama.feed_forward_length", GgufValue::of_uint32(uint32_t(spec.n_ff))},
      {"llama.rope.dimension_count", GgufValue::of_uint32(uint32_t(spec.n_embd / spec.n_head))},
      {"llama.attention.head_count", GgufValue::of_uint32(uint32_t(spec.n_head))},
      {"llama.attention.head_count_kv", GgufValue::of_uint32(uint32_t(spec.n_head_kv))},
      {"llama.attention.layer_norm_rms_epsilon", GgufValue::of_float32(spec.rms_eps)},
      {"llama.vocab_size", GgufValue::of_uint32(uint32_t(spec.n_vocab))},
  };
  if (spec.file_type != 0) kv.push_back({"general.file_type", GgufValue::of_uint32(spec.file_type)});
  return kv;
}

}  // namespace

std::optional<ModelShape> parse_model_shape(std::string_view name) {
  if (name == "tiny") return ModelShape::tiny;
  if (name == "7b-q4_K_M") return ModelShape::llama7b_q4_K_M;
  return std::nullopt;
}

std::string_view to_string(ModelShape shape) {
  return shape == ModelShape::tiny ? "tiny" : "7b-q4_K_M";
}

ModelSpec model_spec(ModelShape shape, int layers) {
  if (layers < 1) throw std::invalid_argument("a model needs at least one layer, got " + std::to_string(layers));
  ModelSpec s;
  s.shape = shape;
  s.n_layer = layers;
  if (shape == ModelShape::tiny) {
    s.name = "qgate-prefill-tiny";
    s.n_embd = 256, s.n_head = 4, s.n_head_kv = 2, s.n_ff = 512, s.n_vocab = 384;
    s.embd_type = kF16;
  } else {
    s.name = "qgate-prefill-7b-q4_K_M";
    s.n_embd = 4096, s.n_head = 32, s.n_head_kv = 32, s.n_ff = 11008, s.n_vocab = 32000;
    s.file_type = 15;  // LLAMA_FTYPE_MOSTLY_Q4_K_M
    s.embd_type = kQ4_K;
  }
  return s;
}

bool use_more_bits(int layer, int n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

std::vector<PlannedTensor> plan_tensors(const ModelSpec& spec) {
  const uint64_t d = uint64_t(spec.n_embd), ff = uint64_t(spec.n_ff), v = uint64_t(spec.n_vocab);
  const uint64_t kv = uint64_t(spec.n_embd / spec.n_head * spec.n_head_kv);
  // tiny: attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down, alternating per layer,
  // so two layers hold all eight gated types.
  static constexpr uint32_t kTinyMix[2][7] = {{kQ4_K, kQ8_0, kQ5_1, kQ4_0, kQ5_K, kQ5_0, kQ6_K},
                                              {kQ4_1, kQ5_K, kQ6_K, kQ4_K, kQ4_0, kQ8_0, kQ5_1}};
  std::vector<PlannedTensor> out;
  out.push_back({"token_embd.weight", spec.embd_type, {d, v}, TensorRole::embedding, 1.0f});
  const int n = int(spec.n_layer);
  for (int i = 0; i < n; ++i) {
    uint32_t types[7];
    if (spec.shape == ModelShape::tiny) {
      std::copy(std::begin(kTinyMix[i % 2]), std::end(kTinyMix[i % 2]), types);
    } else {
      std::fill(std::begin(types), std::end(types), kQ4_K);
      if (use_more_bits(i, n)) types[2] = types[6] = kQ6_K;
    }
    const std::string b = "blk." + std::to_string(i) + ".";
    out.push_back({b + "attn_norm.weight", kF32, {d}, TensorRole::norm, 1.0f});
    out.push_back({b + "attn_q.weight", types[0], {d, d}, TensorRole::linear, 1.0f});
    out.push_back({b + "attn_k.weight", types[1], {d, kv}, TensorRole::linear, 1.0f});
    out.push_back({b + "attn_v.weight", types[2], {d, kv}, TensorRole::linear, 1.0f});
    out.push_back({b + "attn_output.weight", types[3], {d, d}, TensorRole::linear, kResidualGain});
    out.push_back({b + "ffn_norm.weight", kF32, {d}, TensorRole::norm, 1.0f});
    out.push_back({b + "ffn_gate.weight", types[4], {d, ff}, TensorRole::linear, 1.0f});
    out.push_back({b + "ffn_up.weight", types[5], {d, ff}, TensorRole::linear, 1.0f});
    out.push_back({b + "ffn_down.weight", types[6], {ff, d}, TensorRole::linear, kResidualGain});
  }
  out.push_back({"output_norm.weight", kF32, {d}, TensorRole::norm, 1.0f});
  out.push_back({"output.weight", kQ6_K, {d, v}, TensorRole::head, 1.0f});
  return out;
}

void write_model(const std::string& path, const ModelSpec& spec, uint64_t seed,
                 const std::function<void(const PlannedTensor&)>& progress) {
  const std::vector<PlannedTensor> plan = plan_tensors(spec);
  std::vector<profiles::GgufTensorInfo> infos;
  for (const PlannedTensor& t : plan) {
    profiles::GgufTensorInfo info;
    info.name = t.name;
    info.type = t.type;
    info.n_dims = uint32_t(t.ne.size());
    for (size_t i = 0; i < t.ne.size(); ++i) info.ne[i] = t.ne[i];
    infos.push_back(info);
  }
  const std::vector<profiles::GgufKeyValue> metadata = metadata_of(spec);
  // The header holds every tensor's offset, computed as ggml does (each tensor aligned, in order);
  // the data below is written at exactly those offsets.
  const std::vector<uint8_t> header = profiles::write_gguf_header(infos, metadata);

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  auto pad_to = [&](uint64_t written) {
    static const char zeros[kAlignment] = {};
    const uint64_t aligned = (written + kAlignment - 1) / kAlignment * kAlignment;
    out.write(zeros, std::streamsize(aligned - written));
    return aligned;
  };
  out.write(reinterpret_cast<const char*>(header.data()), std::streamsize(header.size()));
  pad_to(header.size());

  const RowMaker maker(spec, seed);
  // Rows are independent (each has its own seeded generator), so a chunk of rows is made on every
  // core at once, each row into its own slot: the bytes do not depend on the thread count.
  const unsigned workers = std::max(1u, std::thread::hardware_concurrency());
  constexpr uint64_t kChunkRows = 2048;
  std::vector<uint8_t> buffer;
  for (size_t i = 0; i < plan.size(); ++i) {
    const PlannedTensor& t = plan[i];
    if (progress) progress(t);
    const uint64_t rows = t.ne.size() > 1 ? t.ne[1] : 1;
    const size_t row_bytes = encoded_row_bytes(t.type, size_t(t.ne[0]));
    uint64_t written = 0;
    for (uint64_t first = 0; first < rows; first += kChunkRows) {
      const uint64_t count = std::min(kChunkRows, rows - first);
      buffer.assign(count * row_bytes, 0);
      std::vector<std::thread> threads;
      for (unsigned w = 0; w < std::min<uint64_t>(workers, count); ++w)
        threads.emplace_back([&, w] {
          for (uint64_t r = w; r < count; r += workers)
            encode_row(t.type, maker.row(t, first + r), buffer.data() + r * row_bytes);
        });
      for (auto& thread : threads) thread.join();
      out.write(reinterpret_cast<const char*>(buffer.data()), std::streamsize(buffer.size()));
      written += buffer.size();
    }
    if (written != profiles::gguf_tensor_bytes(infos[i]).value_or(0))
      throw std::logic_error("write_model: tensor " + t.name + " came out at " + std::to_string(written) + " bytes");
    pad_to(written);
  }
  out.flush();
  if (!out) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
}

}  // namespace qgate::prefill
