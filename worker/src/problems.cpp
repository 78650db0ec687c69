// Shapes, type lists and seeded inputs for parity and timing.
#include "qgate/worker/problems.h"

#include <algorithm>
#include <charconv>
#include <random>
#include <thread>

#include "qgate/quant/quantize.h"

namespace qgate::worker {

std::string GemmShape::to_string() const {
  return std::to_string(nt) + "x" + std::to_string(od) + "x" + std::to_string(k);
}

std::optional<GemmShape> parse_shape(std::string_view text, std::string* error) {
  int64_t v[3] = {};
  size_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    size_t end = i < 2 ? text.find('x', pos) : text.size();
    if (end == std::string_view::npos) {
      *error = "shape '" + std::string(text) + "' must be NTxODxK, e.g. 512x4096x4096";
      return std::nullopt;
    }
    std::string_view part = text.substr(pos, end - pos);
    auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v[i]);
    if (ec != std::errc() || ptr != part.data() + part.size() || part.empty()) {
      *error = "shape '" + std::string(text) + "': '" + std::string(part) + "' is not an integer";
      return std::nullopt;
    }
    if (v[i] <= 0) {
      static const char* kNames[3] = {"nt", "od", "k"};
      *error = "shape '" + std::string(text) + "': " + kNames[i] + " must be positive";
      return std::nullopt;
    }
    pos = end + 1;
  }
  return GemmShape{v[0], v[1], v[2]};
}

const std::vector<GemmShape>& standard_shapes() {
  static const std::vector<GemmShape> shapes = {
      {1, 64, 256},    {7, 33, 256},     {64, 64, 512},    {65, 127, 512},
      {127, 65, 512},  {130, 257, 768},  {300, 520, 1024}, {512, 4096, 4096},
  };
  return shapes;
}

const std::vector<GemmShape>& quick_shapes() {
  static const std::vector<GemmShape> shapes(standard_shapes().begin(), standard_shapes().end() - 1);
  return shapes;
}

std::optional<std::vector<quant::WeightType>> parse_types(std::string_view text, std::string* error) {
  std::vector<quant::WeightType> out;
  if (text == "all") {
    auto all = quant::all_types();
    return std::vector<quant::WeightType>(all.begin(), all.end());
  }
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view name = text.substr(pos, end - pos);
    auto type = quant::parse_type(name);
    if (!type) {
      std::string valid;
      for (auto t : quant::all_types()) valid += (valid.empty() ? "" : ", ") + std::string(quant::traits(t).name);
      *error = "unknown weight type '" + std::string(name) + "' (known: " + valid + ", or all)";
      return std::nullopt;
    }
    out.push_back(*type);
    pos = end + 1;
  }
  return out;
}

uint64_t case_seed(uint64_t base_seed, quant::WeightType type, const GemmShape& shape) {
  // splitmix64 over the case's identity: stable across versions and platforms.
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  uint64_t h = mix(base_seed);
  for (uint64_t part : {uint64_t(type), uint64_t(shape.nt), uint64_t(shape.od), uint64_t(shape.k)})
    h = mix(h ^ part);
  return h;
}

std::vector<uint8_t> make_weights(quant::WeightType type, int64_t od, int64_t k, uint64_t seed) {
  const size_t row_bytes = quant::row_bytes(type, k);
  std::vector<uint8_t> out(size_t(od) * row_bytes);
  // Rows are generated and quantized in parallel; each row has its own generator so the
  // result does not depend on the thread count.
  const int threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<float> row(static_cast<size_t>(k));
      for (int64_t r = t; r < od; r += threads) {
        std::mt19937_64 rng(seed ^ (uint64_t(r) * 0x9e3779b97f4a7c15ull));
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        for (auto& v : row) v = dist(rng);
        quant::quantize_row(type, row.data(), out.data() + size_t(r) * row_bytes, k);
      }
    });
  }
  for (auto& th : pool) th.join();
  return out;
}

std::vector<float> make_activations(int64_t nt, int64_t k, uint64_t seed) {
  std::vector<float> x(size_t(nt) * size_t(k));
  std::mt19937_64 rng(seed * 0x2545f4914f6cdd1dull + 1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& v : x) {
    v = dist(rng);
    if (v == 0.0f) v = 0.5f;
  }
  return x;
}

}  // namespace qgate::worker

namespace qgate::worker {

std::string_view to_string(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::random: return "random";
    case ActivationKind::zero: return "zero";
    case ActivationKind::outlier: return "outlier";
    case ActivationKind::tiny: return "tiny";
    case ActivationKind::ties: return "ties";
    case ActivationKind::large: return "large";
  }
  return "random";
}

const std::vector<ActivationKind>& edge_activation_kinds() {
  static const std::vector<ActivationKind> kinds = {ActivationKind::zero, ActivationKind::outlier,
                                                    ActivationKind::tiny, ActivationKind::ties,
                                                    ActivationKind::large};
  return kinds;
}

GemmShape edge_case_shape() { return GemmShape{8, 96, 512}; }

std::vector<float> make_activations(ActivationKind kind, int64_t nt, int64_t k, uint64_t seed) {
  std::vector<float> x = make_activations(nt, k, seed);
  switch (kind) {
    case ActivationKind::random:
      break;
    case ActivationKind::zero:
      std::fill(x.begin(), x.end(), 0.0f);
      break;
    case ActivationKind::outlier:
      // A different position in the first block for each row.
      for (int64_t t = 0; t < nt; ++t) x[size_t(t * k + (5 + t) % std::min<int64_t>(k, 32))] = 1e4f;
      break;
    case ActivationKind::tiny:
      for (float& v : x) v *= 1e-6f;
      break;
    case ActivationKind::large:
      for (float& v : x) v *= 10.0f;
      break;
    case ActivationKind::ties: {
      std::mt19937_64 rng(seed ^ 0x7469657375ull);
      std::uniform_int_distribution<int> n(-127, 126);
      for (size_t g = 0; g + 32 <= x.size(); g += 32) {
        x[g] = (g / 32) % 2 ? -127.0f / 64.0f : 127.0f / 64.0f;
        for (size_t j = 1; j < 32; ++j) x[g + j] = (float(n(rng)) + 0.5f) / 64.0f;
      }
      break;
    }
  }
  return x;
}

}  // namespace qgate::worker
