// The prefill forward pass over a kernel build (see prefill_engine.h for the pass itself).
#include "qgate/prefill/prefill_engine.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "qgate/prefill/prefill_error.h"

namespace qgate::prefill {

namespace {

using Clock = std::chrono::steady_clock;

double ns_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
}

// out[t] = x[t] / rms(x[t]) * weight
void rmsnorm(const std::vector<float>& x, const std::vector<float>& weight, float eps, int64_t nt,
             std::vector<float>* out) {
  const size_t d = weight.size();
  out->resize(size_t(nt) * d);
  for (int64_t t = 0; t < nt; ++t) {
    const float* xr = x.data() + size_t(t) * d;
    double ss = 0;
    for (size_t i = 0; i < d; ++i) ss += double(xr[i]) * xr[i];
    const float scale = float(1.0 / std::sqrt(ss / double(d) + eps));
    float* o = out->data() + size_t(t) * d;
    for (size_t i = 0; i < d; ++i) o[i] = xr[i] * scale * weight[i];
  }
}

struct Argmax {
  int32_t token = -1;
  double margin = 0;  // (top - second) / standard deviation of the row
};

Argmax argmax_row(const float* row, int64_t n) {
  Argmax a;
  float top = -std::numeric_limits<float>::infinity(), second = top;
  double sum = 0, sum_sq = 0;
  int64_t finite = 0;
  for (int64_t j = 0; j < n; ++j) {
    const float v = row[j];
    if (std::isnan(v)) continue;
    ++finite;
    sum += v;
    sum_sq += double(v) * v;
    if (a.token < 0 || v > top) {
      second = top;
      top = v;
      a.token = int32_t(j);
    } else if (v > second) {
      second = v;
    }
  }
  if (finite > 1) {
    const double mean = sum / double(finite);
    const double sd = std::sqrt(std::max(0.0, sum_sq / double(finite) - mean * mean));
    a.margin = sd > 0 ? (double(top) - double(second)) / sd : 0.0;
  }
  return a;
}

}  // namespace

struct PrefillEngine::Layer {
  std::string name;
  int64_t od = 0, k = 0;
  std::unique_ptr<worker::PreparedGemm> gemm;
};

PrefillEngine::PrefillEngine(const LlamaModel& model, const worker::KernelBuild& build, worker::DeviceApi& device,
                             int threads, int64_t max_tokens, const std::function<void(const std::string&)>& progress)
    : model_(model), device_(device), max_tokens_(max_tokens) {
  try {
    ctx_ = std::make_unique<worker::BuildContext>(build, device.backend(), device.device_ordinal(),
                                                  QGATE_PATH_FROM_ENV, threads);
  } catch (const std::exception& e) {
    throw PrefillError(PrefillError::Kind::run, build.path() + ": " + e.what());
  }
  auto prepare = [&](const LinearWeight& w) {
    auto layer = std::make_unique<Layer>();
    layer->name = w.name;
    layer->od = w.od;
    layer->k = w.k;
    const std::vector<uint8_t> blocks = model_.read(w);
    layer->gemm = std::make_unique<worker::PreparedGemm>(*ctx_, int32_t(w.type), w.od, w.k, blocks.data(), max_tokens);
    if (!layer->gemm->ok())
      throw PrefillError(PrefillError::Kind::run,
                         build.path() + ": qgate_gemm_prepare of " + w.name + " (" +
                             std::string(quant::traits(w.type).name) + " " + std::to_string(w.od) + "x" +
                             std::to_string(w.k) + ") failed (" + worker::to_string(layer->gemm->status()) +
                             "): " + layer->gemm->message());
    layers_.push_back(std::move(layer));
  };
  const LlamaConfig& c = model.config();
  for (size_t i = 0; i < model.blocks().size(); ++i) {
    const LlamaBlock& b = model.blocks()[i];
    for (const LinearWeight* w : {&b.attn_q, &b.attn_k, &b.attn_v, &b.attn_output, &b.ffn_gate, &b.ffn_up, &b.ffn_down})
      prepare(*w);
    if (progress) progress("prepared block " + std::to_string(i) + " of " + std::to_string(c.n_layer));
  }
  prepare(model.output());
  if (progress) progress("prepared the output head (" + model.output().name + ")");

  const size_t width = size_t(std::max({c.n_embd, c.n_ff, c.kv_dim()}));
  try {
    in_ = worker::DeviceBuffer(device, size_t(max_tokens) * width * sizeof(float));
    for (auto& o : out_) o = worker::DeviceBuffer(device, size_t(max_tokens) * width * sizeof(float));
    logits_ = worker::DeviceBuffer(device, size_t(max_tokens) * size_t(c.n_vocab) * sizeof(float));
  } catch (const worker::DeviceError& e) {
    throw PrefillError(PrefillError::Kind::run, std::string("cannot allocate activations: ") + e.what());
  }
}

PrefillEngine::~PrefillEngine() = default;

bool PrefillEngine::mmq() const { return ctx_->path() == QGATE_PATH_MMQ; }

int64_t PrefillEngine::resident_bytes() const {
  int64_t n = 0;
  for (const auto& l : layers_) n += l->gemm->resident_bytes();
  return n;
}

void PrefillEngine::run(Layer& layer, const worker::DeviceBuffer& in, int64_t nt, worker::DeviceBuffer& out) {
  const qgate_status status = layer.gemm->run(in.as<float>(), nt, out.as<float>(), device_.stream());
  if (status != QGATE_OK)
    throw PrefillError(PrefillError::Kind::run, "qgate_gemm_run of " + layer.name + " failed (" +
                                                    worker::to_string(status) + "): " + layer.gemm->message());
}

void PrefillEngine::upload(worker::DeviceBuffer& dst, const std::vector<float>& src) {
  device_.upload(dst.as<void>(), src.data(), src.size() * sizeof(float));
}

void PrefillEngine::download(std::vector<float>& dst, const worker::DeviceBuffer& src, size_t count) {
  dst.resize(count);
  device_.synchronize();
  device_.download(dst.data(), src.as<void>(), count * sizeof(float));
}

PassResult PrefillEngine::forward(const std::vector<int32_t>& prompt) {
  const LlamaConfig& c = model_.config();
  const int64_t nt = int64_t(prompt.size());
  if (nt < 1 || nt > max_tokens_)
    throw PrefillError(PrefillError::Kind::input, "a prompt of " + std::to_string(nt) + " tokens (1 to " +
                                                      std::to_string(max_tokens_) + " were prepared for)");
  const size_t d = size_t(c.n_embd), n = size_t(nt);
  const int64_t hd = c.head_dim(), group = c.n_head / c.n_head_kv;
  const float inv_sqrt_hd = 1.0f / std::sqrt(float(hd));
  PassResult result;
  const auto t0 = Clock::now();
  auto host = [&](auto&& work) {
    const auto h0 = Clock::now();
    work();
    result.host_ns += ns_since(h0);
  };
  std::vector<float> x, h, q, k, v, a, y, g, u;
  host([&] { x = model_.embed(prompt); });
  try {
    for (size_t bi = 0; bi < model_.blocks().size(); ++bi) {
      const LlamaBlock& b = model_.blocks()[bi];
      Layer& lq = *layers_[bi * 7 + 0];
      Layer& lk = *layers_[bi * 7 + 1];
      Layer& lv = *layers_[bi * 7 + 2];
      Layer& lo = *layers_[bi * 7 + 3];
      Layer& lg = *layers_[bi * 7 + 4];
      Layer& lu = *layers_[bi * 7 + 5];
      Layer& ld = *layers_[bi * 7 + 6];

      host([&] { rmsnorm(x, b.attn_norm, c.rms_eps, nt, &h); });
      upload(in_, h);
      run(lq, in_, nt, out_[0]);
      run(lk, in_, nt, out_[1]);
      run(lv, in_, nt, out_[2]);
      download(q, out_[0], n * d);
      download(k, out_[1], n * size_t(c.kv_dim()));
      download(v, out_[2], n * size_t(c.kv_dim()));
      host([&] {
        a.assign(n * d, 0.0f);
        for (size_t t = 0; t < n; ++t) {
          for (int64_t hq = 0; hq < c.n_head; ++hq) {
            const int64_t hk = hq / group;
            const float* qh = q.data() + t * d + size_t(hq * hd);
            const float* kh = k.data() + t * size_t(c.kv_dim()) + size_t(hk * hd);
            const float* vh = v.data() + t * size_t(c.kv_dim()) + size_t(hk * hd);
            float dot = 0;
            for (int64_t i = 0; i < hd; ++i) dot += qh[i] * kh[i];
            const float gate = 1.0f / (1.0f + std::exp(-dot * inv_sqrt_hd));
            float* ah = a.data() + t * d + size_t(hq * hd);
            for (int64_t i = 0; i < hd; ++i) ah[i] = gate * vh[i];
          }
        }
      });
      upload(in_, a);
      run(lo, in_, nt, out_[0]);
      download(y, out_[0], n * d);
      host([&] {
        for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
        rmsnorm(x, b.ffn_norm, c.rms_eps, nt, &h);
      });
      upload(in_, h);
      run(lg, in_, nt, out_[0]);
      run(lu, in_, nt, out_[1]);
      const size_t ff = n * size_t(c.n_ff);
      download(g, out_[0], ff);
      download(u, out_[1], ff);
      host([&] {
        for (size_t i = 0; i < ff; ++i) g[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
      });
      upload(in_, g);
      run(ld, in_, nt, out_[0]);
      download(y, out_[0], n * d);
      host([&] {
        for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
      });
    }
    host([&] { rmsnorm(x, model_.output_norm(), c.rms_eps, nt, &h); });
    upload(in_, h);
    run(*layers_.back(), in_, nt, logits_);
    std::vector<float> logits;
    download(logits, logits_, n * size_t(c.n_vocab));
    host([&] {
      std::vector<double> margins;
      for (size_t t = 0; t < n; ++t) {
        const Argmax am = argmax_row(logits.data() + t * size_t(c.n_vocab), c.n_vocab);
        result.tokens.push_back(am.token);
        margins.push_back(am.margin);
      }
      std::sort(margins.begin(), margins.end());
      result.min_margin = margins.front();
      result.median_margin = margins[margins.size() / 2];
    });
  } catch (const worker::DeviceError& e) {
    throw PrefillError(PrefillError::Kind::run, std::string("device error during the pass: ") + e.what());
  }
  result.wall_ns = ns_since(t0);
  return result;
}

}  // namespace qgate::prefill
