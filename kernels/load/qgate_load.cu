// qgate-load: a reproducible GPU co-tenant. It keeps the GPU busy at a chosen duty cycle and
// intensity for a chosen time: during the "on" part of each period it launches back-to-back
// arithmetic kernels over a fraction of the SMs, during the "off" part it sleeps.
//   qgate-load [--device N] [--duty 0.5] [--period-ms 200] [--intensity 1.0] [--seconds 30]
// Users make a co-tenant with it; qgate's GPU checks use it to show what contention does to an A/B.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

// A dependent FMA chain per thread: pure SM work, no memory traffic, about 10 ms per launch on an
// H200 — long enough that the GPU time-slices it against a co-running process, as a real
// co-tenant's GEMMs do.
__global__ void burn(float* sink, int iterations) {
  float a = threadIdx.x * 1e-3f, b = 1.0001f, c = 0.9999f;
  for (int i = 0; i < iterations; ++i) {
    a = fmaf(a, b, c);
    b = fmaf(b, c, a);
  }
  if (a == 12345.678f) sink[blockIdx.x] = b;  // never true; keeps the chain alive
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "qgate-load: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

double arg(int argc, char** argv, const char* name, double fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atof(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--help")) {
      std::printf("usage: qgate-load [--device N] [--duty 0..1] [--period-ms MS] [--intensity 0..1] [--seconds S]\n");
      return 0;
    }
  const int device = int(arg(argc, argv, "--device", 0));
  const double duty = arg(argc, argv, "--duty", 0.5);
  const double period_ms = arg(argc, argv, "--period-ms", 200);
  const double intensity = arg(argc, argv, "--intensity", 1.0);
  const double seconds = arg(argc, argv, "--seconds", 30);
  if (duty < 0 || duty > 1 || intensity <= 0 || intensity > 1 || period_ms <= 0 || seconds <= 0) {
    std::fprintf(stderr, "qgate-load: --duty in [0,1], --intensity in (0,1], --period-ms and --seconds > 0\n");
    return 2;
  }
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp p{};
  check(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
  const int blocks = std::max(1, int(p.multiProcessorCount * 4 * intensity));
  float* sink = nullptr;
  check(cudaMalloc(&sink, sizeof(float) * blocks), "cudaMalloc");
  std::printf("qgate-load: %s, %d blocks (intensity %.2f), duty %.2f of %.0f ms, for %.0f s\n", p.name, blocks,
              intensity, duty, period_ms, seconds);
  std::fflush(stdout);
  using clock = std::chrono::steady_clock;
  const auto end = clock::now() + std::chrono::duration<double>(seconds);
  long launches = 0;
  while (clock::now() < end) {
    const auto period_start = clock::now();
    const auto on_until = period_start + std::chrono::duration<double, std::milli>(period_ms * duty);
    while (clock::now() < on_until) {
      burn<<<blocks, 256>>>(sink, 2000000);
      check(cudaGetLastError(), "launch");
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      ++launches;
    }
    std::this_thread::sleep_until(period_start + std::chrono::duration<double, std::milli>(period_ms));
  }
  cudaFree(sink);
  std::printf("qgate-load: done, %ld launches\n", launches);
  return 0;
}
