// qgate_ggml_kept_memory: what a ggml CUDA backend keeps after it is freed, stage by stage.
//
// The leak judge sees ggml keep device and host memory after its first prepare/run/release cycle
// and hold it level after that (docs/ggml.md, "What ggml keeps"). This probe takes the cycle apart
// in one process: the CUDA context, ggml_backend_cuda_init, MMQ/MMVQ and f16 products (MMVF and
// cuBLAS) for each weight type, the backend's release, and a second cycle. After each stage it
// prints one JSON line with the device memory in use (cudaMemGetInfo, so run it on a quiet GPU) and
// the process's resident host memory split into anonymous and file-backed pages.
//
// Run it with CUDA_MODULE_LOADING=LAZY and =EAGER: under EAGER every kernel image is loaded with the
// context, so the difference between the two runs' "kept" is the lazily loaded kernel code.
// --cublas-only measures cuBLAS alone (create a handle, one f16 GEMM, destroy it).
//
// Usage: qgate_ggml_kept_memory [--path mmq|f16|both] [--types q4_0,...] [--cycles N] [--cublas-only]
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cuda.h"
#include "ggml.h"

namespace {

constexpr int64_t kRows = 4096;
constexpr int64_t kCols = 4096;
const int64_t kTokenCounts[] = {1, 512};  // 1: MMVQ / MMVF; 512: MMQ / cuBLAS

struct Options {
  bool mmq = true;
  bool f16 = true;
  int cycles = 2;
  bool cublas_only = false;
  std::vector<ggml_type> types = {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                                  GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
};

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "qgate_ggml_kept_memory: %s\n", message.c_str());
  std::exit(2);
}

void check_cuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) die(std::string(what) + ": " + cudaGetErrorString(status));
}

// kB fields of /proc/self/status, in MiB.
double status_mib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':') {
      return std::strtod(line.c_str() + n + 1, nullptr) / 1024.0;
    }
  }
  return -1;
}

void report(const char* stage, int cycle) {
  size_t free_bytes = 0, total_bytes = 0;
  check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  const char* loading = std::getenv("CUDA_MODULE_LOADING");
  std::printf(
      "{\"stage\":\"%s\",\"cycle\":%d,\"module_loading\":\"%s\",\"device_used_mib\":%.1f,"
      "\"host_rss_anon_mib\":%.1f,\"host_rss_file_mib\":%.1f}\n",
      stage, cycle, loading ? loading : "default", double(total_bytes - free_bytes) / (1 << 20),
      status_mib("RssAnon"), status_mib("RssFile"));
  std::fflush(stdout);
}

ggml_type type_named(const std::string& name) {
  for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
    const char* type_name = ggml_type_name(ggml_type(t));
    if (type_name && name == type_name) return ggml_type(t);
  }
  die("unknown ggml type '" + name + "'");
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--path") {
      const std::string p = value();
      if (p != "mmq" && p != "f16" && p != "both") die("--path must be mmq, f16 or both");
      o.mmq = p != "f16";
      o.f16 = p != "mmq";
    } else if (arg == "--types") {
      o.types.clear();
      std::stringstream list(value());
      std::string name;
      while (std::getline(list, name, ',')) o.types.push_back(type_named(name));
    } else if (arg == "--cycles") {
      o.cycles = std::atoi(value().c_str());
      if (o.cycles < 1) die("--cycles must be at least 1");
    } else if (arg == "--cublas-only") {
      o.cublas_only = true;
    } else {
      die("unknown argument " + arg + " (see the comment at the top of the source)");
    }
  }
  return o;
}

// One y = W x graph per token count on `backend`, computed once; everything is freed on return.
void run_products(ggml_backend_t backend, ggml_type weight_type) {
  ggml_init_params params{};
  params.mem_size = ggml_tensor_overhead() * 8 + ggml_graph_overhead_custom(4, false) * 2;
  params.no_alloc = true;
  ggml_context* ctx = ggml_init(params);
  ggml_tensor* w = ggml_new_tensor_2d(ctx, weight_type, kCols, kRows);
  ggml_tensor* xs[2];
  ggml_tensor* ys[2];
  for (int i = 0; i < 2; ++i) {
    xs[i] = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, kCols, kTokenCounts[i]);
    ys[i] = ggml_mul_mat(ctx, w, xs[i]);
  }
  ggml_backend_buffer_t buffer = ggml_backend_alloc_ctx_tensors(ctx, backend);
  if (!buffer) die("ggml could not allocate the tensors");

  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(size_t(kRows * kCols));
  for (float& v : values) v = normal(rng);
  std::vector<uint8_t> weights(ggml_nbytes(w));
  if (weight_type == GGML_TYPE_F16) {
    ggml_fp32_to_fp16_row(values.data(), reinterpret_cast<ggml_fp16_t*>(weights.data()), kRows * kCols);
  } else {
    ggml_quantize_chunk(weight_type, values.data(), weights.data(), 0, kRows, kCols, nullptr);
  }
  ggml_backend_tensor_set(w, weights.data(), 0, weights.size());
  for (int i = 0; i < 2; ++i) {
    ggml_backend_tensor_set(xs[i], values.data(), 0, ggml_nbytes(xs[i]));
    ggml_cgraph* graph = ggml_new_graph_custom(ctx, 4, false);
    ggml_build_forward_expand(graph, ys[i]);
    if (ggml_backend_graph_compute(backend, graph) != GGML_STATUS_SUCCESS) die("ggml_backend_graph_compute failed");
    ggml_backend_synchronize(backend);
  }
  ggml_backend_buffer_free(buffer);
  ggml_free(ctx);
}

void cublas_alone() {
  cublasHandle_t handle = nullptr;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) die("cublasCreate failed");
  report("cublas_created", 1);
  half *a = nullptr, *b = nullptr, *c = nullptr;
  check_cuda(cudaMalloc(&a, sizeof(half) * kRows * kCols), "cudaMalloc");
  check_cuda(cudaMalloc(&b, sizeof(half) * kCols * 512), "cudaMalloc");
  check_cuda(cudaMalloc(&c, sizeof(half) * kRows * 512), "cudaMalloc");
  const half alpha = __float2half(1.0f), beta = __float2half(0.0f);
  // f16 inputs, f16 compute and output: the cuBLAS call ggml makes for F16 weights at batch > 8.
  if (cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, int(kRows), 512, int(kCols), &alpha, a, CUDA_R_16F, int(kCols),
                   b, CUDA_R_16F, int(kCols), &beta, c, CUDA_R_16F, int(kRows), CUBLAS_COMPUTE_16F,
                   CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
    die("cublasGemmEx failed");
  }
  check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  report("cublas_gemm", 1);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  cublasDestroy(handle);
  report("cublas_destroyed", 1);
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  report("process", 0);
  check_cuda(cudaFree(nullptr), "creating the CUDA context");
  report("context", 0);
  if (options.cublas_only) {
    cublas_alone();
    return 0;
  }
  for (int cycle = 1; cycle <= options.cycles; ++cycle) {
    ggml_backend_t backend = ggml_backend_cuda_init(0);
    if (!backend) die("ggml_backend_cuda_init(0) failed");
    report("backend", cycle);
    if (options.mmq) {
      for (ggml_type type : options.types) run_products(backend, type);
      report("mmq", cycle);
    }
    if (options.f16) {
      run_products(backend, GGML_TYPE_F16);
      report("f16", cycle);
    }
    ggml_backend_free(backend);
    report("released", cycle);
  }
  return 0;
}
