// cuBLASLt as a side-by-side baseline for the f16 path: y_f32[nt][od] = x_f16[nt][k] * W_f16[od][k]^T.
// libcublasLt is loaded with dlopen at run time and never linked, so the deployable bundle stays
// small and a host without it still runs everything else. This class only enqueues the GEMM on a
// stream; timing belongs to the caller (the worker's benchmark), exactly as for qgate's kernels.
// Plain C++ header: no CUDA or cuBLAS type appears here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace qgate::cuda {

class CublasLtF16Gemm {
 public:
  /// Loads libcublasLt.so.13 (then libcublasLt.so), resolves its entry points and creates a handle
  /// and a workspace on the current CUDA device. nullptr with *error set when any step fails.
  static std::unique_ptr<CublasLtF16Gemm> load(std::string* error);
  ~CublasLtF16Gemm();
  CublasLtF16Gemm(const CublasLtF16Gemm&) = delete;
  CublasLtF16Gemm& operator=(const CublasLtF16Gemm&) = delete;

  /// Describes the problem and picks cuBLASLt's heuristic first choice. "" on success, else why not.
  std::string prepare(int64_t nt, int64_t od, int64_t k);
  /// Enqueues the GEMM prepared last on `stream` (a cudaStream_t). Device pointers; "" on success.
  std::string run(const void* x_f16, const void* w_f16, float* y, void* stream);

  /// The library file that was loaded (for reports).
  const std::string& library() const;

 private:
  struct Impl;
  explicit CublasLtF16Gemm(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace qgate::cuda
