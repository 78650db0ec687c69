// Smoke test of libqgate_ggml.so through dlopen, as qgate-worker loads it: build info and exports,
// the path from MINFER_MMQ, q4_0 and q4_K GEMMs (od=64, k=256, up to 8 tokens) on both paths
// against a double-precision product of weights this file dequantizes itself, argument checks,
// and release/destroy over repeated cycles. With a CUDA build and a GPU it runs the same on CUDA,
// with device pointers on a non-blocking stream and no host wait between runs (what checks the
// stream ordering), and `--bench` times one-token GEMMs there.
//
// Usage: qgate_ggml_adapter_smoke [path/to/libqgate_ggml.so] [--bench]
#include <dlfcn.h>
#include <malloc.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "qgate/kernel_abi.h"
#include "qgate/kernel_abi_table.h"

#if defined(QGATE_GGML_SMOKE_CUDA)
#include <cuda_runtime.h>
#endif

#ifndef QGATE_GGML_LIBRARY
#define QGATE_GGML_LIBRARY "libqgate_ggml.so"
#endif

namespace {

int g_failures = 0;

#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                         \
    }                                                                       \
  } while (0)

// The entry points, bound as qgate-worker binds them (qgate/kernel_abi_table.h).
using Abi = qgate::abi::EntryPoints;

// splitmix64: the same numbers on every platform.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint8_t byte() { return uint8_t(next() >> 56); }
  float uniform_pm1() { return float(double(next() >> 40) / double(1ull << 24) * 2.0 - 1.0); }  // [-1, 1)
  // A positive normal f16 in [2^-9, 2^-6): sane block scales.
  uint16_t scale_f16() {
    const int exponent = -9 + int(next() % 3);
    return uint16_t(((exponent + 15) << 10) | (next() & 0x3FF));
  }
};

double f16_to_double(uint16_t h) {
  const int exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 31) return mantissa ? NAN : sign * INFINITY;
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

void put_f16(uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); }
uint16_t get_f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

// ---- the two block formats, written and dequantized here (not by ggml) ----
struct Format {
  const char* name;
  int32_t type;
  int block_elems;
  int block_bytes;
};
constexpr Format kQ4_0{"q4_0", QGATE_TYPE_Q4_0, 32, 18};   // f16 d, 16 bytes of nibbles
constexpr Format kQ4_K{"q4_K", QGATE_TYPE_Q4_K, 256, 144};  // f16 d, f16 dmin, 12 scale bytes, 128 of nibbles

void random_block(const Format& f, Rng& rng, uint8_t* b) {
  for (int i = 0; i < f.block_bytes; ++i) b[i] = rng.byte();
  put_f16(b, rng.scale_f16());
  if (f.type == QGATE_TYPE_Q4_K) put_f16(b + 2, rng.scale_f16());
}

void dequantize_block(const Format& f, const uint8_t* b, double* out) {
  if (f.type == QGATE_TYPE_Q4_0) {
    const double d = f16_to_double(get_f16(b));
    const uint8_t* qs = b + 2;
    for (int j = 0; j < 16; ++j) {
      out[j] = d * (int(qs[j] & 0xF) - 8);
      out[j + 16] = d * (int(qs[j] >> 4) - 8);
    }
    return;
  }
  const double d = f16_to_double(get_f16(b)), dmin = f16_to_double(get_f16(b + 2));
  const uint8_t* scales = b + 4;
  const uint8_t* qs = b + 16;
  auto scale_min = [&](int j, int* sc, int* m) {  // 6-bit scale and min of sub-block j
    if (j < 4) {
      *sc = scales[j] & 63;
      *m = scales[j + 4] & 63;
    } else {
      *sc = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
      *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
    }
  };
  for (int chunk = 0; chunk < 4; ++chunk) {  // 64 values: two sub-blocks sharing 32 bytes
    int sc0, m0, sc1, m1;
    scale_min(2 * chunk, &sc0, &m0);
    scale_min(2 * chunk + 1, &sc1, &m1);
    const uint8_t* q = qs + 32 * chunk;
    for (int l = 0; l < 32; ++l) {
      out[64 * chunk + l] = d * sc0 * (q[l] & 0xF) - dmin * m0;
      out[64 * chunk + 32 + l] = d * sc1 * (q[l] >> 4) - dmin * m1;
    }
  }
}

struct Problem {
  const Format* format;
  int64_t od, k, max_nt;
  std::vector<uint8_t> blocks;  // od rows of k / block_elems blocks
  std::vector<double> weights;  // od x k, dequantized
  std::vector<float> x;         // max_nt x k
};

Problem make_problem(const Format& f, int64_t od, int64_t k, int64_t max_nt, uint64_t seed) {
  Problem p{&f, od, k, max_nt, {}, {}, {}};
  Rng rng{seed};
  const int64_t blocks_per_row = k / f.block_elems;
  p.blocks.resize(size_t(od * blocks_per_row * f.block_bytes));
  p.weights.resize(size_t(od * k));
  for (int64_t i = 0; i < od * blocks_per_row; ++i) {
    uint8_t* b = p.blocks.data() + i * f.block_bytes;
    random_block(f, rng, b);
    dequantize_block(f, b, p.weights.data() + i * f.block_elems);
  }
  p.x.resize(size_t(max_nt * k));
  for (float& v : p.x) v = rng.uniform_pm1();
  return p;
}

// NMSE of y (nt x od) against the f64 product of x's first nt rows (from `x`) and the weights.
double nmse(const Problem& p, const float* x, const float* y, int64_t nt) {
  double err = 0, ref = 0;
  for (int64_t t = 0; t < nt; ++t)
    for (int64_t o = 0; o < p.od; ++o) {
      double acc = 0;
      for (int64_t i = 0; i < p.k; ++i) acc += double(x[t * p.k + i]) * p.weights[size_t(o * p.k + i)];
      const double diff = double(y[t * p.od + o]) - acc;
      err += diff * diff;
      ref += acc * acc;
    }
  return ref > 0 ? err / ref : INFINITY;
}

const char* path_name(int32_t path) { return path == QGATE_PATH_MMQ ? "mmq" : "f16"; }

qgate_context* make_context(const Abi& abi, int32_t backend, int32_t path, qgate_status* status = nullptr,
                            std::string* message = nullptr) {
  qgate_context_options options{};
  options.struct_size = sizeof(options);
  options.backend = backend;
  options.device = 0;
  options.path = path;
  options.cpu_threads = 0;
  qgate_context* ctx = nullptr;
  char error[256] = "";
  const qgate_status s = abi.context_create(&options, &ctx, error, sizeof(error));
  if (status) *status = s;
  if (message) *message = error;
  return ctx;
}

constexpr double kMaxNmse = 5e-4;
constexpr int64_t kTokenCounts[] = {8, 1, 5};

// CPU: one context per path, both formats, nt = 8, 1, 5 on one prepared GEMM.
void check_cpu(const Abi& abi, const std::vector<Problem>& problems) {
  for (int32_t path : {QGATE_PATH_F16, QGATE_PATH_MMQ}) {
    qgate_status status;
    std::string message;
    qgate_context* ctx = make_context(abi, QGATE_BACKEND_CPU, path, &status, &message);
    CHECK(status == QGATE_OK && ctx);
    if (!ctx) {
      std::fprintf(stderr, "cpu context: %s\n", message.c_str());
      continue;
    }
    CHECK(abi.context_path(ctx) == path);
    for (const Problem& p : problems) {
      qgate_gemm* gemm = nullptr;
      status = abi.gemm_prepare(ctx, p.format->type, p.od, p.k, p.blocks.data(), p.max_nt, &gemm);
      CHECK(status == QGATE_OK && gemm);
      if (!gemm) {
        std::fprintf(stderr, "prepare: %s\n", abi.context_last_error(ctx));
        continue;
      }
      const int64_t resident = abi.gemm_resident_bytes(gemm);
      const int64_t stored = path == QGATE_PATH_MMQ ? int64_t(p.blocks.size()) : p.od * p.k * 2;
      CHECK(resident >= stored);
      std::vector<float> y(size_t(p.max_nt * p.od));
      for (int64_t nt : kTokenCounts) {
        std::fill(y.begin(), y.end(), NAN);
        status = abi.gemm_run(gemm, p.x.data(), nt, y.data(), nullptr);
        CHECK(status == QGATE_OK);
        const double e = nmse(p, p.x.data(), y.data(), nt);
        std::printf("cpu  %-4s %-4s od=%lld k=%lld nt=%lld  nmse=%.3e  resident=%lld B\n", path_name(path),
                    p.format->name, (long long)p.od, (long long)p.k, (long long)nt, e, (long long)resident);
        CHECK(e < kMaxNmse);
        CHECK(nt == p.max_nt || std::isnan(y[size_t(nt * p.od)]));  // nothing past nt rows is written
      }
      // Arguments the ABI refuses.
      CHECK(abi.gemm_run(gemm, p.x.data(), 0, y.data(), nullptr) == QGATE_ERR_INVALID_ARGUMENT);
      CHECK(abi.gemm_run(gemm, p.x.data(), p.max_nt + 1, y.data(), nullptr) == QGATE_ERR_INVALID_ARGUMENT);
      CHECK(abi.gemm_run(gemm, nullptr, 1, y.data(), nullptr) == QGATE_ERR_INVALID_ARGUMENT);
      abi.gemm_release(gemm);
    }
    qgate_gemm* bad = nullptr;
    CHECK(abi.gemm_prepare(ctx, QGATE_TYPE_Q4_K, 4, 128, problems[0].blocks.data(), 1, &bad) ==
          QGATE_ERR_INVALID_ARGUMENT);  // k not a multiple of 256
    std::printf("cpu  %-4s refused: %s\n", path_name(path), abi.context_last_error(ctx));
    CHECK(abi.gemm_prepare(ctx, 9, 4, 256, problems[0].blocks.data(), 1, &bad) == QGATE_ERR_INVALID_ARGUMENT);
    std::printf("cpu  %-4s refused: %s\n", path_name(path), abi.context_last_error(ctx));
    CHECK(bad == nullptr);
    abi.context_destroy(ctx);
  }
}

void check_path_from_env(const Abi& abi) {
  struct Case {
    const char* value;  // nullptr: unset
    qgate_status status;
    int32_t path;
  };
  const Case cases[] = {{nullptr, QGATE_OK, QGATE_PATH_F16},
                        {"0", QGATE_OK, QGATE_PATH_F16},
                        {"1", QGATE_OK, QGATE_PATH_MMQ},
                        {"2", QGATE_ERR_INVALID_ARGUMENT, 0},
                        {"yes", QGATE_ERR_INVALID_ARGUMENT, 0}};
  for (const Case& c : cases) {
    if (c.value) setenv("MINFER_MMQ", c.value, 1);
    else unsetenv("MINFER_MMQ");
    qgate_status status;
    std::string message;
    qgate_context* ctx = make_context(abi, QGATE_BACKEND_CPU, QGATE_PATH_FROM_ENV, &status, &message);
    CHECK(status == c.status);
    if (c.status == QGATE_OK) {
      CHECK(ctx && abi.context_path(ctx) == c.path);
    } else {
      CHECK(!ctx && !message.empty());
      std::printf("env  MINFER_MMQ=%s refused: %s\n", c.value, message.c_str());
    }
    if (ctx) abi.context_destroy(ctx);
  }
  unsetenv("MINFER_MMQ");
}

int64_t rss_anon_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("RssAnon:", 0) == 0) return std::atoll(line.c_str() + 8);
  return -1;
}

// Release and destroy free what prepare and create took: anonymous memory stays level over cycles.
void check_cycles(const Abi& abi, const Problem& p) {
  auto cycle = [&] {
    for (int32_t path : {QGATE_PATH_F16, QGATE_PATH_MMQ}) {
      qgate_context* ctx = make_context(abi, QGATE_BACKEND_CPU, path);
      if (!ctx) {
        ++g_failures;
        return;
      }
      qgate_gemm* gemm = nullptr;
      if (abi.gemm_prepare(ctx, p.format->type, p.od, p.k, p.blocks.data(), p.max_nt, &gemm) == QGATE_OK) {
        std::vector<float> y(size_t(p.max_nt * p.od));
        abi.gemm_run(gemm, p.x.data(), p.max_nt, y.data(), nullptr);
        abi.gemm_release(gemm);
      } else {
        ++g_failures;
      }
      abi.context_destroy(ctx);
    }
  };
  for (int i = 0; i < 3; ++i) cycle();  // warm: arenas, OpenMP threads, ggml's tables
  malloc_trim(0);
  const int64_t before = rss_anon_kib();
  for (int i = 0; i < 50; ++i) cycle();
  malloc_trim(0);
  const int64_t after = rss_anon_kib();
  std::printf("cycle 50 x (create, prepare, run, release, destroy) per path: RssAnon %lld -> %lld KiB\n",
              (long long)before, (long long)after);
  CHECK(before > 0 && after - before < 4096);
}

#if defined(QGATE_GGML_SMOKE_CUDA)
#define CUDA_OK(call)                                                                   \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "CUDA %s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                     \
    }                                                                                   \
  } while (0)

// Device pointers on a non-blocking stream. Two inputs run back to back with asynchronous copies of
// each output to the host and one synchronize at the end: if ggml's stream were not ordered after
// the caller's copy-in, or the caller's copy-out after ggml's graph, the outputs would be stale.
void check_cuda(const Abi& abi, const std::vector<Problem>& problems) {
  for (int32_t path : {QGATE_PATH_F16, QGATE_PATH_MMQ}) {
    qgate_status status;
    std::string message;
    qgate_context* ctx = make_context(abi, QGATE_BACKEND_CUDA, path, &status, &message);
    CHECK(status == QGATE_OK && ctx);
    if (!ctx) {
      std::fprintf(stderr, "cuda context: %s\n", message.c_str());
      continue;
    }
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (const Problem& p : problems) {
      qgate_gemm* gemm = nullptr;
      status = abi.gemm_prepare(ctx, p.format->type, p.od, p.k, p.blocks.data(), p.max_nt, &gemm);
      CHECK(status == QGATE_OK && gemm);
      if (!gemm) {
        std::fprintf(stderr, "prepare: %s\n", abi.context_last_error(ctx));
        continue;
      }
      // A second input: x reversed.
      std::vector<float> x2(p.x.rbegin(), p.x.rend());
      const size_t x_bytes = p.x.size() * sizeof(float), y_bytes = size_t(p.max_nt * p.od) * sizeof(float);
      float *dx1, *dx2, *dy, *hy1, *hy2;
      CUDA_OK(cudaMalloc(&dx1, x_bytes));
      CUDA_OK(cudaMalloc(&dx2, x_bytes));
      CUDA_OK(cudaMalloc(&dy, y_bytes));
      CUDA_OK(cudaMallocHost(&hy1, y_bytes));
      CUDA_OK(cudaMallocHost(&hy2, y_bytes));
      CUDA_OK(cudaMemcpy(dx1, p.x.data(), x_bytes, cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(dx2, x2.data(), x_bytes, cudaMemcpyHostToDevice));
      for (int64_t nt : kTokenCounts) {
        CUDA_OK(cudaMemsetAsync(dy, 0xFF, y_bytes, stream));  // NaN until the GEMM writes it
        CHECK(abi.gemm_run(gemm, dx1, nt, dy, stream) == QGATE_OK);
        CUDA_OK(cudaMemcpyAsync(hy1, dy, y_bytes, cudaMemcpyDeviceToHost, stream));
        CUDA_OK(cudaMemsetAsync(dy, 0xFF, y_bytes, stream));
        CHECK(abi.gemm_run(gemm, dx2, nt, dy, stream) == QGATE_OK);
        CUDA_OK(cudaMemcpyAsync(hy2, dy, y_bytes, cudaMemcpyDeviceToHost, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        const double e1 = nmse(p, p.x.data(), hy1, nt), e2 = nmse(p, x2.data(), hy2, nt);
        std::printf("cuda %-4s %-4s od=%lld k=%lld nt=%lld  nmse=%.3e / %.3e (two inputs, no host wait)\n",
                    path_name(path), p.format->name, (long long)p.od, (long long)p.k, (long long)nt, e1, e2);
        CHECK(e1 < kMaxNmse && e2 < kMaxNmse);
      }
      abi.gemm_release(gemm);
      CUDA_OK(cudaFree(dx1));
      CUDA_OK(cudaFree(dx2));
      CUDA_OK(cudaFree(dy));
      CUDA_OK(cudaFreeHost(hy1));
      CUDA_OK(cudaFreeHost(hy2));
    }
    CUDA_OK(cudaStreamDestroy(stream));
    abi.context_destroy(ctx);
  }
}

// One-token (and 8-token) GEMMs of a 4096 x 4096 layer, timed with events on the caller's stream
// as the worker times them, next to the adapter's two device-to-device copies alone.
void bench_cuda(const Abi& abi) {
  const int64_t od = 4096, k = 4096, max_nt = 8;
  const int reps = 2000;
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreate(&stop));
  float *dx, *dy, *sx, *sy;
  CUDA_OK(cudaMalloc(&dx, size_t(max_nt * k) * 4));
  CUDA_OK(cudaMalloc(&dy, size_t(max_nt * od) * 4));
  CUDA_OK(cudaMalloc(&sx, size_t(max_nt * k) * 4));
  CUDA_OK(cudaMalloc(&sy, size_t(max_nt * od) * 4));
  CUDA_OK(cudaMemset(dx, 0, size_t(max_nt * k) * 4));
  auto time_us = [&](auto&& body) {
    for (int i = 0; i < 50; ++i) body();
    CUDA_OK(cudaStreamSynchronize(stream));
    const auto host0 = std::chrono::steady_clock::now();
    CUDA_OK(cudaEventRecord(start, stream));
    for (int i = 0; i < reps; ++i) body();
    CUDA_OK(cudaEventRecord(stop, stream));
    const auto host1 = std::chrono::steady_clock::now();
    CUDA_OK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
    const double host_us = std::chrono::duration<double, std::micro>(host1 - host0).count() / reps;
    return std::make_pair(1000.0 * ms / reps, host_us);
  };
  for (int64_t nt : {int64_t(1), int64_t(8)}) {
    auto copies = time_us([&] {
      cudaMemcpyAsync(sx, dx, size_t(nt * k) * 4, cudaMemcpyDeviceToDevice, stream);
      cudaMemcpyAsync(dy, sy, size_t(nt * od) * 4, cudaMemcpyDeviceToDevice, stream);
    });
    std::printf("bench cuda nt=%lld  two D2D copies alone (%lld + %lld B): %.2f us/call stream, %.2f us host\n",
                (long long)nt, (long long)(nt * k * 4), (long long)(nt * od * 4), copies.first, copies.second);
  }
  for (const Format* f : {&kQ4_0, &kQ4_K}) {
    Problem p = make_problem(*f, od, k, 1, 7);
    for (int32_t path : {QGATE_PATH_MMQ, QGATE_PATH_F16}) {
      qgate_context* ctx = make_context(abi, QGATE_BACKEND_CUDA, path);
      qgate_gemm* gemm = nullptr;
      if (!ctx || abi.gemm_prepare(ctx, f->type, od, k, p.blocks.data(), max_nt, &gemm) != QGATE_OK) {
        ++g_failures;
        continue;
      }
      for (int64_t nt : {int64_t(1), int64_t(8)}) {
        auto run = time_us([&] { abi.gemm_run(gemm, dx, nt, dy, stream); });
        std::printf("bench cuda %-4s %-4s %lldx%lld nt=%lld: %.2f us/call on the caller's stream, %.2f us host\n",
                    path_name(path), f->name, (long long)od, (long long)k, (long long)nt, run.first, run.second);
      }
      abi.gemm_release(gemm);
      abi.context_destroy(ctx);
    }
  }
  CUDA_OK(cudaFree(dx));
  CUDA_OK(cudaFree(dy));
  CUDA_OK(cudaFree(sx));
  CUDA_OK(cudaFree(sy));
  CUDA_OK(cudaEventDestroy(start));
  CUDA_OK(cudaEventDestroy(stop));
  CUDA_OK(cudaStreamDestroy(stream));
}
#endif  // QGATE_GGML_SMOKE_CUDA

}  // namespace

int main(int argc, char** argv) {
  const char* library = QGATE_GGML_LIBRARY;
  bool bench = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--bench") == 0) bench = true;
    else library = argv[i];
  }
  void* handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::fprintf(stderr, "dlopen %s: %s\n", library, dlerror());
    return 1;
  }
  Abi abi{};
  const std::string missing = qgate::abi::bind_entry_points(handle, &abi);
  if (!missing.empty()) std::fprintf(stderr, "missing symbols: %s\n", missing.c_str());
  // The adapter declares its numerics per backend: both optional entry points are required here.
  if (!abi.build_numerics) std::fprintf(stderr, "missing symbol %s\n", QGATE_BUILD_NUMERICS_SYMBOL);
  if (!abi.build_numerics_on) std::fprintf(stderr, "missing symbol %s\n", QGATE_BUILD_NUMERICS_ON_SYMBOL);
  const bool ok = missing.empty() && abi.build_numerics && abi.build_numerics_on;
  if (!ok) return 1;
  CHECK(abi.abi_version() == QGATE_ABI_VERSION);
  const qgate_build_info* info = abi.build_info();
  std::printf("build: name=%s version=%s commit=%s backends=%s cuda_archs='%s' numerics=%s (cpu: %s, cuda: %s)\n",
              info->name, info->version, info->commit, info->backends, info->cuda_archs, abi.build_numerics(),
              abi.build_numerics_on(QGATE_BACKEND_CPU), abi.build_numerics_on(QGATE_BACKEND_CUDA));
  CHECK(std::strcmp(info->name, "qgate-ggml") == 0);
  CHECK(std::strcmp(abi.build_numerics_on(QGATE_BACKEND_CPU), "ggml-cpu") == 0);
  CHECK(std::strcmp(abi.build_numerics_on(QGATE_BACKEND_CUDA), "ggml") == 0);
  const bool has_cuda = std::strstr(info->backends, "cuda") != nullptr;
  CHECK(std::strcmp(abi.build_numerics(), has_cuda ? "ggml" : "ggml-cpu") == 0);

  const std::vector<Problem> problems = {make_problem(kQ4_0, 64, 256, 8, 1), make_problem(kQ4_K, 64, 256, 8, 2)};
  check_path_from_env(abi);
  check_cpu(abi, problems);
  check_cycles(abi, problems[1]);

  if (!has_cuda) {
    qgate_status status;
    std::string message;
    CHECK(make_context(abi, QGATE_BACKEND_CUDA, QGATE_PATH_MMQ, &status, &message) == nullptr);
    CHECK(status == QGATE_ERR_UNSUPPORTED);
    std::printf("cuda refused: %s\n", message.c_str());
  }
#if defined(QGATE_GGML_SMOKE_CUDA)
  int devices = 0;
  if (has_cuda && cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    check_cuda(abi, problems);
    if (bench) bench_cuda(abi);
  } else {
    std::printf("cuda: no device, CUDA checks skipped\n");
  }
#endif
  if (g_failures) {
    std::printf("FAILED: %d check(s)\n", g_failures);
    return 1;
  }
  std::printf("OK\n");
  return 0;
}
