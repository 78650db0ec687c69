// Reads and checks a llama GGUF model for qgate-prefill (see llama_model.h).
#include "qgate/prefill/llama_model.h"

#include <cmath>
#include <cstring>
#include <map>

#include "qgate/prefill/prefill_error.h"
#include "qgate/quant/half.h"
#include "qgate/quant/quantize.h"

namespace qgate::prefill {

namespace {

constexpr uint32_t kF32 = 0, kF16 = 1;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw PrefillError(PrefillError::Kind::input, path + ": " + what);
}

int64_t metadata_int(const profiles::GgufHeader& h, const std::string& path, const std::string& key,
                     std::optional<int64_t> fallback = std::nullopt) {
  const profiles::GgufValue* v = h.find(key);
  if (!v) {
    if (fallback) return *fallback;
    fail(path, "metadata key " + key + " is missing");
  }
  using T = profiles::GgufValueType;
  switch (v->type) {
    case T::uint8: case T::uint16: case T::uint32: case T::uint64: return int64_t(v->u);
    case T::int8: case T::int16: case T::int32: case T::int64: return v->i;
    default: fail(path, "metadata key " + key + " is not an integer");
  }
}

const profiles::GgufTensorEntry& need(const profiles::GgufTensorSource& s, const std::string& name) {
  const profiles::GgufTensorEntry* t = s.find(name);
  if (!t) fail(s.path(), "tensor " + name + " is missing (a llama model needs it)");
  return *t;
}

LinearWeight linear(const profiles::GgufTensorSource& s, const std::string& name, int64_t od, int64_t k) {
  const profiles::GgufTensorEntry& t = need(s, name);
  if (!t.gated()) fail(s.path(), "tensor " + name + " cannot run through a kernel build: " + t.skip_reason);
  if (t.od != od || t.k != k)
    fail(s.path(), "tensor " + name + " is " + std::to_string(t.od) + "x" + std::to_string(t.k) +
                       " (od x k), the model's dimensions need " + std::to_string(od) + "x" + std::to_string(k));
  LinearWeight w;
  w.name = name;
  w.entry = &t;
  w.type = *t.weight_type;
  w.od = od;
  w.k = k;
  return w;
}

std::vector<float> to_floats(uint32_t type, const uint8_t* data, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  if (type == kF32) {
    std::memcpy(out.data(), data, size_t(n) * 4);
  } else if (type == kF16) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, data + 2 * i, 2);
      out[size_t(i)] = quant::f16_to_f32(h);
    }
  } else {
    quant::dequantize_row(static_cast<quant::WeightType>(type), data, out.data(), n);
  }
  return out;
}

bool host_readable(const profiles::GgufTensorEntry& t) {
  return t.type == kF32 || t.type == kF16 || quant::is_valid_type_id(int32_t(t.type));
}

std::vector<float> norm(const profiles::GgufTensorSource& s, const std::string& name, int64_t n) {
  const profiles::GgufTensorEntry& t = need(s, name);
  if (t.ne[0] != uint64_t(n) || t.ne[1] != 1 || (t.type != kF32 && t.type != kF16))
    fail(s.path(), "tensor " + name + " must be an f32 or f16 vector of " + std::to_string(n) + ", it is " +
                       t.type_name + " " + std::to_string(t.ne[0]) + "x" + std::to_string(t.ne[1]));
  std::string error;
  auto bytes = s.read(t, &error);
  if (!bytes) fail(s.path(), error);
  return to_floats(t.type, bytes->data(), n);
}

std::string format_params(uint64_t n) {
  char buf[32];
  if (n >= 1000000000ull) std::snprintf(buf, sizeof buf, "%.1fB", double(n) / 1e9);
  else std::snprintf(buf, sizeof buf, "%.1fM", double(n) / 1e6);
  return buf;
}

// llama.cpp's llama_model_ftype_name for the file types qgate's weights can make.
std::string ftype_name(int64_t ftype) {
  static const std::map<int64_t, std::string> names = {
      {0, "all F32"}, {1, "F16"}, {2, "Q4_0"}, {3, "Q4_1"}, {7, "Q8_0"}, {8, "Q5_0"}, {9, "Q5_1"},
      {14, "Q4_K - Small"}, {15, "Q4_K - Medium"}, {16, "Q5_K - Small"}, {17, "Q5_K - Medium"}, {18, "Q6_K"}};
  auto it = names.find(ftype);
  return it == names.end() ? "" : it->second;
}

}  // namespace

LlamaModel LlamaModel::open(const std::string& path) {
  std::string error;
  auto source = profiles::GgufTensorSource::open(path, &error);
  if (!source) throw PrefillError(PrefillError::Kind::input, error.find(path) == std::string::npos ? path + ": " + error : error);
  LlamaModel m(std::move(*source));
  const profiles::GgufTensorSource& s = m.source_;
  const profiles::GgufHeader& h = s.header();
  LlamaConfig& c = m.config_;
  const profiles::GgufValue* arch = h.find("general.architecture");
  if (!arch || arch->type != profiles::GgufValueType::string) fail(path, "metadata key general.architecture is missing");
  c.arch = arch->s;
  const std::string a = c.arch + ".";
  c.n_embd = metadata_int(h, path, a + "embedding_length");
  c.n_layer = metadata_int(h, path, a + "block_count");
  c.n_head = metadata_int(h, path, a + "attention.head_count");
  c.n_head_kv = metadata_int(h, path, a + "attention.head_count_kv", c.n_head);
  if (const profiles::GgufValue* eps = h.find(a + "attention.layer_norm_rms_epsilon"); eps && eps->f > 0) c.rms_eps = float(eps->f);
  if (c.n_embd <= 0 || c.n_layer <= 0 || c.n_head <= 0 || c.n_head_kv <= 0 || c.n_embd % c.n_head != 0 ||
      c.n_head % c.n_head_kv != 0)
    fail(path, "inconsistent dimensions: embedding_length " + std::to_string(c.n_embd) + ", block_count " +
                   std::to_string(c.n_layer) + ", head_count " + std::to_string(c.n_head) + ", head_count_kv " +
                   std::to_string(c.n_head_kv));

  const profiles::GgufTensorEntry& embd = need(s, "token_embd.weight");
  if (embd.ne[0] != uint64_t(c.n_embd) || embd.ne[2] != 1 || embd.ne[3] != 1)
    fail(path, "tensor token_embd.weight has rows of " + std::to_string(embd.ne[0]) + ", embedding_length is " +
                   std::to_string(c.n_embd));
  if (!host_readable(embd)) fail(path, "tensor token_embd.weight is " + embd.type_name + ", which qgate-prefill cannot dequantize");
  c.n_vocab = int64_t(embd.ne[1]);
  m.token_embd_ = &embd;
  auto embd_bytes = s.read(embd, &error);
  if (!embd_bytes) fail(path, error);
  m.token_embd_bytes_ = std::move(*embd_bytes);

  const profiles::GgufTensorEntry& gate0 = need(s, "blk.0.ffn_gate.weight");
  c.n_ff = metadata_int(h, path, a + "feed_forward_length", int64_t(gate0.ne[1]));
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    LlamaBlock blk;
    blk.attn_norm = norm(s, b + "attn_norm.weight", c.n_embd);
    blk.ffn_norm = norm(s, b + "ffn_norm.weight", c.n_embd);
    blk.attn_q = linear(s, b + "attn_q.weight", c.n_embd, c.n_embd);
    blk.attn_k = linear(s, b + "attn_k.weight", c.kv_dim(), c.n_embd);
    blk.attn_v = linear(s, b + "attn_v.weight", c.kv_dim(), c.n_embd);
    blk.attn_output = linear(s, b + "attn_output.weight", c.n_embd, c.n_embd);
    blk.ffn_gate = linear(s, b + "ffn_gate.weight", c.n_ff, c.n_embd);
    blk.ffn_up = linear(s, b + "ffn_up.weight", c.n_ff, c.n_embd);
    blk.ffn_down = linear(s, b + "ffn_down.weight", c.n_embd, c.n_ff);
    m.blocks_.push_back(std::move(blk));
  }
  m.output_norm_ = norm(s, "output_norm.weight", c.n_embd);
  if (s.find("output.weight")) {
    m.output_ = linear(s, "output.weight", c.n_vocab, c.n_embd);
  } else if (embd.gated()) {
    m.output_ = linear(s, "token_embd.weight", c.n_vocab, c.n_embd);
  } else {
    // A tied f16/f32 embedding: the head runs as q8_0 blocks of it.
    LinearWeight& w = m.output_;
    w.name = "token_embd.weight (tied head, as q8_0)";
    w.type = quant::WeightType::q8_0;
    w.od = c.n_vocab;
    w.k = c.n_embd;
    const size_t row_in = size_t(m.token_embd_bytes_.size() / size_t(c.n_vocab));
    const size_t row_out = quant::row_bytes(w.type, w.k);
    w.host_blocks.resize(row_out * size_t(c.n_vocab));
    for (int64_t r = 0; r < c.n_vocab; ++r) {
      const auto x = to_floats(embd.type, m.token_embd_bytes_.data() + size_t(r) * row_in, c.n_embd);
      quant::quantize_row(w.type, x.data(), w.host_blocks.data() + size_t(r) * row_out, w.k);
    }
  }
  return m;
}

std::vector<uint8_t> LlamaModel::read(const LinearWeight& w) const {
  if (!w.entry) return w.host_blocks;
  std::string error;
  auto bytes = source_.read(*w.entry, &error);
  if (!bytes) fail(path(), error);
  return std::move(*bytes);
}

std::vector<float> LlamaModel::embed(const std::vector<int32_t>& tokens) const {
  const int64_t d = config_.n_embd;
  const size_t row = token_embd_bytes_.size() / size_t(config_.n_vocab);
  std::vector<float> x;
  x.reserve(tokens.size() * size_t(d));
  for (int32_t t : tokens) {
    if (t < 0 || t >= config_.n_vocab)
      throw std::out_of_range("token " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(config_.n_vocab));
    const auto r = to_floats(token_embd_->type, token_embd_bytes_.data() + size_t(t) * row, d);
    x.insert(x.end(), r.begin(), r.end());
  }
  return x;
}

uint64_t LlamaModel::size_bytes() const {
  uint64_t n = 0;
  for (const auto& t : source_.tensors()) n += t.bytes;
  return n;
}

uint64_t LlamaModel::n_params() const {
  uint64_t n = 0;
  for (const auto& t : source_.tensors()) n += t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3];
  return n;
}

std::string LlamaModel::description() const {
  std::string type;
  if (const profiles::GgufValue* ft = source_.header().find("general.file_type")) type = ftype_name(ft->u != 0 ? int64_t(ft->u) : ft->i);
  if (type.empty()) {
    std::map<std::string, uint64_t> bytes;
    for (const auto& t : source_.tensors()) bytes[t.type_name] += t.bytes;
    uint64_t best = 0;
    for (const auto& [name, b] : bytes)
      if (b > best) best = b, type = name;
  }
  return config_.arch + " " + format_params(n_params()) + " " + type;
}

}  // namespace qgate::prefill
