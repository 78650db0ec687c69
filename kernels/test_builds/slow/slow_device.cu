// CUDA side of the slow build (see slow_device.h): the %globaltimer spin kernel, enqueued before
// the forwarded GEMM, and its calibration on a GEMM's first (warm-up) run.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "slow_device.h"

namespace qgate_slow {

struct DeviceState {
  int device = 0;
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  void* flush = nullptr;  // 2x the L2 size, written before each calibration run (cold L2, as timed)
  size_t flush_bytes = 0;
  int flush_value = 0;
};

namespace {

// Calibration: forwarded runs alone first, then rounds of pairs (alone, after a spin) in
// alternating order.
constexpr int kAloneRuns = 3;
constexpr int kRounds = 2;
constexpr int kPairs = 6;

__global__ void spin_on_globaltimer(unsigned long long ns) {
  unsigned long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

bool check(cudaError_t e, const char* what, std::string* error) {
  if (e == cudaSuccess) return true;
  *error = std::string("qgate-slow: ") + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  return false;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

bool device_compiled() { return true; }

DeviceState* device_open(int device, std::string* error) {
  auto* s = new DeviceState;
  s->device = device;
  int l2 = 0;
  if (!check(cudaSetDevice(device), "cudaSetDevice", error) ||
      !check(cudaEventCreate(&s->start), "cudaEventCreate", error) ||
      !check(cudaEventCreate(&s->stop), "cudaEventCreate", error) ||
      !check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "cudaDeviceGetAttribute", error)) {
    device_close(s);
    return nullptr;
  }
  s->flush_bytes = size_t(l2 > 0 ? l2 : (64 << 20)) * 2;
  return s;
}

void device_close(DeviceState* s) {
  if (!s) return;
  if (s->flush) cudaFree(s->flush);
  if (s->start) cudaEventDestroy(s->start);
  if (s->stop) cudaEventDestroy(s->stop);
  delete s;
}

bool device_spin(void* stream, uint64_t ns, std::string* error) {
  spin_on_globaltimer<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<unsigned long long>(ns));
  return check(cudaGetLastError(), "spin kernel launch", error);
}

bool device_calibrate(DeviceState* s, void* stream_ptr, double fraction, const std::function<bool()>& forward,
                      Calibration* out, std::string* error) {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  if (!s->flush && !check(cudaMalloc(&s->flush, s->flush_bytes), "cudaMalloc of the L2 eviction buffer", error))
    return false;
  // One run between two events on the stream, L2 evicted first; with `spin`, after a spin kernel.
  auto timed = [&](bool spin, double spin_ns, double* ns) {
    if (!check(cudaMemsetAsync(s->flush, ++s->flush_value & 0xff, s->flush_bytes, stream), "cudaMemsetAsync", error) ||
        !check(cudaEventRecord(s->start, stream), "cudaEventRecord", error))
      return false;
    if (spin && !device_spin(stream, uint64_t(spin_ns), error)) return false;
    if (!forward()) {
      error->clear();  // the forwarded call's own failure: the caller reports it
      return false;
    }
    float ms = 0;
    if (!check(cudaEventRecord(s->stop, stream), "cudaEventRecord", error) ||
        !check(cudaEventSynchronize(s->stop), "cudaEventSynchronize", error) ||
        !check(cudaEventElapsedTime(&ms, s->start, s->stop), "cudaEventElapsedTime", error))
      return false;
    *ns = double(ms) * 1e6;
    return true;
  };
  std::vector<double> alone;
  for (int i = 0; i < kAloneRuns; ++i) {
    double ns = 0;
    if (!timed(false, 0, &ns)) return false;
    alone.push_back(ns);
  }
  // What a spin of `probe` ns really adds, measured against runs without it: the probe starts at
  // the target and is then moved to the corrected spin, in case what the spin kernel costs is not
  // a constant (a spin shorter than the launch gap it fills is partly hidden).
  double probe = fraction * median(alone);
  double overhead = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<double> added;
    for (int p = 0; p < kPairs; ++p) {
      double without = 0, with = 0;
      const bool spun_first = p % 2 == 1;
      if (spun_first && !timed(true, probe, &with)) return false;
      if (!timed(false, 0, &without)) return false;
      if (!spun_first && !timed(true, probe, &with)) return false;
      alone.push_back(without);
      added.push_back(with - without);
    }
    overhead = median(added) - probe;
    const double next = fraction * median(alone) - overhead;
    if (next <= 0) break;
    probe = next;
  }
  Calibration c;
  c.forward_ns = median(alone);
  c.overhead_ns = overhead;
  const double want = fraction * c.forward_ns;
  if (want >= c.overhead_ns) {
    c.launch = true;
    c.spin_ns = want - c.overhead_ns;
  } else {
    // Even an empty spin kernel overshoots: launch it only when that is nearer the target than nothing.
    c.launch = c.overhead_ns - want < want;
    c.spin_ns = 0;
  }
  *out = c;
  return true;
}

}  // namespace qgate_slow
