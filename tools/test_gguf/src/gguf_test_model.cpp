// Test support: small llama-shaped GGUF files with real quantized tensor data (see the header).
#include "qgate/testing/gguf_test_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>

#include "qgate/quant/block_formats.h"
#include "qgate/quant/half.h"
#include "qgate/quant/quantize.h"

namespace qgate::profiles::testing {

namespace {

GgufTensorInfo info_of(const GgufTestTensor& t) {
  if (t.ne.empty() || t.ne.size() > static_cast<size_t>(kGgufMaxDims)) {
    throw std::invalid_argument("make_test_gguf: tensor '" + t.name + "' needs 1 to 4 dims");
  }
  GgufTensorInfo info;
  info.name = t.name;
  info.type = t.type;
  info.n_dims = static_cast<uint32_t>(t.ne.size());
  for (size_t d = 0; d < t.ne.size(); ++d) info.ne[d] = t.ne[d];
  return info;
}

// Weights as a model has them: Gaussian, each row with its own scale (so blocks get different scales),
// and an occasional large value (so a block's max is not always near the others').
std::vector<float> weights(std::mt19937_64& rng, uint64_t rows, uint64_t k) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> row_scale(0.005f, 0.05f);
  std::vector<float> x(static_cast<size_t>(rows * k));
  for (uint64_t r = 0; r < rows; ++r) {
    const float s = row_scale(rng);
    for (uint64_t i = 0; i < k; ++i) {
      float v = normal(rng) * s;
      if (rng() % 97 == 0) v *= 8.0f;
      x[static_cast<size_t>(r * k + i)] = v;
    }
  }
  return x;
}

std::vector<uint8_t> tensor_data(const GgufTensorInfo& info, std::mt19937_64& rng, quant::QuantRecipe recipe) {
  const uint64_t k = info.ne[0];
  const uint64_t rows = info.ne[1] * info.ne[2] * info.ne[3];
  if (quant::is_valid_type_id(static_cast<int32_t>(info.type))) {
    const auto type = static_cast<quant::WeightType>(info.type);
    if (k % static_cast<uint64_t>(quant::traits(type).block_elems) != 0) {
      throw std::invalid_argument("make_test_gguf: tensor '" + info.name + "' has row length " + std::to_string(k) +
                                  ", not a multiple of the " + std::string(quant::traits(type).name) + " block");
    }
    const std::vector<float> x = weights(rng, rows, k);
    const size_t row = quant::row_bytes(type, static_cast<int64_t>(k));
    std::vector<uint8_t> out(row * static_cast<size_t>(rows));
    for (uint64_t r = 0; r < rows; ++r) {
      quant::quantize_row(type, x.data() + r * k, out.data() + r * row, static_cast<int64_t>(k), recipe);
    }
    return out;
  }
  if (info.type == kGgmlF32 || info.type == kGgmlF16) {
    const std::vector<float> x = weights(rng, rows, k);
    if (info.type == kGgmlF32) {
      std::vector<uint8_t> out(x.size() * sizeof(float));
      std::memcpy(out.data(), x.data(), out.size());
      return out;
    }
    std::vector<uint8_t> out(x.size() * sizeof(uint16_t));
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t h = quant::f32_to_f16(x[i]);
      std::memcpy(out.data() + i * sizeof(uint16_t), &h, sizeof(uint16_t));
    }
    return out;
  }
  uint64_t bytes = k * rows;  // unknown size: one byte per element
  if (ggml_type_size(info.type)) {
    const std::optional<uint64_t> known = gguf_tensor_bytes(info);
    if (!known) {
      throw std::invalid_argument("make_test_gguf: tensor '" + info.name + "' (" + ggml_type_name(info.type) +
                                  ") has a row length that is not a multiple of its block");
    }
    bytes = *known;
  }
  std::vector<uint8_t> out(static_cast<size_t>(bytes));
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

}  // namespace

std::vector<GgufTestTensor> llama_test_tensors() {
  constexpr uint64_t h = 256, kv = 64, ffn = 512, vocab = 64;
  return {
      {"token_embd.weight", kGgmlF16, {h, vocab}},
      {"blk.0.attn_norm.weight", kGgmlF32, {h}},
      {"blk.0.attn_q.weight", kGgmlQ4_K, {h, h}},
      {"blk.0.attn_k.weight", kGgmlQ8_0, {h, kv}},
      {"blk.0.attn_v.weight", kGgmlQ5_1, {h, kv}},
      {"blk.0.attn_output.weight", kGgmlQ4_0, {h, h}},
      {"blk.0.ffn_norm.weight", kGgmlF32, {h}},
      {"blk.0.ffn_gate.weight", kGgmlQ5_K, {h, ffn}},
      {"blk.0.ffn_up.weight", kGgmlQ5_0, {h, ffn}},
      {"blk.0.ffn_down.weight", kGgmlQ6_K, {ffn, h}},
      {"blk.1.attn_norm.weight", kGgmlF32, {h}},
      {"blk.1.attn_q.weight", kGgmlQ4_1, {h, h}},
      {"blk.1.attn_k.weight", kGgmlQ2_K, {h, kv}},
      {"blk.1.attn_v.weight", kGgmlQ3_K, {h, kv}},
      {"blk.1.attn_output.weight", kGgmlQ4_K, {h, h}},
      {"blk.1.ffn_norm.weight", kGgmlF32, {h}},
      {"blk.1.ffn_gate_exps.weight", kGgmlQ4_K, {h, 128, 4}},
      {"blk.1.ffn_down.weight", kGgmlQ6_K, {ffn, h}},
      {"output_norm.weight", kGgmlF32, {h}},
      {"output.weight", kGgmlQ6_K, {h, vocab}},
  };
}

const std::vector<uint8_t>& GgufTestFile::data_of(std::string_view name) const {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == name) return data[i];
  }
  throw std::out_of_range("no test tensor named '" + std::string(name) + "'");
}

uint64_t GgufTestFile::offset_of(std::string_view name) const {
  for (const GgufTensorInfo& t : tensors) {
    if (t.name == name) return data_offset + t.offset;
  }
  throw std::out_of_range("no test tensor named '" + std::string(name) + "'");
}

GgufTestFile make_test_gguf(std::span<const GgufTestTensor> tensors, const GgufTestOptions& options) {
  GgufTestFile f;
  f.alignment = options.alignment != 0 ? options.alignment : 32;
  std::mt19937_64 rng(options.seed);
  uint32_t blocks = 0;
  for (const GgufTestTensor& t : tensors) {
    f.tensors.push_back(info_of(t));
    f.data.push_back(tensor_data(f.tensors.back(), rng, options.recipe));
    if (t.name.starts_with("blk.")) {
      const uint32_t n = static_cast<uint32_t>(std::strtoul(t.name.c_str() + 4, nullptr, 10));
      blocks = std::max(blocks, n + 1);
    }
  }

  std::vector<GgufKeyValue> metadata = {
      {"general.architecture", GgufValue::of_string("llama")},
      {"general.name", GgufValue::of_string(options.name)},
      {"llama.block_count", GgufValue::of_uint32(blocks)},
      {"tokenizer.ggml.tokens", GgufValue::of_array(GgufValueType::string, {GgufValue::of_string("<s>"),
                                                                            GgufValue::of_string("</s>"),
                                                                            GgufValue::of_string("a")})},
  };
  if (options.alignment != 0) metadata.push_back({"general.alignment", GgufValue::of_uint32(options.alignment)});

  GgufWriteOptions w;
  w.version = options.version;
  w.include_data = true;
  for (const std::vector<uint8_t>& d : f.data) w.tensor_data.emplace_back(d);
  f.bytes = write_gguf_header(f.tensors, metadata, w);

  // The writer computes the offsets; record them as it laid them out.
  const auto header = parse_gguf_header(f.bytes.data(), f.bytes.size());
  if (!header) throw std::logic_error("make_test_gguf: the written file does not parse");
  f.data_offset = header->data_offset;
  for (size_t i = 0; i < f.tensors.size(); ++i) f.tensors[i].offset = header->tensors[i].offset;
  return f;
}

bool write_file(const std::string& path, std::span<const uint8_t> bytes, std::string* error) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    if (error != nullptr) *error = path + ": cannot write " + std::to_string(bytes.size()) + " bytes";
    return false;
  }
  return true;
}

}  // namespace qgate::profiles::testing
