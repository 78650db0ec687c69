// The CUDA backend of libqgate_ref.so: owns the device-resident copy of a prepared weight matrix
// and its activation scratch, and enqueues the two kernels of a run on the caller's stream.
//   MMQ path: raw ggml blocks uploaded unchanged + q8 activation scratch for max_nt tokens;
//             run = quantize activations (activation_quant.cu) + an MMQ GEMM: for 1 and 2 tokens
//             the dp4a GEMV (mmq_gemv.cu; not q8_0, q5_K at 1 only), to 8 the decode kernel
//             (mmq_decode.cu); above, on an
//             sm_90 device and k % 256 == 0, the wgmma kernel (mmq_wgmma.cu); else the tile kernel
//             (mmq_gemm.cu). Each kernel reads its own q8 layout, which the quantizer writes.
//             QGATE_REF_MMQ_KERNEL overrides the choice for measurements (see below).
//   f16 path: weights dequantized on the host (qgate::quant, the same decoder the reference uses)
//             and uploaded as a resident f16 copy + f16 activation scratch;
//             run = f32->f16 conversion + the f16 GEMM: cuBLASLt's (f32 accumulation, dlopen'ed),
//             as an engine calls it on dequantized weights; qgate's own tensor-core kernel
//             (f16_gemm.cu) when libcublasLt cannot be loaded, or with QGATE_REF_F16_GEMM=kernel.
//             cuBLASLt is loaded, and one small GEMM run, when the f16 context is created: the
//             library cannot be unloaded and keeps ~144 MiB of host memory, so it is set up once
//             per process, before the worker's first memory reading, never per GEMM.
// Host C++ only (built by the host compiler); kernels are reached through cuda/launchers.h.
// Every entry point calls cudaSetDevice first: the worker may call from threads of its own.
// One PreparedGemm owns one activation scratch, so its runs must be ordered (one stream, or the
// caller's own synchronisation); runs of different PreparedGemms may overlap freely.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cuda/launchers.h"
#include "qgate/cuda/cublaslt_baseline.h"
#include "detail/gemm_backend.h"
#include "qgate/quant/half.h"
#include "qgate/quant/quantize.h"

#ifndef QGATE_CUDA_ARCHS
#define QGATE_CUDA_ARCHS ""
#endif

namespace qgate::kernels {
namespace {

std::string cuda_message(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

std::string gib(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// a * b for non-negative sizes, false when it does not fit in int64.
bool checked_mul(int64_t a, int64_t b, int64_t* out) {
  if (a < 0 || b < 0) return false;
  if (a != 0 && b > INT64_MAX / a) return false;
  *out = a * b;
  return true;
}

// The kernels' own limits (launchers.h): grid.y = ceil(od / tile rows) <= 65535, int indices.
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMmqTileRows = 64;
constexpr int64_t kF16TileRows = 128;

// The most tokens the GEMV serves for a type; from there to kDecodeMaxTokens the decode kernel does.
// Measured on the H200 at the 7B shapes (bench/RESULTS.md, mmq-v7): with 4-row groups the GEMV is
// ahead at 1 and 2 tokens (q4_0 at 4096 x 14336: 12.2 against 20.7 us, and 17.1 against 20.9), the
// decode kernel's n8 mma from 3 tokens, at 2 for q5_K (27.4 against 27.4, and behind at k = 4096),
// and at every count for q8_0 (34-byte blocks).
int64_t gemv_tokens(quant::WeightType type) {
  if (type == quant::WeightType::q8_0) return 0;
  return type == quant::WeightType::q5_K ? 1 : 2;
}

// The MMQ path's kernels (launchers.h), chosen per run by token count, device and shape.
enum class MmqKernel { gemv, decode, wgmma, tile };

/// The MMQ kernels QGATE_REF_MMQ_KERNEL leaves to the dispatcher, so that one build can measure
/// each: unset, the measured choice; "tile": above 8 tokens the tile kernel serves even on Hopper;
/// "decode": the mma decode kernel serves every token count up to 8; "gemv": the GEMV does.
struct MmqKernelChoice {
  int64_t gemv_tokens = 0;  // the GEMV up to this many tokens, the decode kernel above
  bool wgmma = true;
};
MmqKernelChoice mmq_kernel_choice_from_environment(quant::WeightType type) {
  MmqKernelChoice choice;
  choice.gemv_tokens = gemv_tokens(type);
  const char* value = std::getenv("QGATE_REF_MMQ_KERNEL");
  if (value == nullptr) return choice;
  if (std::strcmp(value, "tile") == 0) choice.wgmma = false;
  if (std::strcmp(value, "decode") == 0) choice.gemv_tokens = 0;
  if (std::strcmp(value, "gemv") == 0) choice.gemv_tokens = cuda::kGemvMaxTokens;
  return choice;
}

class CudaPreparedGemm final : public PreparedGemm {
 public:
  CudaPreparedGemm(int device, GemmPath path, quant::WeightType type, int64_t od, int64_t k,
                   int64_t max_nt, void* weights, void* scratch, int64_t resident,
                   std::unique_ptr<cuda::CublasLtF16Gemm> cublaslt)
      : device_(device), path_(path), type_(type), od_(od), k_(k), max_nt_(max_nt),
        weights_(weights), scratch_(scratch), resident_(resident), cublaslt_(std::move(cublaslt)) {}

  ~CudaPreparedGemm() override {
    cublaslt_.reset();  // its handle and workspace, before the device memory goes
    // Errors are ignored on purpose: at process exit the runtime may already be unloading.
    if (cudaSetDevice(device_) == cudaSuccess) {
      cudaFree(weights_);
      cudaFree(scratch_);
    }
    (void)cudaGetLastError();
  }

  CallResult run(const float* x, int64_t nt, float* y, void* stream) override {
    if (x == nullptr || y == nullptr)
      return CallResult::fail(QGATE_ERR_INVALID_ARGUMENT, "x and y must be device pointers, not NULL");
    if (nt < 1 || nt > max_nt_)
      return CallResult::fail(QGATE_ERR_INVALID_ARGUMENT,
                              "nt = " + std::to_string(nt) + " is outside 1.." + std::to_string(max_nt_) +
                                  " (the max_nt this GEMM was prepared for)");
    cudaError_t e = cudaSetDevice(device_);
    if (e != cudaSuccess) return CallResult::fail(QGATE_ERR_BACKEND, "cudaSetDevice: " + cuda_message(e));
    // A stale non-sticky error from an earlier, unrelated call must not be reported as ours.
    (void)cudaGetLastError();

    int rc = 0;
    const char* step = "";
    if (path_ == GemmPath::mmq) {
      // Up to 8 tokens the dp4a GEMV or the weights-as-A decode kernel, bound by one read of the
      // weights; above, the wgmma kernel on a Hopper device (when the shape suits it), else the
      // tile kernel.
      const auto type = static_cast<int32_t>(type_);
      const MmqKernel kernel = nt <= choice_.gemv_tokens                            ? MmqKernel::gemv
                               : nt <= cuda::kDecodeMaxTokens                       ? MmqKernel::decode
                               : choice_.wgmma && cuda::mmq_wgmma_usable(nt, k_) ? MmqKernel::wgmma
                                                                                    : MmqKernel::tile;
      step = "q8 activation quantizer";
      const bool decode_layout = kernel == MmqKernel::gemv || kernel == MmqKernel::decode;
      rc = decode_layout                ? cuda::launch_quantize_q8_decode(x, nt, k_, scratch_, stream)
           : kernel == MmqKernel::wgmma ? cuda::launch_quantize_q8_kmajor(x, nt, k_, scratch_, stream)
                                        : cuda::launch_quantize_q8(x, nt, k_, scratch_, stream);
      if (rc == 0) {
        switch (kernel) {
          case MmqKernel::gemv:
            step = "MMQ GEMV";
            rc = cuda::launch_mmq_gemv(type, weights_, od_, k_, scratch_, nt, y, stream);
            break;
          case MmqKernel::decode:
            step = "MMQ decode GEMM";
            rc = cuda::launch_mmq_decode(type, weights_, od_, k_, scratch_, nt, y, stream);
            break;
          case MmqKernel::wgmma:
            step = "MMQ wgmma GEMM";
            rc = cuda::launch_mmq_wgmma(type, weights_, od_, k_, scratch_, nt, y, stream);
            break;
          case MmqKernel::tile:
            step = "MMQ GEMM";
            rc = cuda::launch_mmq_gemm(type, weights_, od_, k_, scratch_, nt, y, stream);
            break;
        }
      }
    } else {
      step = "f32->f16 conversion";
      rc = cuda::launch_f32_to_f16(x, scratch_, nt * k_, stream);
      if (rc == 0 && cublaslt_) {
        // cuBLASLt's plan is per nt; a plan it cannot make sends this GEMM to the kernel for good.
        std::string why;
        if (nt != cublaslt_nt_) why = cublaslt_->prepare(nt, od_, k_);
        if (why.empty()) {
          cublaslt_nt_ = nt;
          why = cublaslt_->run(scratch_, weights_, y, stream);
          if (why.empty()) return CallResult::ok();
          return CallResult::fail(QGATE_ERR_BACKEND, "cuBLASLt f16 GEMM failed: " + why);
        }
        cublaslt_.reset();
      }
      if (rc == 0) {
        step = "f16 GEMM";
        rc = cuda::launch_f16_gemm(scratch_, weights_, nt, od_, k_, y, stream);
      }
    }
    if (rc != 0) {
      (void)cudaGetLastError();
      return CallResult::fail(QGATE_ERR_BACKEND, std::string("CUDA launch of the ") + step + " failed: " +
                                                     cuda_message(static_cast<cudaError_t>(rc)));
    }
    return CallResult::ok();
  }

  int64_t resident_bytes() const override { return resident_; }

 private:
  int device_;
  GemmPath path_;
  quant::WeightType type_;
  int64_t od_, k_, max_nt_;
  void* weights_;
  void* scratch_;
  int64_t resident_;
  std::unique_ptr<cuda::CublasLtF16Gemm> cublaslt_;  // the f16 path's GEMM when loaded
  int64_t cublaslt_nt_ = 0;                           // the nt its plan was made for
  MmqKernelChoice choice_ = mmq_kernel_choice_from_environment(type_);  // type_ is set first
};

/// The f16 path's cuBLASLt, loaded and run once on a small GEMM so that everything it loads (the
/// library, its handle, the first kernels) is loaded when the context is created. Null when it
/// cannot be (the own kernel then serves) or when QGATE_REF_F16_GEMM=kernel.
std::unique_ptr<cuda::CublasLtF16Gemm> prime_cublaslt() {
  const char* choice = std::getenv("QGATE_REF_F16_GEMM");
  if (choice != nullptr && std::strcmp(choice, "kernel") == 0) return nullptr;
  std::string why;
  auto lt = cuda::CublasLtF16Gemm::load(&why);
  if (!lt) return nullptr;
  constexpr int64_t kNt = 16, kOd = 256, kK = 256;
  void *x = nullptr, *w = nullptr, *y = nullptr;
  bool ok = cudaMalloc(&x, kNt * kK * 2) == cudaSuccess && cudaMalloc(&w, kOd * kK * 2) == cudaSuccess &&
            cudaMalloc(&y, kNt * kOd * 4) == cudaSuccess;
  ok = ok && cudaMemset(x, 0, kNt * kK * 2) == cudaSuccess && cudaMemset(w, 0, kOd * kK * 2) == cudaSuccess;
  ok = ok && lt->prepare(kNt, kOd, kK).empty() && lt->run(x, w, static_cast<float*>(y), nullptr).empty();
  ok = ok && cudaDeviceSynchronize() == cudaSuccess;
  cudaFree(x);
  cudaFree(w);
  cudaFree(y);
  (void)cudaGetLastError();
  return ok ? std::move(lt) : nullptr;
}

class CudaBackend final : public GemmBackend {
 public:
  CudaBackend(GemmPath path, int device)
      : path_(path), device_(device), primer_(path == GemmPath::f16 ? prime_cublaslt() : nullptr) {}

  CallResult prepare(quant::WeightType type, int64_t od, int64_t k, const void* weight_blocks,
                     int64_t max_nt, std::unique_ptr<PreparedGemm>* out) override {
    out->reset();
    if (weight_blocks == nullptr || od < 1 || k < 1 || max_nt < 1)
      return CallResult::fail(QGATE_ERR_INVALID_ARGUMENT, "od, k and max_nt must be positive and the weights non-NULL");
    const bool mmq = path_ == GemmPath::mmq;

    // Sizes first: a request that cannot fit must be refused before anything is touched.
    int64_t elems = 0, weight_bytes = 0, scratch_bytes = 0, total = 0;
    const int64_t host_row_bytes = static_cast<int64_t>(quant::row_bytes(type, k));
    bool fits = checked_mul(od, k, &elems);
    fits = fits && checked_mul(od, mmq ? host_row_bytes : 2 * k, &weight_bytes);
    // The MMQ scratch holds any of the three q8 layouts; the k-major one pads tokens to 4.
    fits = fits && checked_mul(mmq && max_nt < INT64_MAX - 3 ? max_nt + 3 : max_nt, mmq ? (k / 32) * cuda::kQ8BlockBytes : 2 * k, &scratch_bytes);
    fits = fits && weight_bytes <= INT64_MAX - scratch_bytes;
    if (!fits)
      return CallResult::fail(QGATE_ERR_OUT_OF_MEMORY, "od x k x max_nt is too large to address");
    total = weight_bytes + scratch_bytes;

    cudaError_t e = cudaSetDevice(device_);
    if (e != cudaSuccess) return CallResult::fail(QGATE_ERR_BACKEND, "cudaSetDevice: " + cuda_message(e));
    size_t free_b = 0, total_b = 0;
    e = cudaMemGetInfo(&free_b, &total_b);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return CallResult::fail(QGATE_ERR_BACKEND, "cudaMemGetInfo: " + cuda_message(e));
    }
    if (static_cast<uint64_t>(total) > free_b)
      return CallResult::fail(QGATE_ERR_OUT_OF_MEMORY,
                              std::string(mmq ? "MMQ" : "f16") + " GEMM of od=" + std::to_string(od) +
                                  " k=" + std::to_string(k) + " max_nt=" + std::to_string(max_nt) + " needs " +
                                  gib(static_cast<double>(total)) + ", device has " +
                                  gib(static_cast<double>(free_b)) + " free of " +
                                  gib(static_cast<double>(total_b)));

    // The kernels' indexing limits (checked after memory: a huge request is an OOM, not a shape error).
    const int64_t tile_rows = mmq ? kMmqTileRows : kF16TileRows;
    if ((od + tile_rows - 1) / tile_rows > kMaxGridY || max_nt > INT32_MAX || k > INT32_MAX)
      return CallResult::fail(QGATE_ERR_UNSUPPORTED, "od=" + std::to_string(od) + " exceeds the CUDA kernels' limit of " +
                                                         std::to_string(kMaxGridY * tile_rows) + " rows");

    void* weights = nullptr;
    void* scratch = nullptr;
    auto release = [&] {
      cudaFree(weights);
      cudaFree(scratch);
      (void)cudaGetLastError();  // clear the error a failed cudaMalloc left behind
    };
    e = cudaMalloc(&weights, static_cast<size_t>(weight_bytes));
    if (e == cudaSuccess) e = cudaMalloc(&scratch, static_cast<size_t>(scratch_bytes));
    if (e != cudaSuccess) {
      release();
      return CallResult::fail(QGATE_ERR_OUT_OF_MEMORY, "cudaMalloc of " + gib(static_cast<double>(total)) +
                                                           " failed: " + cuda_message(e));
    }

    if (mmq) {
      // Raw blocks, unchanged: the kernel decodes ggml's layout itself.
      e = cudaMemcpy(weights, weight_blocks, static_cast<size_t>(weight_bytes), cudaMemcpyHostToDevice);
    } else {
      e = upload_f16(type, od, k, static_cast<const uint8_t*>(weight_blocks), host_row_bytes,
                     static_cast<uint16_t*>(weights));
    }
    if (e != cudaSuccess) {
      release();
      return CallResult::fail(QGATE_ERR_BACKEND, "uploading the weights failed: " + cuda_message(e));
    }
    std::unique_ptr<cuda::CublasLtF16Gemm> cublaslt;
    if (!mmq && primer_) {
      std::string why;
      cublaslt = cuda::CublasLtF16Gemm::load(&why);  // null (the kernel serves) when it cannot load
      (void)cudaGetLastError();
    }
    *out = std::make_unique<CudaPreparedGemm>(device_, path_, type, od, k, max_nt, weights, scratch, total,
                                              std::move(cublaslt));
    return CallResult::ok();
  }

 private:

  // Dequantizes row by row into f16 and uploads in slices of ~32 M elements, so host memory stays
  // bounded whatever the matrix size.
  static cudaError_t upload_f16(quant::WeightType type, int64_t od, int64_t k, const uint8_t* src,
                                int64_t row_bytes, uint16_t* dst) {
    const int64_t rows_per_slice = std::max<int64_t>(1, (int64_t{32} << 20) / k);
    std::vector<float> row(static_cast<size_t>(k));
    std::vector<uint16_t> slice(static_cast<size_t>(std::min(rows_per_slice, od) * k));
    for (int64_t r0 = 0; r0 < od; r0 += rows_per_slice) {
      const int64_t rows = std::min(rows_per_slice, od - r0);
      for (int64_t r = 0; r < rows; ++r) {
        quant::dequantize_row(type, src + (r0 + r) * row_bytes, row.data(), k);
        uint16_t* o = slice.data() + r * k;
        for (int64_t i = 0; i < k; ++i) o[i] = quant::f32_to_f16(row[static_cast<size_t>(i)]);
      }
      const cudaError_t e = cudaMemcpy(dst + r0 * k, slice.data(), static_cast<size_t>(rows * k) * 2,
                                       cudaMemcpyHostToDevice);
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  }

  GemmPath path_;
  int device_;
  std::unique_ptr<cuda::CublasLtF16Gemm> primer_;  // set when the f16 path runs on cuBLASLt
};

}  // namespace

std::unique_ptr<GemmBackend> make_cuda_backend(GemmPath path, int device, CallResult* error) {
  auto fail = [&](std::string msg, qgate_status status = QGATE_ERR_BACKEND) -> std::unique_ptr<GemmBackend> {
    (void)cudaGetLastError();
    if (error != nullptr) *error = CallResult::fail(status, std::move(msg));
    return nullptr;
  };
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) return fail("no usable CUDA device: " + cuda_message(e));
  if (count == 0) return fail("no CUDA device found");
  if (device < 0 || device >= count)
    return fail("CUDA device " + std::to_string(device) + " does not exist (" + std::to_string(count) +
                " device(s) visible)");
  e = cudaSetDevice(device);
  if (e != cudaSuccess) return fail("cudaSetDevice(" + std::to_string(device) + "): " + cuda_message(e));
  cudaDeviceProp prop{};
  e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess) return fail("cudaGetDeviceProperties: " + cuda_message(e));
  // Both kernels are built for sm_80+: MMQ needs the int8 mma.m16n8k32, and the f16 GEMM uses
  // cp.async and mma.m16n8k16 (f32 accumulate), which sm_7x lacks in this form.
  if (prop.major < 8) {
    return fail(std::string("the ") + (path == GemmPath::mmq ? "MMQ" : "f16") +
                    " path of this build needs compute capability 8.0 or newer; device " + std::to_string(device) +
                    " (" + prop.name + ") is " + std::to_string(prop.major) + "." + std::to_string(prop.minor),
                QGATE_ERR_UNSUPPORTED);
  }
  // Create the primary context now, so a broken device fails here and not in the first prepare.
  e = cudaFree(nullptr);
  if (e != cudaSuccess) return fail("creating the CUDA context failed: " + cuda_message(e));
  return std::make_unique<CudaBackend>(path, device);
}

bool cuda_backend_compiled() { return true; }

const char* cuda_archs_compiled() { return QGATE_CUDA_ARCHS; }

}  // namespace qgate::kernels
