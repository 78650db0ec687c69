// The interface between the ABI glue of libqgate_ref.so and its two backends (CPU and CUDA).
// Host-only C++: no CUDA header reaches this file, so the glue builds with or without nvcc.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "qgate/kernel_abi.h"
#include "qgate/quant/block_formats.h"

namespace qgate::kernels {

enum class GemmPath { f16 = 0, mmq = 1 };

/// What a backend call returns: QGATE_OK, or a status with a message for the user.
struct CallResult {
  qgate_status status = QGATE_OK;
  std::string message;
  static CallResult ok() { return {}; }
  static CallResult fail(qgate_status s, std::string msg) { return {s, std::move(msg)}; }
  explicit operator bool() const { return status == QGATE_OK; }
};

/// One weight matrix, resident in the backend's memory, ready to multiply.
class PreparedGemm {
 public:
  virtual ~PreparedGemm() = default;
  /// y[nt][od] = x[nt][k] * W^T; pointers are in the backend's memory; stream is a
  /// cudaStream_t on CUDA and ignored on the CPU.
  virtual CallResult run(const float* x, int64_t nt, float* y, void* stream) = 0;
  virtual int64_t resident_bytes() const = 0;
};

class GemmBackend {
 public:
  virtual ~GemmBackend() = default;
  /// Arguments are already validated by the glue (type known, sizes positive, k a multiple of
  /// the block). Out-of-memory must come back as QGATE_ERR_OUT_OF_MEMORY, never as a crash.
  virtual CallResult prepare(quant::WeightType type, int64_t od, int64_t k,
                             const void* weight_blocks, int64_t max_nt,
                             std::unique_ptr<PreparedGemm>* out) = 0;
};

std::unique_ptr<GemmBackend> make_cpu_backend(GemmPath path, int threads);

/// Returns nullptr with *error set when CUDA is not compiled in or the device cannot be used:
/// QGATE_ERR_UNSUPPORTED when the device or build cannot do the path, QGATE_ERR_BACKEND otherwise.
std::unique_ptr<GemmBackend> make_cuda_backend(GemmPath path, int device, CallResult* error);

/// True when this build was compiled with the CUDA backend.
bool cuda_backend_compiled();
const char* cuda_archs_compiled();

}  // namespace qgate::kernels
