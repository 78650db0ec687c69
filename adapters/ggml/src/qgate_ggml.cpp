// libqgate_ggml.so: qgate's kernel ABI (kernels/include/qgate/kernel_abi.h) implemented with ggml's
// public backend API, so the GEMMs qgate times are the ones a ggml tree dispatches itself (MMVQ,
// MMQ, MMF, MMVF or cuBLAS on CUDA; ggml-cpu's kernels on the CPU).
//
// One GEMM is one ggml graph of one node, y = ggml_mul_mat(W, x), over three tensors that live in
// ggml backend buffers: the weights [k, od], the activations [k, max_nt] and the output [od, max_nt].
// The MMQ path keeps the weights as their quantized ggml type; the f16 path dequantizes them on the
// host (ggml's to_float) and stores F16, so ggml picks its own f16 kernels. On CUDA ggml's x and y
// tensors are pointed at the caller's device buffers for the run (or, with QGATE_GGML_COPY_IO, the
// caller's x and y are copied into and out of ggml's own tensors on the caller's stream), and events
// order ggml's stream against the caller's (docs/ggml.md lists every wait and copy).
//
// ggml aborts the process on a CUDA error. It logs the error's text first and then aborts with only
// "file:line: CUDA error" and a backtrace; qgate-worker reports a crash as CRASHED with the tail of
// its stderr. So the adapter ends stderr with one line that says what ggml said (GgmlFailureReport).
// No exception crosses the C boundary.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "qgate/kernel_abi.h"
#include "qgate/kernel_abi_support.h"

#if defined(QGATE_GGML_HAVE_CUDA)
#include <cuda_runtime.h>

#include "ggml-cuda.h"
#if defined(QGATE_GGML_EVENT_ORDERING)
// Internal to ggml: the only way to the cudaEvent_t inside a ggml_backend_event_t (its `context`).
#include QGATE_GGML_BACKEND_IMPL_H
#endif
#endif

#ifndef QGATE_GGML_COMMIT
#define QGATE_GGML_COMMIT "unknown"
#endif
#ifndef QGATE_GGML_CUDA_ARCHS
#define QGATE_GGML_CUDA_ARCHS ""
#endif

namespace {

// Largest single dimension accepted, as in qgate's own build.
constexpr int64_t kMaxDimension = int64_t{1} << 31;
// The f16 path converts this many bytes of F16 weights on the host per upload.
constexpr size_t kF16UploadChunkBytes = size_t{16} << 20;

bool is_abi_weight_type(int32_t type) {
  switch (type) {
    case QGATE_TYPE_Q4_0: case QGATE_TYPE_Q4_1: case QGATE_TYPE_Q5_0: case QGATE_TYPE_Q5_1:
    case QGATE_TYPE_Q8_0: case QGATE_TYPE_Q4_K: case QGATE_TYPE_Q5_K: case QGATE_TYPE_Q6_K:
      return true;
    default:
      return false;
  }
}

// ggml's logger and abort hook, set once per process when the first context is created. Every log
// line still goes to stderr as ggml's default logger writes it. The last burst of error lines is
// also kept, and at an abort one short line is written last, in place of ggml's backtrace:
//   ggml aborted: CUDA error: invalid configuration argument (current device: 0, in function ...)
// It is at most kLineBytes long, so the tail of stderr that the worker reports holds all of it.
class GgmlFailureReport {
 public:
  static void install() {
    static std::once_flag once;
    std::call_once(once, [] {
      ggml_log_set(&GgmlFailureReport::log, nullptr);
      ggml_set_abort_callback(&GgmlFailureReport::abort_with_errors);
    });
  }

 private:
  static constexpr size_t kBurstBytes = 2048;
  static constexpr size_t kLineBytes = 360;

  struct State {
    std::mutex mutex;
    std::string burst;  // the latest run of consecutive error lines
    ggml_log_level level = GGML_LOG_LEVEL_NONE;
  };
  static State& state() {
    static State s;
    return s;
  }

  static void log(ggml_log_level level, const char* text, void*) {
    if (!text) return;
    std::fputs(text, stderr);
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    if (level != GGML_LOG_LEVEL_CONT) {
      if (level == GGML_LOG_LEVEL_ERROR && s.level != GGML_LOG_LEVEL_ERROR) s.burst.clear();
      s.level = level;
    }
    if (s.level != GGML_LOG_LEVEL_ERROR || s.burst.size() >= kBurstBytes) return;
    s.burst.append(text, std::min(std::strlen(text), kBurstBytes - s.burst.size()));
  }

  static std::string trimmed(const std::string& text) {
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return "";
    return text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
  }

  static void abort_with_errors(const char* message) {
    std::string burst;
    {
      State& s = state();
      std::lock_guard<std::mutex> lock(s.mutex);
      burst = s.burst;
    }
    std::string headline, details;
    size_t start = 0;
    while (start <= burst.size()) {
      size_t end = burst.find('\n', start);
      if (end == std::string::npos) end = burst.size();
      const std::string line = trimmed(burst.substr(start, end - start));
      if (!line.empty()) {
        if (headline.empty()) headline = line;
        else details += (details.empty() ? "" : "; ") + line;
      }
      start = end + 1;
    }
    const std::string where = message ? trimmed(message) : std::string();
    if (headline.empty()) {
      headline = where.empty() ? "no message" : where;
    } else if (!where.empty()) {
      details += (details.empty() ? "" : "; ") + where;
    }
    std::string line = "ggml aborted: " + headline;
    if (!details.empty()) line += " (" + details + ")";
    if (line.size() > kLineBytes) line = line.substr(0, kLineBytes - 4) + "...)";
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  }
};

// A ggml context that holds tensor metadata only (the data lives in backend buffers).
ggml_context* new_metadata_context(size_t n_tensors, size_t graph_nodes) {
  ggml_init_params params{};
  params.mem_size = ggml_tensor_overhead() * n_tensors +
                    (graph_nodes ? ggml_graph_overhead_custom(graph_nodes, false) : 0);
  params.mem_buffer = nullptr;
  params.no_alloc = true;
  return ggml_init(params);
}

struct ContextDeleter {
  void operator()(ggml_context* c) const { ggml_free(c); }
};
struct BufferDeleter {
  void operator()(ggml_backend_buffer* b) const { ggml_backend_buffer_free(b); }
};
using ContextPtr = std::unique_ptr<ggml_context, ContextDeleter>;
using BufferPtr = std::unique_ptr<ggml_backend_buffer, BufferDeleter>;

// The graph of one token count: x [k, nt] and y [od, nt] are placed at the start of the activation
// and output tensors (on CUDA, unless QGATE_GGML_COPY_IO, each run points them at the caller's x and y).
struct TokenGraph {
  ContextPtr meta;
  ggml_cgraph* graph = nullptr;
  ggml_tensor* x = nullptr;
  ggml_tensor* y = nullptr;
};

}  // namespace

struct qgate_context {
  int32_t backend = QGATE_BACKEND_CPU;
  int32_t path = QGATE_PATH_F16;
  int32_t device = 0;
  ggml_backend_t ggml = nullptr;
  std::string last_error;
#if defined(QGATE_GGML_HAVE_CUDA)
  // Recorded on the caller's stream after x is in place; ggml's stream waits for it.
  ggml_backend_event_t input_ready = nullptr;
  // Recorded on ggml's stream after the graph; the caller's stream waits for it.
  ggml_backend_event_t output_ready = nullptr;
#endif

  ~qgate_context() {
#if defined(QGATE_GGML_HAVE_CUDA)
    if (input_ready) ggml_backend_event_free(input_ready);
    if (output_ready) ggml_backend_event_free(output_ready);
#endif
    if (ggml) ggml_backend_free(ggml);
  }
};

struct qgate_gemm {
  qgate_context* ctx = nullptr;
  int64_t od = 0, k = 0, max_nt = 0;
  // Declared first so they are freed last: the graphs' tensors point into these buffers.
  ContextPtr weight_meta, io_meta;
  BufferPtr weight_buffer, io_buffer;
  ggml_tensor* weight = nullptr;       // [k, od], quantized (MMQ) or F16
  ggml_tensor* activations = nullptr;  // F32 [k, max_nt]
  ggml_tensor* output = nullptr;       // F32 [od, max_nt]
  std::map<int64_t, TokenGraph> graphs;

  ~qgate_gemm() {
#if defined(QGATE_GGML_HAVE_CUDA)
    // ggml's stream may still compute, and the caller's stream may still copy out of `output`
    // (QGATE_GGML_COPY_IO): let both finish before the buffers go.
    if (ctx && ctx->backend == QGATE_BACKEND_CUDA) {
      ggml_backend_synchronize(ctx->ggml);
      int current = -1;
      if (cudaGetDevice(&current) == cudaSuccess && current != ctx->device) cudaSetDevice(ctx->device);
      cudaDeviceSynchronize();
      if (current >= 0 && current != ctx->device) cudaSetDevice(current);
    }
#endif
    graphs.clear();
    weight_buffer.reset();
    io_buffer.reset();
  }
};

namespace {

qgate_status fail(qgate_context* ctx, qgate_status status, std::string message) {
  if (ctx) ctx->last_error = std::move(message);
  return status;
}

// Finds or builds the graph for nt tokens.
qgate_status token_graph(qgate_gemm* gemm, int64_t nt, TokenGraph** out) {
  auto it = gemm->graphs.find(nt);
  if (it != gemm->graphs.end()) {
    *out = &it->second;
    return QGATE_OK;
  }
  TokenGraph g;
  g.meta.reset(new_metadata_context(2, 4));
  if (!g.meta) return fail(gemm->ctx, QGATE_ERR_OUT_OF_MEMORY, "ggml_init failed for a graph");
  g.x = ggml_new_tensor_2d(g.meta.get(), GGML_TYPE_F32, gemm->k, nt);
  ggml_set_name(g.x, "x");
  if (ggml_backend_tensor_alloc(gemm->io_buffer.get(), g.x, gemm->activations->data) != GGML_STATUS_SUCCESS)
    return fail(gemm->ctx, QGATE_ERR_BACKEND, "ggml could not place the activation tensor");
  g.y = ggml_mul_mat(g.meta.get(), gemm->weight, g.x);
  ggml_set_name(g.y, "y");
  if (ggml_backend_tensor_alloc(gemm->io_buffer.get(), g.y, gemm->output->data) != GGML_STATUS_SUCCESS)
    return fail(gemm->ctx, QGATE_ERR_BACKEND, "ggml could not place the output tensor");
  g.graph = ggml_new_graph_custom(g.meta.get(), 4, false);
  ggml_build_forward_expand(g.graph, g.y);
  auto inserted = gemm->graphs.emplace(nt, std::move(g));
  *out = &inserted.first->second;
  return QGATE_OK;
}

// Uploads the weights: raw blocks for MMQ, ggml's own dequantization rounded to F16 for f16.
qgate_status upload_weights(qgate_gemm* gemm, ggml_type type, const void* blocks) {
  const size_t row_bytes = ggml_row_size(type, gemm->k);
  if (gemm->weight->type == type) {
    ggml_backend_tensor_set(gemm->weight, blocks, 0, row_bytes * size_t(gemm->od));
    return QGATE_OK;
  }
  const ggml_type_traits* traits = ggml_get_type_traits(type);
  if (!traits || !traits->to_float)
    return fail(gemm->ctx, QGATE_ERR_UNSUPPORTED,
                std::string("this ggml has no dequantization for ") + ggml_type_name(type));
  const size_t f16_row_bytes = size_t(gemm->k) * sizeof(ggml_fp16_t);
  const int64_t rows_per_chunk = std::max<int64_t>(1, int64_t(kF16UploadChunkBytes / f16_row_bytes));
  std::vector<float> row(size_t(gemm->k));
  std::vector<ggml_fp16_t> chunk(size_t(std::min(rows_per_chunk, gemm->od)) * size_t(gemm->k));
  const auto* src = static_cast<const uint8_t*>(blocks);
  for (int64_t first = 0; first < gemm->od; first += rows_per_chunk) {
    const int64_t rows = std::min(rows_per_chunk, gemm->od - first);
    for (int64_t r = 0; r < rows; ++r) {
      traits->to_float(src + size_t(first + r) * row_bytes, row.data(), gemm->k);
      ggml_fp32_to_fp16_row(row.data(), chunk.data() + size_t(r) * size_t(gemm->k), gemm->k);
    }
    ggml_backend_tensor_set(gemm->weight, chunk.data(), size_t(first) * f16_row_bytes,
                            size_t(rows) * f16_row_bytes);
  }
  return QGATE_OK;
}

qgate_status run_cpu(qgate_gemm* gemm, TokenGraph* g, const float* x, int64_t nt, float* y) {
  ggml_backend_tensor_set(g->x, x, 0, size_t(nt) * size_t(gemm->k) * sizeof(float));
  const ggml_status status = ggml_backend_graph_compute(gemm->ctx->ggml, g->graph);
  if (status != GGML_STATUS_SUCCESS)
    return fail(gemm->ctx, QGATE_ERR_BACKEND,
                std::string("ggml_backend_graph_compute: ") + ggml_status_to_string(status));
  ggml_backend_tensor_get(g->y, y, 0, size_t(nt) * size_t(gemm->od) * sizeof(float));
  return QGATE_OK;
}

#if defined(QGATE_GGML_HAVE_CUDA)
qgate_status cuda_fail(qgate_context* ctx, cudaError_t error, const char* what) {
  return fail(ctx, QGATE_ERR_BACKEND, std::string(what) + ": " + cudaGetErrorString(error));
}

// Orders the caller's stream and ggml's stream:
//   caller: [copy x in] -> [input_ready]                       -> wait(output_ready) -> [copy y out]
//   ggml:                   wait(input_ready) -> graph -> [output_ready]
// By default ggml's graph reads x and writes y in the caller's buffers: the graph's x and y tensors
// stay in ggml's CUDA buffer (what ggml checks) but their data pointers are set to the caller's
// for the run, so nothing is copied. With QGATE_GGML_COPY_IO the copies in brackets run instead.
// With QGATE_GGML_EVENT_ORDERING nothing waits on the host. Without it, the host waits for the
// caller's stream before the graph and for ggml's stream after it.
qgate_status run_cuda(qgate_gemm* gemm, TokenGraph* g, const float* x, int64_t nt, float* y, void* stream) {
  qgate_context* ctx = gemm->ctx;
  auto caller = static_cast<cudaStream_t>(stream);
  (void)nt;  // the graph already has nt columns; only the copies need it

  int previous_device = -1;
  cudaError_t e = cudaGetDevice(&previous_device);
  if (e != cudaSuccess) return cuda_fail(ctx, e, "cudaGetDevice");
  if (previous_device != ctx->device && (e = cudaSetDevice(ctx->device)) != cudaSuccess)
    return cuda_fail(ctx, e, "cudaSetDevice");
  struct RestoreDevice {
    int device, previous;
    ~RestoreDevice() {
      if (previous != device) cudaSetDevice(previous);
    }
  } restore{ctx->device, previous_device};

#if defined(QGATE_GGML_COPY_IO)
  // ggml's tensors live in ggml's CUDA buffers, so their data pointers are device pointers.
  const size_t x_bytes = size_t(nt) * size_t(gemm->k) * sizeof(float);
  e = cudaMemcpyAsync(g->x->data, x, x_bytes, cudaMemcpyDeviceToDevice, caller);
  if (e != cudaSuccess) return cuda_fail(ctx, e, "copying x into ggml's activation tensor");
#else
  g->x->data = const_cast<float*>(x);
  g->y->data = y;
#endif
#if defined(QGATE_GGML_EVENT_ORDERING)
  e = cudaEventRecord(static_cast<cudaEvent_t>(ctx->input_ready->context), caller);
  if (e != cudaSuccess) return cuda_fail(ctx, e, "cudaEventRecord on the caller's stream");
  ggml_backend_event_wait(ctx->ggml, ctx->input_ready);
#else
  e = cudaStreamSynchronize(caller);
  if (e != cudaSuccess) return cuda_fail(ctx, e, "cudaStreamSynchronize on the caller's stream");
#endif
  const ggml_status status = ggml_backend_graph_compute_async(ctx->ggml, g->graph);
  if (status != GGML_STATUS_SUCCESS)
    return fail(ctx, QGATE_ERR_BACKEND,
                std::string("ggml_backend_graph_compute_async: ") + ggml_status_to_string(status));
#if defined(QGATE_GGML_EVENT_ORDERING)
  ggml_backend_event_record(ctx->output_ready, ctx->ggml);
  e = cudaStreamWaitEvent(caller, static_cast<cudaEvent_t>(ctx->output_ready->context), 0);
  if (e != cudaSuccess) return cuda_fail(ctx, e, "cudaStreamWaitEvent on the caller's stream");
#else
  ggml_backend_synchronize(ctx->ggml);
#endif
#if defined(QGATE_GGML_COPY_IO)
  const size_t y_bytes = size_t(nt) * size_t(gemm->od) * sizeof(float);
  e = cudaMemcpyAsync(y, g->y->data, y_bytes, cudaMemcpyDeviceToDevice, caller);
  if (e != cudaSuccess) return cuda_fail(ctx, e, "copying y out of ggml's output tensor");
#endif
  return QGATE_OK;
}

qgate_status create_cuda_backend(qgate_context* ctx, int32_t device, std::string* error) {
  const int count = ggml_backend_cuda_get_device_count();
  if (device >= count) {
    *error = "CUDA device " + std::to_string(device) + " does not exist (ggml sees " +
             std::to_string(count) + ")";
    return QGATE_ERR_INVALID_ARGUMENT;
  }
  ctx->ggml = ggml_backend_cuda_init(device);
  if (!ctx->ggml) {
    *error = "ggml_backend_cuda_init(" + std::to_string(device) + ") failed (ggml's log on stderr says why)";
    return QGATE_ERR_BACKEND;
  }
#if defined(QGATE_GGML_EVENT_ORDERING)
  ggml_backend_dev_t dev = ggml_backend_get_device(ctx->ggml);
  ctx->input_ready = ggml_backend_event_new(dev);
  ctx->output_ready = ggml_backend_event_new(dev);
  if (!ctx->input_ready || !ctx->output_ready) {
    *error = "ggml_backend_event_new failed (a ggml built with GGML_CUDA_NO_PEER_COPY has no events; "
             "configure qgate-ggml with -DQGATE_GGML_EVENT_ORDERING=OFF)";
    return QGATE_ERR_UNSUPPORTED;
  }
#endif
  return QGATE_OK;
}
#endif  // QGATE_GGML_HAVE_CUDA

}  // namespace

extern "C" {

QGATE_EXPORT uint32_t qgate_abi_version(void) { return QGATE_ABI_VERSION; }

QGATE_EXPORT const qgate_build_info* qgate_get_build_info(void) {
#if QGATE_GGML_HAS_VERSION
  static const std::string version = ggml_version();
#else
  static const std::string version = "unknown";
#endif
#if defined(QGATE_GGML_HAVE_CUDA)
  static const char* backends = "cpu,cuda";
#else
  static const char* backends = "cpu";
#endif
  static const qgate_build_info info = {QGATE_ABI_VERSION, "qgate-ggml", version.c_str(),
                                        QGATE_GGML_COMMIT, backends,     QGATE_GGML_CUDA_ARCHS};
  return &info;
}

// ggml's CUDA MMQ/MMVQ quantize the activations as "ggml" numerics says; ggml-cpu's vec_dot
// quantizes them to q8_0 / q8_K, its own arithmetic.
QGATE_EXPORT const char* qgate_build_numerics(void) {
#if defined(QGATE_GGML_HAVE_CUDA)
  return "ggml";
#else
  return "ggml-cpu";
#endif
}

QGATE_EXPORT const char* qgate_build_numerics_on(int32_t backend) {
  switch (backend) {
    case QGATE_BACKEND_CUDA: return "ggml";
    case QGATE_BACKEND_CPU: return "ggml-cpu";
    default: return "";
  }
}

QGATE_EXPORT qgate_status qgate_context_create(const qgate_context_options* options,
                                               qgate_context** out, char* error_buf,
                                               size_t error_buf_size) {
  if (out) *out = nullptr;
  auto refuse = [&](qgate_status status, const std::string& message) {
    qgate::abi::write_error(error_buf, error_buf_size, message);
    return status;
  };
  if (!options || !out) return refuse(QGATE_ERR_INVALID_ARGUMENT, "options and out must not be NULL");
  if (options->struct_size < sizeof(qgate_context_options))
    return refuse(QGATE_ERR_INVALID_ARGUMENT, "qgate_context_options.struct_size is too small");
  try {
    GgmlFailureReport::install();
    auto ctx = std::make_unique<qgate_context>();
    switch (options->path) {
      case QGATE_PATH_F16:
      case QGATE_PATH_MMQ:
        ctx->path = options->path;
        break;
      case QGATE_PATH_FROM_ENV: {
        std::string error;
        if (!qgate::abi::path_from_env(&ctx->path, &error)) return refuse(QGATE_ERR_INVALID_ARGUMENT, error);
        break;
      }
      default:
        return refuse(QGATE_ERR_INVALID_ARGUMENT, "unknown path " + std::to_string(options->path));
    }
    if (options->backend == QGATE_BACKEND_CPU) {
      if (options->cpu_threads < 0) return refuse(QGATE_ERR_INVALID_ARGUMENT, "cpu_threads must be >= 0");
      ctx->backend = QGATE_BACKEND_CPU;
      ctx->ggml = ggml_backend_cpu_init();
      if (!ctx->ggml) return refuse(QGATE_ERR_BACKEND, "ggml_backend_cpu_init failed");
      int threads = options->cpu_threads;
      if (threads == 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
      ggml_backend_cpu_set_n_threads(ctx->ggml, threads);
    } else if (options->backend == QGATE_BACKEND_CUDA) {
      if (options->device < 0) return refuse(QGATE_ERR_INVALID_ARGUMENT, "device must be >= 0");
#if defined(QGATE_GGML_HAVE_CUDA)
      ctx->backend = QGATE_BACKEND_CUDA;
      ctx->device = options->device;
      std::string error;
      const qgate_status status = create_cuda_backend(ctx.get(), options->device, &error);
      if (status != QGATE_OK) return refuse(status, error);
#else
      return refuse(QGATE_ERR_UNSUPPORTED, "this libqgate_ggml.so was built without ggml's CUDA backend");
#endif
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
  return ctx ? ctx->path : int32_t(QGATE_PATH_FROM_ENV);
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
  if (!is_abi_weight_type(type))
    return fail(ctx, QGATE_ERR_INVALID_ARGUMENT, "unknown weight type id " + std::to_string(type));
  const auto wtype = static_cast<ggml_type>(type);
  if (od <= 0 || k <= 0 || max_nt <= 0)
    return fail(ctx, QGATE_ERR_INVALID_ARGUMENT,
                "sizes must be positive: od=" + std::to_string(od) + " k=" + std::to_string(k) +
                    " max_nt=" + std::to_string(max_nt));
  if (od > kMaxDimension || k > kMaxDimension || max_nt > kMaxDimension)
    return fail(ctx, QGATE_ERR_INVALID_ARGUMENT, "a dimension exceeds 2^31");
  const int64_t block = ggml_blck_size(wtype);
  if (block <= 0 || k % block != 0)
    return fail(ctx, QGATE_ERR_INVALID_ARGUMENT,
                "k=" + std::to_string(k) + " is not a multiple of " + ggml_type_name(wtype) +
                    "'s block of " + std::to_string(block));
  try {
    auto gemm = std::make_unique<qgate_gemm>();
    gemm->ctx = ctx;
    gemm->od = od;
    gemm->k = k;
    gemm->max_nt = max_nt;

    gemm->weight_meta.reset(new_metadata_context(1, 0));
    gemm->io_meta.reset(new_metadata_context(2, 0));
    if (!gemm->weight_meta || !gemm->io_meta)
      return fail(ctx, QGATE_ERR_OUT_OF_MEMORY, "ggml_init failed for the tensor metadata");
    const ggml_type stored = ctx->path == QGATE_PATH_MMQ ? wtype : GGML_TYPE_F16;
    gemm->weight = ggml_new_tensor_2d(gemm->weight_meta.get(), stored, k, od);
    ggml_set_name(gemm->weight, "weight");
    gemm->activations = ggml_new_tensor_2d(gemm->io_meta.get(), GGML_TYPE_F32, k, max_nt);
    ggml_set_name(gemm->activations, "activations");
    gemm->output = ggml_new_tensor_2d(gemm->io_meta.get(), GGML_TYPE_F32, od, max_nt);
    ggml_set_name(gemm->output, "output");

    gemm->weight_buffer.reset(ggml_backend_alloc_ctx_tensors(gemm->weight_meta.get(), ctx->ggml));
    if (!gemm->weight_buffer)
      return fail(ctx, QGATE_ERR_OUT_OF_MEMORY,
                  "ggml could not allocate " + std::to_string(ggml_nbytes(gemm->weight)) +
                      " bytes of weights on " + ggml_backend_name(ctx->ggml));
    gemm->io_buffer.reset(ggml_backend_alloc_ctx_tensors(gemm->io_meta.get(), ctx->ggml));
    if (!gemm->io_buffer)
      return fail(ctx, QGATE_ERR_OUT_OF_MEMORY,
                  "ggml could not allocate the activation and output tensors on " +
                      std::string(ggml_backend_name(ctx->ggml)));
    ggml_backend_buffer_set_usage(gemm->weight_buffer.get(), GGML_BACKEND_BUFFER_USAGE_WEIGHTS);

    qgate_status status = upload_weights(gemm.get(), wtype, weight_blocks);
    if (status != QGATE_OK) return status;
    TokenGraph* graph = nullptr;
    status = token_graph(gemm.get(), max_nt, &graph);
    if (status != QGATE_OK) return status;
    if (!ggml_backend_supports_op(ctx->ggml, graph->y))
      return fail(ctx, QGATE_ERR_UNSUPPORTED,
                  std::string(ggml_backend_name(ctx->ggml)) + " does not run MUL_MAT with " +
                      ggml_type_name(stored) + " weights");
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
                "nt=" + std::to_string(nt) + " is outside [1, max_nt=" + std::to_string(gemm->max_nt) + "]");
  try {
    TokenGraph* graph = nullptr;
    const qgate_status status = token_graph(gemm, nt, &graph);
    if (status != QGATE_OK) return status;
#if defined(QGATE_GGML_HAVE_CUDA)
    if (ctx->backend == QGATE_BACKEND_CUDA) return run_cuda(gemm, graph, x, nt, y, stream);
#endif
    (void)stream;
    return run_cpu(gemm, graph, x, nt, y);
  } catch (const std::bad_alloc&) {
    return fail(ctx, QGATE_ERR_OUT_OF_MEMORY, "out of host memory running the GEMM");
  } catch (const std::exception& e) {
    return fail(ctx, QGATE_ERR_INTERNAL, e.what());
  }
}

QGATE_EXPORT int64_t qgate_gemm_resident_bytes(const qgate_gemm* gemm) {
  return gemm && gemm->weight_buffer ? int64_t(ggml_backend_buffer_get_size(gemm->weight_buffer.get())) : 0;
}

QGATE_EXPORT void qgate_gemm_release(qgate_gemm* gemm) { delete gemm; }

}  // extern "C"
