// qgate-slow: a test kernel build whose true difference from the reference is known. It forwards
// the whole ABI to libqgate_ref.so (same numerics, bit-identical outputs) and makes every
// qgate_gemm_run take a calibrated fraction longer: 3% by default, or QGATE_SLOW_FRACTION (a
// number in [0, 1], e.g. 0.03), read once when a context is created; any other value fails
// qgate_context_create with a message.
//   CPU:  the run is synchronous; it is timed on the calling thread's CPU clock and followed by a
//         busy-wait of fraction x that time on the same clock (a busy-wait, not a sleep: sleeps
//         are ~50 us coarse; see run_cpu for why not steady_clock).
//   CUDA: a one-thread kernel that spins on %globaltimer is enqueued on the run's stream before the
//         forwarded kernel. Its length comes from a calibration on the first run of each prepared
//         GEMM and token count (untimed warm-up in every worker mode): the forwarded run is timed
//         with events (L2 evicted first, as for timed runs) and what the spin kernel adds beyond
//         its spin is measured and taken off. No host waits on later runs.
//   QGATE_SLOW_VERBOSE (set to anything) prints each calibration to stderr.
//   Without CUDA compiled in, CUDA contexts are refused (QGATE_ERR_UNSUPPORTED) rather than
//   forwarded: a "slow" build that silently ran at full speed would give a wrong known difference.
// libqgate_ref.so is looked for beside this file (and one folder up), then by plain name
// (LD_LIBRARY_PATH: qgated runs uploads from its artifact store, where nothing lies beside them),
// then at the compile-time QGATE_REF_LIBRARY_PATH.
#include <dlfcn.h>
#include <time.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <string>
#include <vector>

#include "qgate/kernel_abi.h"
#include "qgate/kernel_abi_table.h"
#include "qgate/kernel_abi_support.h"
#include "slow_device.h"

namespace {

constexpr double kDefaultFraction = 0.03;
constexpr const char* kFractionVariable = "QGATE_SLOW_FRACTION";

struct RefAbi : qgate::abi::EntryPoints {
  void* handle = nullptr;
  std::string load_error;
  bool ok() const { return handle != nullptr; }
};

std::string own_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_folder), &info) == 0 || !info.dli_fname) return "";
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

const RefAbi& ref() {
  static const RefAbi abi = [] {
    RefAbi a;
    std::vector<std::string> candidates;
    if (const std::string folder = own_folder(); !folder.empty()) {
      candidates.push_back(folder + "/libqgate_ref.so");
      candidates.push_back(folder + "/../libqgate_ref.so");
    }
    candidates.push_back("libqgate_ref.so");
#ifdef QGATE_REF_LIBRARY_PATH
    candidates.push_back(QGATE_REF_LIBRARY_PATH);
#endif
    std::string tried;
    for (const auto& c : candidates) {
      if (void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) {
        // Only a real reference counts, never this file under another name.
        if (dlsym(h, "qgate_gemm_run") != reinterpret_cast<void*>(&qgate_gemm_run)) {
          a.handle = h;
          break;
        }
        dlclose(h);
      }
      tried += (tried.empty() ? "" : ", ") + c;
    }
    if (!a.handle) {
      a.load_error = "qgate-slow: cannot load libqgate_ref.so (tried " + tried + ")";
      std::fprintf(stderr, "%s\n", a.load_error.c_str());
      return a;
    }
    if (const std::string missing = qgate::abi::bind_entry_points(a.handle, &a); !missing.empty()) {
      a.load_error = "qgate-slow: libqgate_ref.so does not export " + missing;
      std::fprintf(stderr, "%s\n", a.load_error.c_str());
      dlclose(a.handle);
      a.handle = nullptr;
    }
    return a;
  }();
  return abi;
}

/// QGATE_SLOW_FRACTION: unset or empty gives the default; otherwise a whole decimal number in [0, 1].
bool fraction_from_env(double* fraction, std::string* error) {
  const char* text = std::getenv(kFractionVariable);
  if (!text || !*text) {
    *fraction = kDefaultFraction;
    return true;
  }
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(value) || value < 0.0 || value > 1.0) {
    *error = std::string("qgate-slow: ") + kFractionVariable + "='" + text +
             "' is not a fraction in [0, 1] (e.g. 0.03 for 3% slower)";
    return false;
  }
  *fraction = value;
  return true;
}

/// "3.0%", or more digits when one decimal would round the fraction.
std::string percent_text(double fraction) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f%%", fraction * 100.0);
  if (std::fabs(std::strtod(buf, nullptr) - fraction * 100.0) > 1e-9)
    std::snprintf(buf, sizeof buf, "%.6g%%", fraction * 100.0);
  return buf;
}

using qgate::abi::write_error;

}  // namespace

// The handles this build gives out wrap the reference's.
struct SlowContext {
  qgate_context* ref = nullptr;
  int32_t backend = QGATE_BACKEND_CPU;
  double fraction = kDefaultFraction;
  qgate_slow::DeviceState* device = nullptr;  // CUDA contexts only
  std::string own_error;                      // a failure of this build's own, not the reference's
  bool own_error_is_last = false;
};

struct SlowGemm {
  SlowContext* ctx = nullptr;
  qgate_gemm* ref = nullptr;
  std::map<int64_t, qgate_slow::Calibration> calibrations;  // by token count, CUDA only
};

namespace {

SlowContext* wrap(qgate_context* c) { return reinterpret_cast<SlowContext*>(c); }
const SlowContext* wrap(const qgate_context* c) { return reinterpret_cast<const SlowContext*>(c); }
SlowGemm* wrap(qgate_gemm* g) { return reinterpret_cast<SlowGemm*>(g); }
const SlowGemm* wrap(const qgate_gemm* g) { return reinterpret_cast<const SlowGemm*>(g); }

qgate_status own_failure(SlowContext* ctx, qgate_status status, std::string message) {
  ctx->own_error = std::move(message);
  ctx->own_error_is_last = true;
  return status;
}

/// Nanoseconds this thread has spent on a CPU.
int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

qgate_status run_cpu(SlowGemm* g, const float* x, int64_t nt, float* y, void* stream) {
  // Timed and spun on this thread's CPU clock: the calling thread works through the whole run (the
  // reference's parallel loop hands it ranges like any other thread), so on a quiet machine its CPU
  // time is the run's steady_clock time; on a busy one, time the scheduler gives to others counts
  // neither in the run nor in the spin, so the spin's wall time is on average fraction x the run's.
  // A spin on the wall clock instead overshoots whenever its deadline passes while the thread is
  // descheduled: 2 to 6 points too slow on 3% and 10% targets, measured on a loaded 2-core machine.
  // With several threads the calling thread's CPU time misses its wait for the last chunk, so the
  // slowdown comes out slightly under the fraction there.
  const int64_t t0 = thread_cpu_ns();
  const qgate_status status = ref().gemm_run(g->ref, x, nt, y, stream);
  const int64_t t1 = thread_cpu_ns();
  if (status != QGATE_OK || g->ctx->fraction <= 0.0) return status;
  const int64_t until = t1 + int64_t(std::llround(double(t1 - t0) * g->ctx->fraction));
  while (thread_cpu_ns() < until) {
  }
  return status;
}

qgate_status run_cuda(SlowGemm* g, const float* x, int64_t nt, float* y, void* stream) {
  SlowContext* ctx = g->ctx;
  if (ctx->fraction <= 0.0) return ref().gemm_run(g->ref, x, nt, y, stream);
  auto found = g->calibrations.find(nt);
  if (found == g->calibrations.end()) {
    // First run of this GEMM at this token count: calibrate (host-synchronous, untimed warm-up).
    qgate_status status = QGATE_OK;
    auto forward = [&] {
      status = ref().gemm_run(g->ref, x, nt, y, stream);
      return status == QGATE_OK;
    };
    qgate_slow::Calibration c;
    std::string error;
    if (!qgate_slow::device_calibrate(ctx->device, stream, ctx->fraction, forward, &c, &error)) {
      if (status != QGATE_OK) return status;  // the reference's own failure, with its message
      return own_failure(ctx, QGATE_ERR_BACKEND, error);
    }
    g->calibrations.emplace(nt, c);
    if (std::getenv("QGATE_SLOW_VERBOSE"))
      std::fprintf(stderr, "qgate-slow: nt=%lld forwarded %.1f us, spin kernel overhead %.2f us, spin %.2f us%s\n",
                   static_cast<long long>(nt), c.forward_ns / 1e3, c.overhead_ns / 1e3, c.spin_ns / 1e3,
                   c.launch ? "" : " (not launched)");
    return QGATE_OK;  // y holds the forwarded result
  }
  const qgate_slow::Calibration& c = found->second;
  if (c.launch) {
    std::string error;
    if (!qgate_slow::device_spin(stream, uint64_t(std::llround(c.spin_ns)), &error))
      return own_failure(ctx, QGATE_ERR_BACKEND, error);
  }
  return ref().gemm_run(g->ref, x, nt, y, stream);
}

}  // namespace

extern "C" {

QGATE_EXPORT uint32_t qgate_abi_version(void) { return ref().ok() ? ref().abi_version() : 0u; }

QGATE_EXPORT const qgate_build_info* qgate_get_build_info(void) {
  static const std::string version = [] {
    double fraction = 0;
    std::string error;
    const std::string of = ref().ok() ? std::string("qgate-ref ") + ref().build_info()->version : ref().load_error;
    if (!fraction_from_env(&fraction, &error)) return "invalid " + std::string(kFractionVariable) + "; " + of;
    return percent_text(fraction) + " slower than " + of;
  }();
  static const qgate_build_info info = [] {
    qgate_build_info i{QGATE_ABI_VERSION, "qgate-slow", version.c_str(), "", "cpu", ""};
    if (ref().ok()) {
      const qgate_build_info* r = ref().build_info();
      i.abi_version = r->abi_version;
      i.commit = r->commit;
      if (qgate_slow::device_compiled()) {
        i.backends = r->backends;
        i.cuda_archs = r->cuda_archs;
      }
    }
    return i;
  }();
  return &info;
}

/// The reference's numerics: every output is the reference's own.
QGATE_EXPORT const char* qgate_build_numerics(void) { return "qgate"; }

}  // extern "C"

namespace {

qgate_status create_context(const qgate_context_options* options, qgate_context** out, char* error_buf,
                            size_t error_buf_size) {
  if (!out) {
    write_error(error_buf, error_buf_size, "qgate-slow: out is NULL");
    return QGATE_ERR_INVALID_ARGUMENT;
  }
  if (!ref().ok()) {
    write_error(error_buf, error_buf_size, ref().load_error);
    return QGATE_ERR_INTERNAL;
  }
  double fraction = 0;
  std::string error;
  if (!fraction_from_env(&fraction, &error)) {
    write_error(error_buf, error_buf_size, error);
    return QGATE_ERR_INVALID_ARGUMENT;
  }
  qgate_context* ref_ctx = nullptr;
  const qgate_status status = ref().context_create(options, &ref_ctx, error_buf, error_buf_size);
  if (status != QGATE_OK) return status;
  // The reference accepted the options, so they are readable.
  const int32_t backend = options->backend;
  qgate_slow::DeviceState* device = nullptr;
  if (backend == QGATE_BACKEND_CUDA) {
    if (!qgate_slow::device_compiled()) {
      ref().context_destroy(ref_ctx);
      write_error(error_buf, error_buf_size,
                  "qgate-slow was built without CUDA: it cannot slow down CUDA runs, so it refuses them");
      return QGATE_ERR_UNSUPPORTED;
    }
    device = qgate_slow::device_open(options->device, &error);
    if (!device) {
      ref().context_destroy(ref_ctx);
      write_error(error_buf, error_buf_size, error);
      return QGATE_ERR_BACKEND;
    }
  }
  auto* ctx = new (std::nothrow) SlowContext{ref_ctx, backend, fraction, device, {}, false};
  if (!ctx) {
    qgate_slow::device_close(device);
    ref().context_destroy(ref_ctx);
    write_error(error_buf, error_buf_size, "qgate-slow: out of memory");
    return QGATE_ERR_OUT_OF_MEMORY;
  }
  *out = reinterpret_cast<qgate_context*>(ctx);
  return QGATE_OK;
}

}  // namespace

extern "C" {

QGATE_EXPORT qgate_status qgate_context_create(const qgate_context_options* options, qgate_context** out,
                                               char* error_buf, size_t error_buf_size) {
  if (out) *out = nullptr;
  try {
    return create_context(options, out, error_buf, error_buf_size);
  } catch (const std::exception& e) {
    write_error(error_buf, error_buf_size, std::string("qgate-slow: ") + e.what());
    return QGATE_ERR_INTERNAL;
  }
}

QGATE_EXPORT void qgate_context_destroy(qgate_context* c) {
  SlowContext* ctx = wrap(c);
  if (!ctx) return;
  qgate_slow::device_close(ctx->device);
  ref().context_destroy(ctx->ref);
  delete ctx;
}

QGATE_EXPORT int32_t qgate_context_path(const qgate_context* c) {
  const SlowContext* ctx = wrap(c);
  return ctx ? ref().context_path(ctx->ref) : int32_t(QGATE_PATH_FROM_ENV);
}

QGATE_EXPORT const char* qgate_context_last_error(const qgate_context* c) {
  const SlowContext* ctx = wrap(c);
  if (ctx && ctx->own_error_is_last) return ctx->own_error.c_str();
  return ctx ? ref().context_last_error(ctx->ref) : "no context";
}

QGATE_EXPORT qgate_status qgate_gemm_prepare(qgate_context* c, int32_t type, int64_t od, int64_t k,
                                             const void* weight_blocks, int64_t max_nt, qgate_gemm** out) {
  SlowContext* ctx = wrap(c);
  if (out) *out = nullptr;
  if (!ctx) return QGATE_ERR_INVALID_ARGUMENT;
  ctx->own_error_is_last = false;
  qgate_gemm* ref_gemm = nullptr;
  const qgate_status status = ref().gemm_prepare(ctx->ref, type, od, k, weight_blocks, max_nt, out ? &ref_gemm : nullptr);
  if (status != QGATE_OK) return status;
  auto* g = new (std::nothrow) SlowGemm{ctx, ref_gemm, {}};
  if (!g) {
    ref().gemm_release(ref_gemm);
    return own_failure(ctx, QGATE_ERR_OUT_OF_MEMORY, "qgate-slow: out of memory");
  }
  *out = reinterpret_cast<qgate_gemm*>(g);
  return QGATE_OK;
}

QGATE_EXPORT qgate_status qgate_gemm_run(qgate_gemm* gemm, const float* x, int64_t nt, float* y, void* stream) {
  SlowGemm* g = wrap(gemm);
  if (!g) return QGATE_ERR_INVALID_ARGUMENT;
  g->ctx->own_error_is_last = false;
  try {
    return g->ctx->backend == QGATE_BACKEND_CUDA ? run_cuda(g, x, nt, y, stream) : run_cpu(g, x, nt, y, stream);
  } catch (const std::bad_alloc&) {
    return own_failure(g->ctx, QGATE_ERR_OUT_OF_MEMORY, "qgate-slow: out of memory");
  } catch (const std::exception& e) {
    return own_failure(g->ctx, QGATE_ERR_INTERNAL, std::string("qgate-slow: ") + e.what());
  }
}

QGATE_EXPORT int64_t qgate_gemm_resident_bytes(const qgate_gemm* gemm) {
  const SlowGemm* g = wrap(gemm);
  return g ? ref().gemm_resident_bytes(g->ref) : 0;
}

QGATE_EXPORT void qgate_gemm_release(qgate_gemm* gemm) {
  SlowGemm* g = wrap(gemm);
  if (!g) return;
  ref().gemm_release(g->ref);
  delete g;
}

}  // extern "C"
