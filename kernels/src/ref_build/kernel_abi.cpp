// libqgate_ref.so's C ABI: validates every argument, resolves the path from MINFER_MMQ, and
// dispatches to the CPU or CUDA backend. No exception crosses the C boundary.
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "detail/gemm_backend.h"
#include "qgate/kernel_abi.h"
#include "qgate/kernel_abi_support.h"
#include "qgate/quant/block_formats.h"
#include "qgate_revision.h"

using qgate::kernels::CallResult;
using qgate::kernels::GemmBackend;
using qgate::kernels::GemmPath;
using qgate::kernels::PreparedGemm;

struct qgate_context {
  qgate_backend backend = QGATE_BACKEND_CPU;
  GemmPath path = GemmPath::f16;
  std::unique_ptr<GemmBackend> impl;
  std::string last_error;
};

struct qgate_gemm {
  qgate_context* ctx = nullptr;
  std::unique_ptr<PreparedGemm> impl;
  int64_t od = 0, k = 0, max_nt = 0;
};

namespace {

// Largest single dimension accepted; bigger ones are certainly a caller's mistake.
constexpr int64_t kMaxDimension = int64_t{1} << 31;

qgate_status fail(qgate_context* ctx, qgate_status status, std::string message) {
  if (ctx) ctx->last_error = std::move(message);
  return status;
}

using qgate::abi::write_error;

bool path_from_env(GemmPath* path, std::string* error) {
  int32_t abi_path = QGATE_PATH_F16;
  if (!qgate::abi::path_from_env(&abi_path, error)) return false;
  *path = abi_path == QGATE_PATH_MMQ ? GemmPath::mmq : GemmPath::f16;
  return true;
}

std::string backends_compiled() {
  return qgate::kernels::cuda_backend_compiled() ? "cpu,cuda" : "cpu";
}

}  // namespace

extern "C" {

QGATE_EXPORT uint32_t qgate_abi_version(void) { return QGATE_ABI_VERSION; }

QGATE_EXPORT const qgate_build_info* qgate_get_build_info(void) {
  static const std::string backends = backends_compiled();
  static const std::string archs = qgate::kernels::cuda_archs_compiled();
  static const qgate_build_info info = {QGATE_ABI_VERSION, "qgate-ref", QGATE_VERSION,
                                        QGATE_COMMIT,      backends.c_str(), archs.c_str()};
  return &info;
}

// qgate's own MMQ follows qgate's numerics (f16-rounded activation scale, round-half-even).
QGATE_EXPORT const char* qgate_build_numerics(void) { return "qgate"; }

QGATE_EXPORT qgate_status qgate_context_create(const qgate_context_options* options,
                                               qgate_context** out, char* error_buf,
                                               size_t error_buf_size) {
  if (out) *out = nullptr;
  auto refuse = [&](qgate_status status, const std::string& message) {
    write_error(error_buf, error_buf_size, message);
    return status;
  };
  if (!options || !out) return refuse(QGATE_ERR_INVALID_ARGUMENT, "options and out must not be NULL");
  if (options->struct_size < sizeof(qgate_context_options))
    return refuse(QGATE_ERR_INVALID_ARGUMENT, "qgate_context_options.struct_size is too small");
  try {
    auto ctx = std::make_unique<qgate_context>();
    switch (options->path) {
      case QGATE_PATH_F16: ctx->path = GemmPath::f16; break;
      case QGATE_PATH_MMQ: ctx->path = GemmPath::mmq; break;
      case QGATE_PATH_FROM_ENV: {
        std::string error;
        if (!path_from_env(&ctx->path, &error)) return refuse(QGATE_ERR_INVALID_ARGUMENT, error);
        break;
      }
      default:
        return refuse(QGATE_ERR_INVALID_ARGUMENT, "unknown path " + std::to_string(options->path));
    }
    if (options->backend == QGATE_BACKEND_CPU) {
      if (options->cpu_threads < 0)
        return refuse(QGATE_ERR_INVALID_ARGUMENT, "cpu_threads must be >= 0");
      ctx->backend = QGATE_BACKEND_CPU;
      ctx->impl = qgate::kernels::make_cpu_backend(ctx->path, options->cpu_threads);
    } else if (options->backend == QGATE_BACKEND_CUDA) {
      if (options->device < 0) return refuse(QGATE_ERR_INVALID_ARGUMENT, "device must be >= 0");
      CallResult error;
      ctx->backend = QGATE_BACKEND_CUDA;
      ctx->impl = qgate::kernels::make_cuda_backend(ctx->path, options->device, &error);
      if (!ctx->impl)
        return refuse(error.status == QGATE_OK ? QGATE_ERR_BACKEND : error.status, error.message);
    } else {
      return refuse(QGATE_ERR_INVALID_ARGUMENT, "unknown backend " + std::to_string(options->backend));
    }
    *out = ctx.release();
    return QGATE_OK;
  } catch (const std::bad_alloc&) {
    return refuse(QGATE_ERR_OUT_OF_MEMORY, "out of host memory creating the context");
  } catch (const std::exception& e) {
    return refuse(QGATE_ERR_INTERNAL, e.what());
  }
}

QGATE_EXPORT void qgate_context_destroy(qgate_context* ctx) { delete ctx; }

QGATE_EXPORT int32_t qgate_context_path(const qgate_context* ctx) {
  if (!ctx) return QGATE_PATH_FROM_ENV;
  return ctx->path == GemmPath::mmq ? QGATE_PATH_MMQ : QGATE_PATH_F16;
}

QGATE_EXPORT const char* qgate_context_last_error(const qgate_context* ctx) {
  return ctx ? ctx->last_error.c_str() : "no context";
}

QGATE_EXPORT qgate_status qgate_gemm_prepare(qgate_context* ctx, int32_t type, int64_t od,
                                             int64_t k, const void* weight_blocks,
                                             int64_t max_nt, qgate_gemm** out) {
  if (out) *out = nullptr;
  if (!ctx) return QGATE_ERR_INVALID_ARGUMENT;
  if (!out || !weight_blocks)
    return fail(ctx, QGATE_ERR_INVALID_ARGUMENT, "weight_blocks and out must not be NULL");
  if (!qgate::quant::is_valid_type_id(type))
    return fail(ctx, QGATE_ERR_INVALID_ARGUMENT, "unknown weight type id " + std::to_string(type));
  const auto wtype = static_cast<qgate::quant::WeightType>(type);
  const auto& traits = qgate::quant::traits(wtype);
  if (od <= 0 || k <= 0 || max_nt <= 0)
    return fail(ctx, QGATE_ERR_INVALID_ARGUMENT,
                "sizes must be positive: od=" + std::to_string(od) + " k=" + std::to_string(k) +
                    " max_nt=" + std::to_string(max_nt));
  if (od > kMaxDimension || k > kMaxDimension || max_nt > kMaxDimension)
    return fail(ctx, QGATE_ERR_INVALID_ARGUMENT, "a dimension exceeds 2^31");
  if (k % traits.block_elems != 0)
    return fail(ctx, QGATE_ERR_INVALID_ARGUMENT,
                "k=" + std::to_string(k) + " is not a multiple of " + std::string(traits.name) +
                    "'s block of " + std::to_string(traits.block_elems));
  try {
    auto gemm = std::make_unique<qgate_gemm>();
    gemm->ctx = ctx;
    gemm->od = od;
    gemm->k = k;
    gemm->max_nt = max_nt;
    CallResult r = ctx->impl->prepare(wtype, od, k, weight_blocks, max_nt, &gemm->impl);
    if (!r) return fail(ctx, r.status, r.message);
    *out = gemm.release();
    return QGATE_OK;
  } catch (const std::bad_alloc&) {
    return fail(ctx, QGATE_ERR_OUT_OF_MEMORY, "out of host memory preparing the weights");
  } catch (const std::exception& e) {
    return fail(ctx, QGATE_ERR_INTERNAL, e.what());
  }
}

QGATE_EXPORT qgate_status qgate_gemm_run(qgate_gemm* gemm, const float* x, int64_t nt, float* y,
                                         void* stream) {
  if (!gemm) return QGATE_ERR_INVALID_ARGUMENT;
  qgate_context* ctx = gemm->ctx;
  if (!x || !y) return fail(ctx, QGATE_ERR_INVALID_ARGUMENT, "x and y must not be NULL");
  if (nt < 1 || nt > gemm->max_nt)
    return fail(ctx, QGATE_ERR_INVALID_ARGUMENT,
                "nt=" + std::to_string(nt) + " is outside [1, max_nt=" +
                    std::to_string(gemm->max_nt) + "]");
  try {
    CallResult r = gemm->impl->run(x, nt, y, stream);
    if (!r) return fail(ctx, r.status, r.message);
    return QGATE_OK;
  } catch (const std::bad_alloc&) {
    return fail(ctx, QGATE_ERR_OUT_OF_MEMORY, "out of host memory running the GEMM");
  } catch (const std::exception& e) {
    return fail(ctx, QGATE_ERR_INTERNAL, e.what());
  }
}

QGATE_EXPORT int64_t qgate_gemm_resident_bytes(const qgate_gemm* gemm) {
  return gemm ? gemm->impl->resident_bytes() : 0;
}

QGATE_EXPORT void qgate_gemm_release(qgate_gemm* gemm) { delete gemm; }

}  // extern "C"
