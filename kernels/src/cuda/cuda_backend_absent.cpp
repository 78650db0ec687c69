// The CUDA backend entry points of a build made without nvcc: libqgate_ref.so still links and
// reports, through these, that CUDA is not in it.
#include <string>

#include "detail/gemm_backend.h"

namespace qgate::kernels {

std::unique_ptr<GemmBackend> make_cuda_backend(GemmPath /*path*/, int /*device*/, CallResult* error) {
  if (error != nullptr)
    *error = CallResult::fail(QGATE_ERR_UNSUPPORTED, "this build was compiled without CUDA (nvcc was not found)");
  return nullptr;
}

bool cuda_backend_compiled() { return false; }

const char* cuda_archs_compiled() { return ""; }

}  // namespace qgate::kernels
