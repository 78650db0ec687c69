/* qgate kernel ABI: the versioned C interface that every kernel build exports.
 *
 * A kernel build is a shared object that qgate-worker loads with dlopen. The worker owns the
 * device memory, the stream and the timing; the build owns its kernels and the resident copy of
 * the weights it prepares. Every pointer handed to qgate_gemm_run lives where the context's
 * backend computes: device memory for QGATE_BACKEND_CUDA, host memory for QGATE_BACKEND_CPU.
 *
 * Versioning: a build reports QGATE_ABI_VERSION through qgate_abi_version(); the worker refuses
 * a build whose version differs from its own before it calls anything else. Structs passed in
 * carry their size in their first field, so later versions can grow them without breaking
 * builds compiled against an older header.
 */
#ifndef QGATE_KERNEL_ABI_H
#define QGATE_KERNEL_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define QGATE_ABI_VERSION 1u

#if defined(__GNUC__)
#define QGATE_EXPORT __attribute__((visibility("default")))
#else
#define QGATE_EXPORT
#endif

typedef enum qgate_status {
  QGATE_OK = 0,
  QGATE_ERR_INVALID_ARGUMENT = 1, /* a size, type or pointer the build cannot accept */
  QGATE_ERR_UNSUPPORTED = 2,      /* valid, but this build or backend does not do it */
  QGATE_ERR_OUT_OF_MEMORY = 3,    /* an allocation failed; nothing was leaked */
  QGATE_ERR_BACKEND = 4,          /* the device or runtime reported an error */
  QGATE_ERR_INTERNAL = 5
} qgate_status;

/* Weight types, numbered as ggml numbers them so GGUF tensor types map one to one. */
typedef enum qgate_weight_type {
  QGATE_TYPE_Q4_0 = 2,
  QGATE_TYPE_Q4_1 = 3,
  QGATE_TYPE_Q5_0 = 6,
  QGATE_TYPE_Q5_1 = 7,
  QGATE_TYPE_Q8_0 = 8,
  QGATE_TYPE_Q4_K = 12,
  QGATE_TYPE_Q5_K = 13,
  QGATE_TYPE_Q6_K = 14
} qgate_weight_type;

typedef enum qgate_backend {
  QGATE_BACKEND_CPU = 1,
  QGATE_BACKEND_CUDA = 2
} qgate_backend;

/* The GEMM path. QGATE_PATH_FROM_ENV reads MINFER_MMQ when the context is created:
 * "1" selects MMQ, unset or "0" selects f16, anything else is an invalid argument. */
typedef enum qgate_path {
  QGATE_PATH_FROM_ENV = -1,
  QGATE_PATH_F16 = 0,
  QGATE_PATH_MMQ = 1
} qgate_path;

typedef struct qgate_build_info {
  uint32_t abi_version;
  const char* name;        /* e.g. "qgate-ref" */
  const char* version;     /* the build's own version string */
  const char* commit;      /* source revision, or "" */
  const char* backends;    /* comma-separated backends compiled in: "cpu", "cpu,cuda" */
  const char* cuda_archs;  /* CUDA architectures compiled in, "" without CUDA */
} qgate_build_info;

typedef struct qgate_context_options {
  uint32_t struct_size; /* sizeof(qgate_context_options) */
  int32_t backend;      /* qgate_backend */
  int32_t device;       /* CUDA device ordinal; ignored on the CPU */
  int32_t path;         /* qgate_path */
  int32_t cpu_threads;  /* 0 = all hardware threads; CPU backend only */
} qgate_context_options;

typedef struct qgate_context qgate_context;
typedef struct qgate_gemm qgate_gemm;

/* Optional: the numerics the build's MMQ path follows, so the parity gate judges it against the
 * reference it was written to: "qgate" (per 32: d = f16(amax/127), round-half-even, sum = d*sum(q))
 * or "ggml" (ggml's CUDA MMQ: roundf(x*127/amax), d = 1/(127/amax), sums of the f32 activations).
 * A build that does not export it is judged as "qgate"; ABI version 1 stays valid either way.
 * Returns a static string. */
typedef const char* (*qgate_build_numerics_fn)(void);
#define QGATE_BUILD_NUMERICS_SYMBOL "qgate_build_numerics"
/* Optional, preferred over qgate_build_numerics when exported: the numerics on one backend
 * (a qgate_backend), for a build whose backends follow different arithmetic (ggml's CUDA kernels
 * and its CPU backend: "ggml" and "ggml-cpu"). NULL or "" means qgate_build_numerics's answer. */
typedef const char* (*qgate_build_numerics_on_fn)(int32_t backend);
#define QGATE_BUILD_NUMERICS_ON_SYMBOL "qgate_build_numerics_on"

/* Always safe to call first; the worker checks it before anything else. */
QGATE_EXPORT uint32_t qgate_abi_version(void);
QGATE_EXPORT const qgate_build_info* qgate_get_build_info(void);

/* Creates a context on one backend and device. On failure *out is NULL and, when error_buf is
 * not NULL, a message is written there (always NUL-terminated). */
QGATE_EXPORT qgate_status qgate_context_create(const qgate_context_options* options,
                                               qgate_context** out, char* error_buf,
                                               size_t error_buf_size);
QGATE_EXPORT void qgate_context_destroy(qgate_context* ctx);
/* The path this context resolved to (QGATE_PATH_F16 or QGATE_PATH_MMQ). */
QGATE_EXPORT int32_t qgate_context_path(const qgate_context* ctx);
/* The message of the last failed call on this context or on a GEMM made from it. */
QGATE_EXPORT const char* qgate_context_last_error(const qgate_context* ctx);

/* Prepares an od x k weight matrix, given as od rows of raw ggml blocks in host memory, for
 * activations of up to max_nt tokens. The build copies what it needs; weight_blocks may be freed
 * on return. k must be a multiple of the type's block size. */
QGATE_EXPORT qgate_status qgate_gemm_prepare(qgate_context* ctx, int32_t type, int64_t od,
                                             int64_t k, const void* weight_blocks,
                                             int64_t max_nt, qgate_gemm** out);

/* y[nt][od] = x[nt][k] * W^T, row-major f32, 1 <= nt <= max_nt. On CUDA the work is enqueued on
 * `stream` (a cudaStream_t; NULL is the default stream) and the call returns without waiting.
 * On the CPU the call computes synchronously and `stream` is ignored. */
QGATE_EXPORT qgate_status qgate_gemm_run(qgate_gemm* gemm, const float* x, int64_t nt, float* y,
                                         void* stream);

/* Bytes of device (or host, on the CPU) memory the prepared GEMM holds resident. */
QGATE_EXPORT int64_t qgate_gemm_resident_bytes(const qgate_gemm* gemm);
QGATE_EXPORT void qgate_gemm_release(qgate_gemm* gemm);

#ifdef __cplusplus
}
#endif

#endif /* QGATE_KERNEL_ABI_H */
