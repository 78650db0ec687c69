// qgate-ggml-mul-mat: times ggml's own MUL_MAT (y = W x, W of a ggml weight type, x f32) on one
// ggml backend at any token count, the way test-backend-ops' perf mode times it (one warm-up, then
// the op repeated inside one graph until about 100 GFLOP, graphs run for at least a second, host
// wall time per op), so that the kernel table can put llama.cpp's kernels beside qgate's at token
// counts test-backend-ops' fixed perf set lacks (2048). Built against a ggml source tree by this
// folder's CMakeLists.txt; qgate's own build never needs ggml.
//
// Usage: qgate-ggml-mul-mat --types q4_0,q4_K,f16 --m 4096 --k 14336 --n 1,8,512,2048
//                           [--backend CUDA0] [--min-seconds 1] [--json-out FILE]
#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Options {
  std::vector<ggml_type> types;
  std::vector<int64_t> ns;
  int64_t m = 4096, k = 14336;
  std::string backend;  // a device name; empty: the first GPU
  double min_seconds = 1.0;
  std::string json_out;
};

struct Row {
  std::string type;
  int64_t m, n, k;
  double us;
  int runs;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= s.size()) {
    const size_t comma = s.find(',', at);
    const std::string item = s.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

ggml_type type_named(const std::string& name) {
  for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
    const char* n = ggml_type_name(static_cast<ggml_type>(t));
    if (n != nullptr && name == n) return static_cast<ggml_type>(t);
  }
  throw std::invalid_argument("unknown ggml type '" + name + "'");
}

int64_t positive(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0' || x <= 0) throw std::invalid_argument(flag + " wants a positive integer, not '" + v + "'");
  return x;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--types") {
      for (const auto& t : split(v)) o.types.push_back(type_named(t));
    } else if (a == "--n") {
      for (const auto& n : split(v)) o.ns.push_back(positive("--n", n));
    } else if (a == "--m") {
      o.m = positive(a, v);
    } else if (a == "--k") {
      o.k = positive(a, v);
    } else if (a == "--backend") {
      o.backend = v;
    } else if (a == "--min-seconds") {
      char* end = nullptr;
      o.min_seconds = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || !(o.min_seconds > 0.0))
        throw std::invalid_argument("--min-seconds wants a positive number of seconds, not '" + v + "'");
    } else if (a == "--json-out") {
      o.json_out = v;
    } else {
      throw std::invalid_argument("unknown option " + a);
    }
  }
  if (o.types.empty() || o.ns.empty()) throw std::invalid_argument("--types and --n are required");
  return o;
}

ggml_backend_t open_backend(const std::string& name) {
  if (name.empty()) return ggml_backend_init_by_type(GGML_BACKEND_DEVICE_TYPE_GPU, nullptr);
  return ggml_backend_init_by_name(name.c_str(), nullptr);
}

// W (k x m of `type`, quantized by ggml from uniform [-1, 1) values) and x (k x n f32, uniform
// [-1, 1)), the inputs test-backend-ops draws.
void fill(ggml_tensor* w, ggml_tensor* x, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int64_t k = w->ne[0], m = w->ne[1];
  std::vector<float> src(static_cast<size_t>(k * m));
  for (float& v : src) v = u(rng);
  std::vector<uint8_t> q(ggml_nbytes(w));
  ggml_quantize_chunk(w->type, src.data(), q.data(), 0, m, k, nullptr);
  ggml_backend_tensor_set(w, q.data(), 0, q.size());
  std::vector<float> xs(static_cast<size_t>(ggml_nelements(x)));
  for (float& v : xs) v = u(rng);
  ggml_backend_tensor_set(x, xs.data(), 0, ggml_nbytes(x));
}

Row time_one(ggml_backend_t backend, ggml_type type, int64_t m, int64_t n, int64_t k, double min_seconds,
             std::mt19937& rng) {
  constexpr size_t kGraphNodes = 8192;
  ggml_init_params params{ggml_tensor_overhead() * 8 + ggml_graph_overhead_custom(kGraphNodes, false), nullptr, true};
  ggml_context* ctx = ggml_init(params);
  if (ctx == nullptr) throw std::runtime_error("ggml_init failed");
  ggml_tensor* w = ggml_new_tensor_2d(ctx, type, k, m);
  ggml_tensor* x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, n);
  ggml_tensor* y = ggml_mul_mat(ctx, w, x);
  ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
  if (buf == nullptr) {
    ggml_free(ctx);
    throw std::runtime_error("could not allocate the tensors on the backend");
  }
  fill(w, x, rng);
  ggml_cgraph* g = ggml_new_graph_custom(ctx, kGraphNodes, false);
  ggml_build_forward_expand(g, y);
  const auto compute = [&] {
    if (ggml_backend_graph_compute(backend, g) != GGML_STATUS_SUCCESS)
      throw std::runtime_error("ggml_backend_graph_compute failed");
  };
  compute();  // warm-up
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const int per_graph = static_cast<int>(std::min<double>(static_cast<double>(kGraphNodes - 1), 100e9 / flops)) + 1;
  for (int i = 1; i < per_graph; ++i) ggml_graph_add_node(g, y);
  int64_t total_us = 0;
  int runs = 0;
  do {
    const int64_t t0 = ggml_time_us();
    compute();
    total_us += ggml_time_us() - t0;
    runs += per_graph;
  } while (static_cast<double>(total_us) < min_seconds * 1e6);
  ggml_backend_buffer_free(buf);
  ggml_free(ctx);
  return Row{ggml_type_name(type), m, n, k, static_cast<double>(total_us) / runs, runs};
}

void write_json(const std::string& path, const std::string& device, const std::vector<Row>& rows) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("cannot write " + path);
  std::fprintf(f, "{\n  \"ggml_commit\": \"%s\",\n  \"backend\": \"%s\",\n  \"op\": \"MUL_MAT\",\n  \"rows\": [\n",
               ggml_commit(), device.c_str());
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::fprintf(f, "    {\"type\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"us\": %.3f, \"runs\": %d}%s\n",
                 r.type.c_str(), static_cast<long long>(r.m), static_cast<long long>(r.n), static_cast<long long>(r.k),
                 r.us, r.runs, i + 1 < rows.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qgate-ggml-mul-mat: %s\n", e.what());
    return 2;
  }
  ggml_time_init();
  ggml_backend_t backend = open_backend(o.backend);
  if (backend == nullptr) {
    std::fprintf(stderr, "qgate-ggml-mul-mat: no ggml backend %s\n", o.backend.empty() ? "of a GPU" : o.backend.c_str());
    return 1;
  }
  const std::string device = ggml_backend_name(backend);
  std::printf("# ggml %s, backend %s, MUL_MAT m=%lld k=%lld\n", ggml_commit(), device.c_str(),
              static_cast<long long>(o.m), static_cast<long long>(o.k));
  std::printf("%-6s %6s %12s %8s\n", "type", "n", "us/run", "runs");
  std::vector<Row> rows;
  std::mt19937 rng(20261202u);
  int rc = 0;
  for (ggml_type t : o.types) {
    for (int64_t n : o.ns) {
      try {
        const Row r = time_one(backend, t, o.m, n, o.k, o.min_seconds, rng);
        std::printf("%-6s %6lld %12.2f %8d\n", r.type.c_str(), static_cast<long long>(n), r.us, r.runs);
        std::fflush(stdout);
        rows.push_back(r);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "qgate-ggml-mul-mat: %s n=%lld: %s\n", ggml_type_name(t), static_cast<long long>(n), e.what());
        rc = 1;
      }
    }
  }
  ggml_backend_free(backend);
  if (!o.json_out.empty()) {
    try {
      write_json(o.json_out, device, rows);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "qgate-ggml-mul-mat: %s\n", e.what());
      rc = 1;
    }
  }
  return rc;
}
