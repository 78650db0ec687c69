// cuBLASLt baseline of the f16 path, resolved with dlopen/dlsym (see cublaslt_baseline.h).
// cublasLt.h is included for its types and enums only; no symbol of it is linked.
//
// Layout: cuBLASLt is column-major, so the row-major y[nt][od] is computed as its transpose
//   Y^T (od x nt, ld od) = op_T(A) * B,  A = W seen as k x od (ld k), B = X seen as k x nt (ld k)
// i.e. the "TN" GEMM every cuBLASLt release serves best.
#include "qgate/cuda/cublaslt_baseline.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <utility>

namespace qgate::cuda {

struct CublasLtF16Gemm::Impl {
  void* lib = nullptr;
  std::string lib_name;
  int device = 0;

  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  decltype(&cublasLtGetStatusString) status_string = nullptr;  // optional, for messages

  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = size_t{32} << 20;

  // The prepared problem.
  bool prepared = false;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};

  std::string status(const char* call, cublasStatus_t s) const {
    std::string m = std::string(call) + " failed: status " + std::to_string(static_cast<int>(s));
    if (status_string != nullptr) m += std::string(" (") + status_string(s) + ")";
    return m;
  }

  void release_problem() {
    if (a != nullptr) layout_destroy(a);
    if (b != nullptr) layout_destroy(b);
    if (c != nullptr) layout_destroy(c);
    if (desc != nullptr) desc_destroy(desc);
    a = b = c = nullptr;
    desc = nullptr;
    prepared = false;
  }

  ~Impl() {
    if (handle != nullptr) {
      cudaSetDevice(device);
      release_problem();
      destroy(handle);
    }
    if (workspace != nullptr) cudaFree(workspace);
    (void)cudaGetLastError();
    // The library stays loaded: unloading cuBLAS while the process runs on gains nothing and its
    // teardown order against the CUDA runtime is not ours to decide.
  }
};

namespace {
template <typename F>
bool resolve(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  return *out != nullptr;
}
}  // namespace

CublasLtF16Gemm::CublasLtF16Gemm(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CublasLtF16Gemm::~CublasLtF16Gemm() = default;

const std::string& CublasLtF16Gemm::library() const { return impl_->lib_name; }

std::unique_ptr<CublasLtF16Gemm> CublasLtF16Gemm::load(std::string* error) {
  auto fail = [&](std::string msg) -> std::unique_ptr<CublasLtF16Gemm> {
    if (error != nullptr) *error = std::move(msg);
    return nullptr;
  };
  auto impl = std::make_unique<Impl>();
  std::string dl_errors;
  for (const char* name : {"libcublasLt.so.13", "libcublasLt.so"}) {
    impl->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (impl->lib != nullptr) {
      impl->lib_name = name;
      break;
    }
    const char* why = dlerror();
    dl_errors += std::string(dl_errors.empty() ? "" : "; ") + (why != nullptr ? why : name);
  }
  if (impl->lib == nullptr) return fail("cuBLASLt not available: " + dl_errors);

  void* lib = impl->lib;
  const bool ok = resolve(lib, "cublasLtCreate", &impl->create) &&
                  resolve(lib, "cublasLtDestroy", &impl->destroy) &&
                  resolve(lib, "cublasLtMatmulDescCreate", &impl->desc_create) &&
                  resolve(lib, "cublasLtMatmulDescSetAttribute", &impl->desc_set) &&
                  resolve(lib, "cublasLtMatmulDescDestroy", &impl->desc_destroy) &&
                  resolve(lib, "cublasLtMatrixLayoutCreate", &impl->layout_create) &&
                  resolve(lib, "cublasLtMatrixLayoutDestroy", &impl->layout_destroy) &&
                  resolve(lib, "cublasLtMatmulPreferenceCreate", &impl->pref_create) &&
                  resolve(lib, "cublasLtMatmulPreferenceSetAttribute", &impl->pref_set) &&
                  resolve(lib, "cublasLtMatmulPreferenceDestroy", &impl->pref_destroy) &&
                  resolve(lib, "cublasLtMatmulAlgoGetHeuristic", &impl->heuristic) &&
                  resolve(lib, "cublasLtMatmul", &impl->matmul);
  if (!ok) {
    const char* why = dlerror();
    return fail(impl->lib_name + " lacks a cuBLASLt entry point: " + (why != nullptr ? why : "?"));
  }
  resolve(lib, "cublasLtGetStatusString", &impl->status_string);

  cudaError_t e = cudaGetDevice(&impl->device);
  if (e != cudaSuccess) return fail(std::string("cudaGetDevice: ") + cudaGetErrorString(e));
  const cublasStatus_t s = impl->create(&impl->handle);
  if (s != CUBLAS_STATUS_SUCCESS) {
    impl->handle = nullptr;
    return fail(impl->status("cublasLtCreate", s));
  }
  e = cudaMalloc(&impl->workspace, impl->workspace_bytes);
  if (e != cudaSuccess) {
    impl->workspace = nullptr;
    (void)cudaGetLastError();
    return fail(std::string("cudaMalloc of the cuBLASLt workspace: ") + cudaGetErrorString(e));
  }
  return std::unique_ptr<CublasLtF16Gemm>(new CublasLtF16Gemm(std::move(impl)));
}

std::string CublasLtF16Gemm::prepare(int64_t nt, int64_t od, int64_t k) {
  Impl& m = *impl_;
  if (nt < 1 || od < 1 || k < 1) return "nt, od and k must be positive";
  cudaSetDevice(m.device);
  m.release_problem();

  cublasStatus_t s = m.desc_create(&m.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (s != CUBLAS_STATUS_SUCCESS) return m.status("cublasLtMatmulDescCreate", s);
  const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  s = m.desc_set(m.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t);
  if (s == CUBLAS_STATUS_SUCCESS) s = m.desc_set(m.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n);
  if (s != CUBLAS_STATUS_SUCCESS) return m.status("cublasLtMatmulDescSetAttribute", s);

  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  s = m.layout_create(&m.a, CUDA_R_16F, u(k), u(od), k);
  if (s == CUBLAS_STATUS_SUCCESS) s = m.layout_create(&m.b, CUDA_R_16F, u(k), u(nt), k);
  if (s == CUBLAS_STATUS_SUCCESS) s = m.layout_create(&m.c, CUDA_R_32F, u(od), u(nt), od);
  if (s != CUBLAS_STATUS_SUCCESS) return m.status("cublasLtMatrixLayoutCreate", s);

  cublasLtMatmulPreference_t pref = nullptr;
  s = m.pref_create(&pref);
  if (s != CUBLAS_STATUS_SUCCESS) return m.status("cublasLtMatmulPreferenceCreate", s);
  s = m.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &m.workspace_bytes, sizeof m.workspace_bytes);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (s == CUBLAS_STATUS_SUCCESS) s = m.heuristic(m.handle, m.desc, m.a, m.b, m.c, m.c, pref, 1, &result, &found);
  m.pref_destroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS) return m.status("cublasLtMatmulAlgoGetHeuristic", s);
  if (found < 1) return "cuBLASLt has no algorithm for f16 x f16 -> f32 at this shape";
  m.algo = result.algo;
  m.prepared = true;
  return "";
}

std::string CublasLtF16Gemm::run(const void* x_f16, const void* w_f16, float* y, void* stream) {
  Impl& m = *impl_;
  if (!m.prepared) return "run() before a successful prepare()";
  cudaSetDevice(m.device);
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t s = m.matmul(m.handle, m.desc, &alpha, w_f16, m.a, x_f16, m.b, &beta, y, m.c, y, m.c,
                                    &m.algo, m.workspace, m.workspace_bytes, static_cast<cudaStream_t>(stream));
  if (s != CUBLAS_STATUS_SUCCESS) return m.status("cublasLtMatmul", s);
  return "";
}

}  // namespace qgate::cuda
