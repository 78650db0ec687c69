// A kernel build that misbehaves on purpose, for the daemon's fault tests. It forwards the whole
// ABI to libqgate_ref.so (QGATE_REF_LIBRARY_PATH, since qgated runs uploads from its own artifact
// store) and injects one fault, chosen at compile time with QGATE_FAULT:
//   crash_once  - the first qgate_gemm_run on this machine segfaults (a marker file remembers it),
//                 every later one works: a worker restart and one retry must save the job.
//   crash_run   - every qgate_gemm_run segfaults.
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <string>

#include "qgate/kernel_abi.h"

namespace {

struct RefAbi {
  void* handle = nullptr;
  decltype(&qgate_abi_version) abi_version = nullptr;
  decltype(&qgate_get_build_info) build_info = nullptr;
  decltype(&qgate_context_create) context_create = nullptr;
  decltype(&qgate_context_destroy) context_destroy = nullptr;
  decltype(&qgate_context_path) context_path = nullptr;
  decltype(&qgate_context_last_error) context_last_error = nullptr;
  decltype(&qgate_gemm_prepare) gemm_prepare = nullptr;
  decltype(&qgate_gemm_run) gemm_run = nullptr;
  decltype(&qgate_gemm_resident_bytes) gemm_resident_bytes = nullptr;
  decltype(&qgate_gemm_release) gemm_release = nullptr;
};

const RefAbi& ref() {
  static const RefAbi abi = [] {
    RefAbi a;
    a.handle = dlopen(QGATE_REF_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!a.handle) std::abort();
#define QGATE_BIND(field, symbol) a.field = reinterpret_cast<decltype(a.field)>(dlsym(a.handle, #symbol))
    QGATE_BIND(abi_version, qgate_abi_version);
    QGATE_BIND(build_info, qgate_get_build_info);
    QGATE_BIND(context_create, qgate_context_create);
    QGATE_BIND(context_destroy, qgate_context_destroy);
    QGATE_BIND(context_path, qgate_context_path);
    QGATE_BIND(context_last_error, qgate_context_last_error);
    QGATE_BIND(gemm_prepare, qgate_gemm_prepare);
    QGATE_BIND(gemm_run, qgate_gemm_run);
    QGATE_BIND(gemm_resident_bytes, qgate_gemm_resident_bytes);
    QGATE_BIND(gemm_release, qgate_gemm_release);
#undef QGATE_BIND
    return a;
  }();
  return abi;
}

void inject_run_fault() {
  const std::string fault = QGATE_FAULT;
  if (fault == "crash_run") std::raise(SIGSEGV);
  if (fault == "crash_once") {
    // O_EXCL: exactly one run anywhere creates the marker, and that run crashes.
    const std::string marker = QGATE_FAULT_MARKER;
    const int fd = open(marker.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0600);
    if (fd >= 0) {
      close(fd);
      std::raise(SIGSEGV);
    }
  }
}

}  // namespace

extern "C" {
QGATE_EXPORT uint32_t qgate_abi_version(void) { return ref().abi_version(); }
QGATE_EXPORT const qgate_build_info* qgate_get_build_info(void) {
  static qgate_build_info info = [] {
    qgate_build_info i = *ref().build_info();
    i.name = "qgate-fault-" QGATE_FAULT;
    return i;
  }();
  return &info;
}
QGATE_EXPORT qgate_status qgate_context_create(const qgate_context_options* o, qgate_context** out, char* err,
                                               size_t n) {
  return ref().context_create(o, out, err, n);
}
QGATE_EXPORT void qgate_context_destroy(qgate_context* c) { ref().context_destroy(c); }
QGATE_EXPORT int32_t qgate_context_path(const qgate_context* c) { return ref().context_path(c); }
QGATE_EXPORT const char* qgate_context_last_error(const qgate_context* c) { return ref().context_last_error(c); }
QGATE_EXPORT qgate_status qgate_gemm_prepare(qgate_context* c, int32_t t, int64_t od, int64_t k, const void* w,
                                             int64_t max_nt, qgate_gemm** out) {
  return ref().gemm_prepare(c, t, od, k, w, max_nt, out);
}
QGATE_EXPORT qgate_status qgate_gemm_run(qgate_gemm* g, const float* x, int64_t nt, float* y, void* stream) {
  inject_run_fault();
  return ref().gemm_run(g, x, nt, y, stream);
}
QGATE_EXPORT int64_t qgate_gemm_resident_bytes(const qgate_gemm* g) { return ref().gemm_resident_bytes(g); }
QGATE_EXPORT void qgate_gemm_release(qgate_gemm* g) { ref().gemm_release(g); }
}
