// The CUDA backend against the CPU references (parity, both paths, all 8 types, odd tile edges,
// partial k tiles, the 7B shape), its kernels' building blocks (the q8 quantizer bit for bit, the
// f16 conversion), argument checks, out-of-memory handling, determinism, and the cuBLASLt
// baseline. Needs a CUDA device; gpu_test_main.cpp exits 77 without one.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "qgate/cuda/cublaslt_baseline.h"
#include "cuda/launchers.h"
#include "detail/gemm_backend.h"
#include "qgate/quant/block_formats.h"
#include "qgate/quant/half.h"
#include "qgate/quant/mmq_math.h"
#include "qgate/quant/quantize.h"
#include "qgate_expectation.h"

namespace qgate::kernels {
namespace {

using quant::WeightType;

#define ASSERT_CUDA(call)                                                          \
  do {                                                                             \
    const cudaError_t e_ = (call);                                                 \
    ASSERT_EQ(e_, cudaSuccess) << #call << ": " << cudaGetErrorString(e_);         \
  } while (0)

// Device memory owned for one test.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&p_, bytes) != cudaSuccess) p_ = nullptr;
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename T = void>
  T* get() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_;
};

std::vector<float> uniform(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Shape { int64_t nt, od, k; };

const char* path_name(GemmPath p) { return p == GemmPath::mmq ? "mmq" : "f16"; }

std::string describe(GemmPath path, WeightType type, Shape s, uint32_t seed) {
  return std::string(path_name(path)) + " " + std::string(quant::traits(type).name) + " " +
         std::to_string(s.nt) + "x" + std::to_string(s.od) + "x" + std::to_string(s.k) + " seed " +
         std::to_string(seed);
}

struct CaseResult {
  bool ran = false;
  double max_diff = INFINITY;
  double nmse = INFINITY;
  std::vector<float> y;  // first run's output
};

// One case end to end: random weights and activations (fixed seed), prepare, poison y with NaN
// (0xFF bytes), run on a stream, check every element was written and finite, compare with the
// CPU reference of the path. With `repeat`, runs again and demands bit-identical output.
CaseResult run_case(GemmPath path, WeightType type, Shape s, uint32_t seed, bool repeat = false) {
  CaseResult r;
  const std::string what = describe(path, type, s, seed);
  const auto w = uniform(static_cast<size_t>(s.od * s.k), seed);
  const auto x = uniform(static_cast<size_t>(s.nt * s.k), seed + 1);
  const auto blocks = quant::quantize_matrix(type, w.data(), s.od, s.k);

  CallResult error;
  auto backend = make_cuda_backend(path, 0, &error);
  EXPECT_NE(backend, nullptr) << error.message;
  if (!backend) return r;
  std::unique_ptr<PreparedGemm> gemm;
  const CallResult prepared = backend->prepare(type, s.od, s.k, blocks.data(), s.nt, &gemm);
  EXPECT_TRUE(prepared) << what << ": " << prepared.message;
  if (!prepared) return r;
  EXPECT_GT(gemm->resident_bytes(), 0);

  const size_t ybytes = static_cast<size_t>(s.nt * s.od) * sizeof(float);
  DeviceBuffer dx(x.size() * sizeof(float)), dy(ybytes);
  EXPECT_NE(dx.get(), nullptr);
  EXPECT_NE(dy.get(), nullptr);
  if (!dx.get() || !dy.get()) return r;
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dx.get(), x.data(), dx.bytes(), cudaMemcpyHostToDevice), cudaSuccess);

  auto run_once = [&](std::vector<float>* y) -> bool {
    EXPECT_EQ(cudaMemsetAsync(dy.get(), 0xFF, ybytes, stream), cudaSuccess);  // NaN poison
    const CallResult ran = gemm->run(dx.get<float>(), s.nt, dy.get<float>(), stream);
    EXPECT_TRUE(ran) << what << ": " << ran.message;
    if (!ran) return false;
    const cudaError_t e = cudaStreamSynchronize(stream);
    EXPECT_EQ(e, cudaSuccess) << what << ": " << cudaGetErrorString(e);
    if (e != cudaSuccess) return false;
    y->resize(static_cast<size_t>(s.nt * s.od));
    EXPECT_EQ(cudaMemcpy(y->data(), dy.get(), ybytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return true;
  };
  if (!run_once(&r.y)) {
    cudaStreamDestroy(stream);
    return r;
  }
  if (repeat) {
    std::vector<float> y2;
    if (run_once(&y2)) {
      EXPECT_EQ(std::memcmp(r.y.data(), y2.data(), ybytes), 0) << what << ": two runs differ";
    }
  }
  cudaStreamDestroy(stream);

  std::vector<double> ref(r.y.size());
  if (path == GemmPath::mmq) {
    ref = qgate::test_support::qgate_mmq_expectation(type, blocks.data(), s.od, s.k, x.data(), s.nt);
  } else {
    ref = qgate::test_support::qgate_f16_expectation(type, blocks.data(), s.od, s.k, x.data(), s.nt);
  }
  double max_diff = 0, err2 = 0, ref2 = 0;
  size_t bad = 0, first_bad = 0;
  for (size_t i = 0; i < r.y.size(); ++i) {
    if (!std::isfinite(r.y[i])) {
      if (bad++ == 0) first_bad = i;
      continue;
    }
    const double d = static_cast<double>(r.y[i]) - ref[i];
    max_diff = std::max(max_diff, std::fabs(d));
    err2 += d * d;
    ref2 += ref[i] * ref[i];
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " outputs unwritten or not finite, first at token "
                     << first_bad / s.od << " row " << first_bad % s.od;
  r.ran = bad == 0;
  r.max_diff = bad == 0 ? max_diff : INFINITY;
  r.nmse = ref2 > 0 ? err2 / ref2 : err2;
  return r;
}

// ---------------------------------------------------------------------------------------------
class CudaBackendParity : public ::testing::TestWithParam<std::tuple<GemmPath, WeightType>> {};

TEST_P(CudaBackendParity, MatchesTheReferenceOnOddShapes) {
  const auto [path, type] = GetParam();
  // Odd tile edges in tokens and rows, 1..3 k tiles; every type's k is a multiple of 256 here.
  std::vector<Shape> shapes = {{1, 64, 256},   {1, 1, 256},     {7, 33, 256},  {64, 64, 512},
                               {65, 127, 512}, {130, 200, 768}, {3, 129, 1024}};
  // The decode path (nt <= 8): every token count, k split over all 8 warps with a short last
  // range, rows that are not a multiple of its 16.
  shapes.insert(shapes.end(), {{8, 300, 4864}, {4, 17, 2048}, {5, 47, 256 * 9}});
  if (quant::traits(type).block_elems == 32) {
    // Legacy types: k below one 256-k tile and partial final tiles (1, 3, 9, 10 chunks of 32);
    // for the decode path a k of 145 chunks (18 stages and one chunk) and rows of odd length.
    shapes.insert(shapes.end(), {{5, 17, 32}, {9, 70, 96}, {66, 65, 288}, {33, 31, 320}, {2, 130, 64},
                                 {6, 77, 32 * 145}, {8, 33, 32 * 9}});
  }
  uint32_t seed = 1000;
  for (Shape s : shapes) {
    const CaseResult r = run_case(path, type, s, ++seed);
    EXPECT_LT(r.max_diff, 1e-3) << describe(path, type, s, seed) << " nmse " << r.nmse;
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, CudaBackendParity,
    ::testing::Combine(::testing::Values(GemmPath::mmq, GemmPath::f16),
                       ::testing::Values(WeightType::q4_0, WeightType::q4_1, WeightType::q5_0,
                                         WeightType::q5_1, WeightType::q8_0, WeightType::q4_K,
                                         WeightType::q5_K, WeightType::q6_K)),
    [](const auto& info) {
      return std::string(path_name(std::get<0>(info.param))) + "_" +
             std::string(quant::traits(std::get<1>(info.param)).name);
    });

// The real 7B shape, on the types that carry most of its weights.
TEST(CudaBackendLarge, SevenBShapeMatchesAndIsDeterministic) {
  const Shape s{512, 4096, 4096};
  for (WeightType type : {WeightType::q4_0, WeightType::q6_K}) {
    for (GemmPath path : {GemmPath::mmq, GemmPath::f16}) {
      const CaseResult r = run_case(path, type, s, 7, /*repeat=*/true);
      EXPECT_LT(r.max_diff, 1e-3) << describe(path, type, s, 7) << " nmse " << r.nmse;
      std::printf("[ info ] %s: max|diff| %.3g, nmse %.3g\n", describe(path, type, s, 7).c_str(), r.max_diff,
                  r.nmse);
    }
  }
}

TEST(CudaBackend, RunsAreBitIdentical) {
  for (GemmPath path : {GemmPath::mmq, GemmPath::f16}) {
    const CaseResult r = run_case(path, WeightType::q4_K, Shape{130, 200, 768}, 77, /*repeat=*/true);
    EXPECT_TRUE(r.ran);
  }
}

// Calls queued back to back on one prepared GEMM share its activation scratch, and on sm_90 each
// call's quantizer is launched before the GEMM ahead of it has finished: it must not write the
// scratch before that GEMM is done reading it. Three calls (x1, x2, x1) queued without a sync must
// give what the same calls give one at a time, bit for bit, at every kernel's token counts.
TEST(CudaBackend, BackToBackCallsOnOneScratchMatchOneByOne) {
  const int64_t od = 4096, k = 14336, max_nt = 130;
  for (WeightType type : {WeightType::q4_0, WeightType::q6_K}) {
    const auto w = uniform(static_cast<size_t>(od * k), 90);
    const auto blocks = quant::quantize_matrix(type, w.data(), od, k);
    CallResult error;
    auto backend = make_cuda_backend(GemmPath::mmq, 0, &error);
    ASSERT_NE(backend, nullptr) << error.message;
    std::unique_ptr<PreparedGemm> gemm;
    const CallResult prepared = backend->prepare(type, od, k, blocks.data(), max_nt, &gemm);
    ASSERT_TRUE(prepared) << prepared.message;
    for (int64_t nt : {int64_t{1}, int64_t{2}, int64_t{8}, max_nt}) {
      const auto x1 = uniform(static_cast<size_t>(nt * k), 91), x2 = uniform(static_cast<size_t>(nt * k), 92);
      const size_t ybytes = static_cast<size_t>(nt * od) * sizeof(float);
      DeviceBuffer dx1(x1.size() * 4), dx2(x2.size() * 4), dy1(ybytes), dy2(ybytes), dy3(ybytes);
      ASSERT_CUDA(cudaMemcpy(dx1.get(), x1.data(), dx1.bytes(), cudaMemcpyHostToDevice));
      ASSERT_CUDA(cudaMemcpy(dx2.get(), x2.data(), dx2.bytes(), cudaMemcpyHostToDevice));
      const auto one_by_one = [&](const DeviceBuffer& dx, std::vector<float>* y) {
        ASSERT_TRUE(gemm->run(dx.get<float>(), nt, dy1.get<float>(), nullptr));
        ASSERT_CUDA(cudaDeviceSynchronize());
        y->resize(static_cast<size_t>(nt * od));
        ASSERT_CUDA(cudaMemcpy(y->data(), dy1.get(), ybytes, cudaMemcpyDeviceToHost));
      };
      std::vector<float> want1, want2;
      one_by_one(dx1, &want1);
      one_by_one(dx2, &want2);
      if (::testing::Test::HasFatalFailure()) return;
      ASSERT_NE(std::memcmp(want1.data(), want2.data(), ybytes), 0) << "the two activations must give different outputs";
      ASSERT_TRUE(gemm->run(dx1.get<float>(), nt, dy1.get<float>(), nullptr));
      ASSERT_TRUE(gemm->run(dx2.get<float>(), nt, dy2.get<float>(), nullptr));
      ASSERT_TRUE(gemm->run(dx1.get<float>(), nt, dy3.get<float>(), nullptr));
      ASSERT_CUDA(cudaDeviceSynchronize());
      std::vector<float> got(static_cast<size_t>(nt * od));
      for (const auto& [buf, want, which] :
           {std::tuple{&dy1, &want1, "first"}, std::tuple{&dy2, &want2, "second"}, std::tuple{&dy3, &want1, "third"}}) {
        ASSERT_CUDA(cudaMemcpy(got.data(), buf->get(), ybytes, cudaMemcpyDeviceToHost));
        EXPECT_EQ(std::memcmp(got.data(), want->data(), ybytes), 0)
            << quant::traits(type).name << " nt " << nt << ": the " << which << " of three queued calls differs";
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The quantizer must agree with the CPU bit for bit, including ties (x/d exactly k + 0.5), an all
// zero block (d = 0), a block whose d underflows f16 and a block of large values.
TEST(CudaActivationQuant, BitIdenticalToTheCpu) {
  const int64_t nt = 3, k = 32 * 40;
  auto x = uniform(static_cast<size_t>(nt * k), 5);
  for (int i = 0; i < 32; ++i) {
    x[i] = (i == 0) ? 127.0f : static_cast<float>(i - 16) + 0.5f;  // d = 1: every other value a tie
    x[32 + i] = 0.0f;
    x[64 + i] = 1e-30f * static_cast<float>(i % 7 - 3);
    x[96 + i] = 3e4f * static_cast<float>(i - 15);
    x[128 + i] = (i == 5) ? -1.0f : 0.25f * (i % 2 ? 1.0f : -1.0f) / 127.0f * 2.0f;  // negative amax
  }
  const quant::Q8Activations cpu = quant::quantize_activations_q8(x.data(), nt, k);

  DeviceBuffer dx(x.size() * sizeof(float)), dq(cuda::q8_activation_bytes(nt, k));
  ASSERT_NE(dx.get(), nullptr);
  ASSERT_NE(dq.get(), nullptr);
  ASSERT_CUDA(cudaMemcpy(dx.get(), x.data(), dx.bytes(), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemset(dq.get(), 0xAB, dq.bytes()));
  ASSERT_EQ(cuda::launch_quantize_q8(dx.get<float>(), nt, k, dq.get(), nullptr), 0);
  ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<uint8_t> q8(dq.bytes());
  ASSERT_CUDA(cudaMemcpy(q8.data(), dq.get(), q8.size(), cudaMemcpyDeviceToHost));

  const int64_t blocks = nt * k / 32;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = q8.data() + b * cuda::kQ8BlockBytes;
    for (int i = 0; i < 32; ++i)
      ASSERT_EQ(static_cast<int8_t>(blk[i]), cpu.q[static_cast<size_t>(b * 32 + i)]) << "block " << b << " elem " << i;
    uint16_t dbits;
    int32_t sum;
    std::memcpy(&dbits, blk + 32, 2);
    std::memcpy(&sum, blk + 36, 4);
    const float d = quant::f16_to_f32(dbits);
    ASSERT_EQ(std::memcmp(&d, &cpu.d[static_cast<size_t>(b)], 4), 0)
        << "block " << b << ": d " << d << " vs " << cpu.d[static_cast<size_t>(b)];
    ASSERT_EQ(sum, cpu.sum[static_cast<size_t>(b)]) << "block " << b;
    ASSERT_EQ(blk[34], 0);
    ASSERT_EQ(blk[35], 0);
  }

  // x 4 bytes off 16-byte alignment: the scalar loads give the same bytes.
  DeviceBuffer dx_off((x.size() + 1) * sizeof(float)), dq_off(dq.bytes());
  ASSERT_CUDA(cudaMemcpy(dx_off.get<float>() + 1, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemset(dq_off.get(), 0xAB, dq_off.bytes()));
  ASSERT_EQ(cuda::launch_quantize_q8(dx_off.get<float>() + 1, nt, k, dq_off.get(), nullptr), 0);
  std::vector<uint8_t> q8_off(dq_off.bytes());
  ASSERT_CUDA(cudaMemcpy(q8_off.data(), dq_off.get(), q8_off.size(), cudaMemcpyDeviceToHost));
  EXPECT_EQ(q8_off, q8) << "unaligned x";
}

// The decode layout holds the same numbers as the pad40 blocks, moved: quants in fragment order
// per (block, token), then the f16 scales and the int sums, each [k/32][nt]; and it fits in the
// pad40 scratch.
TEST(CudaActivationQuant, DecodeLayoutHoldsThePad40Numbers) {
  for (int64_t nt = 1; nt <= cuda::kDecodeMaxTokens; ++nt) {
    const int64_t k = 32 * 37, nb = k / 32;
    const auto x = uniform(static_cast<size_t>(nt * k), 40 + static_cast<uint32_t>(nt));
    const size_t bytes = cuda::q8_activation_bytes(nt, k);
    ASSERT_LE(cuda::q8_decode_sums_offset(nt, k) + static_cast<size_t>(nt * nb) * 4, bytes) << "nt " << nt;
    DeviceBuffer dx(x.size() * 4), dpad(bytes), ddec(bytes);
    ASSERT_CUDA(cudaMemcpy(dx.get(), x.data(), dx.bytes(), cudaMemcpyHostToDevice));
    ASSERT_EQ(cuda::launch_quantize_q8(dx.get<float>(), nt, k, dpad.get(), nullptr), 0);
    ASSERT_EQ(cuda::launch_quantize_q8_decode(dx.get<float>(), nt, k, ddec.get(), nullptr), 0);
    std::vector<uint8_t> pad(bytes), dec(bytes);
    ASSERT_CUDA(cudaMemcpy(pad.data(), dpad.get(), bytes, cudaMemcpyDeviceToHost));
    ASSERT_CUDA(cudaMemcpy(dec.data(), ddec.get(), bytes, cudaMemcpyDeviceToHost));
    const uint8_t* scales = dec.data() + cuda::q8_decode_scales_offset(nt, k);
    const uint8_t* sums = dec.data() + cuda::q8_decode_sums_offset(nt, k);
    for (int64_t tok = 0; tok < nt; ++tok)
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = pad.data() + (tok * nb + b) * cuda::kQ8BlockBytes;
        const uint8_t* q = dec.data() + (b * nt + tok) * 32;
        for (int j = 0; j < 32; ++j) {
          const int pos = j < 16 ? 8 * (j / 4) + j % 4 : 8 * ((j - 16) / 4) + 4 + j % 4;
          ASSERT_EQ(q[pos], blk[j]) << "nt " << nt << " token " << tok << " block " << b << " elem " << j;
        }
        ASSERT_EQ(std::memcmp(scales + (b * nt + tok) * 2, blk + 32, 2), 0) << "nt " << nt << " block " << b;
        ASSERT_EQ(std::memcmp(sums + (b * nt + tok) * 4, blk + 36, 4), 0) << "nt " << nt << " block " << b;
      }
  }
  DeviceBuffer dx(9 * 32 * 4), dq(cuda::q8_activation_bytes(9, 32));
  EXPECT_NE(cuda::launch_quantize_q8_decode(dx.get<float>(), 9, 32, dq.get(), nullptr), 0) << "9 tokens refused";
}

// Both MMQ kernels compute the same sums; only the f32 order of adding the 32-k blocks differs.
// At 1..8 tokens the decode kernel must agree with the tile kernel to f32 rounding, for every type.
TEST(CudaMmqDecode, AgreesWithTheTileKernel) {
  const int64_t od = 83, k = 256 * 6;
  for (WeightType type : quant::all_types()) {
    const auto w = uniform(static_cast<size_t>(od * k), 60);
    const auto blocks = quant::quantize_matrix(type, w.data(), od, k);
    DeviceBuffer dw(blocks.size());
    ASSERT_CUDA(cudaMemcpy(dw.get(), blocks.data(), blocks.size(), cudaMemcpyHostToDevice));
    for (int64_t nt : {1, 3, 8}) {
      const auto x = uniform(static_cast<size_t>(nt * k), 61 + static_cast<uint32_t>(nt));
      DeviceBuffer dx(x.size() * 4), dq(cuda::q8_activation_bytes(nt, k)), dy1(nt * od * 4), dy2(nt * od * 4);
      ASSERT_CUDA(cudaMemcpy(dx.get(), x.data(), dx.bytes(), cudaMemcpyHostToDevice));
      const auto t = static_cast<int32_t>(type);
      ASSERT_EQ(cuda::launch_quantize_q8(dx.get<float>(), nt, k, dq.get(), nullptr), 0);
      ASSERT_EQ(cuda::launch_mmq_gemm(t, dw.get(), od, k, dq.get(), nt, dy1.get<float>(), nullptr), 0);
      ASSERT_EQ(cuda::launch_quantize_q8_decode(dx.get<float>(), nt, k, dq.get(), nullptr), 0);
      ASSERT_EQ(cuda::launch_mmq_decode(t, dw.get(), od, k, dq.get(), nt, dy2.get<float>(), nullptr), 0);
      std::vector<float> y1(static_cast<size_t>(nt * od)), y2(y1.size());
      ASSERT_CUDA(cudaMemcpy(y1.data(), dy1.get(), dy1.bytes(), cudaMemcpyDeviceToHost));
      ASSERT_CUDA(cudaMemcpy(y2.data(), dy2.get(), dy2.bytes(), cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < y1.size(); ++i)
        ASSERT_NEAR(y2[i], y1[i], 1e-5 * (1.0 + std::fabs(y1[i])))
            << quant::traits(type).name << " nt " << nt << " token " << i / od << " row " << i % od;
    }
    DeviceBuffer dq9(cuda::q8_activation_bytes(9, k)), dy9(9 * od * 4);
    EXPECT_EQ(cuda::launch_mmq_decode(static_cast<int32_t>(type), dw.get(), od, k, dq9.get(), 9, dy9.get<float>(), nullptr),
              static_cast<int>(cudaErrorInvalidValue))
        << "9 tokens are the tile kernel's";
  }
}

// The GEMV against the tile kernel for one case: nt tokens of seeded activations, the tile kernel on
// `tile_weights` and the GEMV twice on `weights` (the same blocks, perhaps at another offset), into
// outputs that start as NaN. The GEMV must agree to f32 rounding, within a bound that grows with the
// number of 32-k blocks, write every element, and repeat itself bit for bit.
void expect_gemv_agrees(WeightType type, const void* tile_weights, const void* weights, int64_t od, int64_t k,
                        int64_t nt, uint32_t seed, const std::string& what) {
  const auto x = uniform(static_cast<size_t>(nt * k), seed);
  DeviceBuffer dx(x.size() * 4), dq(cuda::q8_activation_bytes(nt, k)), dy1(nt * od * 4), dy2(nt * od * 4),
      dy3(nt * od * 4);
  ASSERT_CUDA(cudaMemcpy(dx.get(), x.data(), dx.bytes(), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemset(dy2.get(), 0xff, dy2.bytes()));
  ASSERT_CUDA(cudaMemset(dy3.get(), 0xff, dy3.bytes()));
  const auto t = static_cast<int32_t>(type);
  ASSERT_EQ(cuda::launch_quantize_q8(dx.get<float>(), nt, k, dq.get(), nullptr), 0);
  ASSERT_EQ(cuda::launch_mmq_gemm(t, tile_weights, od, k, dq.get(), nt, dy1.get<float>(), nullptr), 0);
  ASSERT_EQ(cuda::launch_quantize_q8_decode(dx.get<float>(), nt, k, dq.get(), nullptr), 0);
  ASSERT_EQ(cuda::launch_mmq_gemv(t, weights, od, k, dq.get(), nt, dy2.get<float>(), nullptr), 0);
  ASSERT_EQ(cuda::launch_mmq_gemv(t, weights, od, k, dq.get(), nt, dy3.get<float>(), nullptr), 0);
  std::vector<float> y1(static_cast<size_t>(nt * od)), y2(y1.size()), y3(y1.size());
  ASSERT_CUDA(cudaMemcpy(y1.data(), dy1.get(), dy1.bytes(), cudaMemcpyDeviceToHost));
  ASSERT_CUDA(cudaMemcpy(y2.data(), dy2.get(), dy2.bytes(), cudaMemcpyDeviceToHost));
  ASSERT_CUDA(cudaMemcpy(y3.data(), dy3.get(), dy3.bytes(), cudaMemcpyDeviceToHost));
  // Reordering a sum of n f32 terms moves it by a few ulps per term: the bound grows with the
  // number of 32-k blocks (2e-7 each, 1e-5 at 48 blocks).
  const double per_block = 2e-7 * static_cast<double>(k / 32);
  for (size_t i = 0; i < y1.size(); ++i) {
    ASSERT_NEAR(y2[i], y1[i], per_block * (1.0 + std::fabs(y1[i])))
        << quant::traits(type).name << " " << what << " nt " << nt << " token " << i / od << " row " << i % od;
    ASSERT_EQ(std::memcmp(&y2[i], &y3[i], 4), 0) << quant::traits(type).name << " run to run, element " << i;
  }
}

// The GEMV computes the tile kernel's per-chunk sums in another f32 order, so at 1..8 tokens it must
// agree to f32 rounding, for every type: one short stage (k = 1536), many stages split over the
// warps of a row group in unequal shares, with q6_K's rows not a multiple of 16 bytes (k = 11008),
// rows that fill no CTA, and weights 2 bytes off 16-byte alignment. Two runs are bit-identical, and
// every result is written (the output starts as NaN).
TEST(CudaMmqGemv, AgreesWithTheTileKernel) {
  for (int64_t k : {int64_t{256 * 6}, int64_t{256 * 43}})
  for (WeightType type : quant::all_types()) {
    const int64_t od = k > 2048 ? 21 : 83;
    const auto w = uniform(static_cast<size_t>(od * k), 62);
    const auto blocks = quant::quantize_matrix(type, w.data(), od, k);
    DeviceBuffer dw(blocks.size() + 16), dw_tile(blocks.size());
    ASSERT_CUDA(cudaMemcpy(dw_tile.get(), blocks.data(), blocks.size(), cudaMemcpyHostToDevice));
    for (size_t offset : {size_t{0}, size_t{2}}) {
      uint8_t* weights = dw.get<uint8_t>() + offset;
      ASSERT_CUDA(cudaMemcpy(weights, blocks.data(), blocks.size(), cudaMemcpyHostToDevice));
      for (int64_t nt = 1; nt <= cuda::kGemvMaxTokens; ++nt) {
        expect_gemv_agrees(type, dw_tile.get(), weights, od, k, nt, 63 + static_cast<uint32_t>(nt),
                           "k " + std::to_string(k) + " offset " + std::to_string(offset));
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
  DeviceBuffer dq(cuda::q8_activation_bytes(9, 256)), dy(9 * 4 * 4), dw(4 * 18 * 9);
  EXPECT_EQ(cuda::launch_mmq_gemv(static_cast<int32_t>(WeightType::q4_0), dw.get(), 4, 256, dq.get(), 9,
                                  dy.get<float>(), nullptr),
            static_cast<int>(cudaErrorInvalidValue))
      << "9 tokens do not fit the decode layout";
  EXPECT_EQ(cuda::launch_mmq_gemv(static_cast<int32_t>(WeightType::q4_0), dw.get(), 4, 288, dq.get(), 1,
                                  dy.get<float>(), nullptr),
            0)
      << "k = 288 is 9 whole q4_0 blocks";
  EXPECT_EQ(cuda::launch_mmq_gemv(static_cast<int32_t>(WeightType::q4_K), dw.get(), 1, 288, dq.get(), 1,
                                  dy.get<float>(), nullptr),
            static_cast<int>(cudaErrorInvalidValue))
      << "q4_K needs whole 256-k super-blocks";
}

// The GEMV's grid holds only as many CTAs as the device keeps resident (at most 3 a multiprocessor
// with its shared memory), so with 6 row blocks per multiprocessor and one more each CTA works through
// several row blocks in turn, one ring across them, the last row block ragged. It must still agree
// with the tile kernel, bit-identically run to run, with every output written.
TEST(CudaMmqGemv, AgreesAcrossTheRowBlocksOfEachCta) {
  int sms = 0;
  ASSERT_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t k = 256 * 6, od = 8 * 6 * int64_t{sms} + 5;
  for (WeightType type : quant::all_types()) {
    const auto w = uniform(static_cast<size_t>(od * k), 72);
    const auto blocks = quant::quantize_matrix(type, w.data(), od, k);
    DeviceBuffer dw(blocks.size());
    ASSERT_CUDA(cudaMemcpy(dw.get(), blocks.data(), blocks.size(), cudaMemcpyHostToDevice));
    for (int64_t nt : {int64_t{1}, int64_t{2}, int64_t{3}, cuda::kGemvMaxTokens}) {
      expect_gemv_agrees(type, dw.get(), dw.get(), od, k, nt, 73 + static_cast<uint32_t>(nt), "row blocks");
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// The k-major layout holds the same numbers as the pad40 blocks: per block, every token's first 16
// quants, then every token's last 16; the scales and sums as f32 rows of ntp, each token in its
// slot (a permutation within each 16 tokens); and it fits in the scratch the backend allocates
// ((nt + 3) pad40 blocks per k/32).
TEST(CudaActivationQuant, KMajorLayoutHoldsThePad40Numbers) {
  std::vector<int64_t> slots;
  for (int64_t tok = 0; tok < 48; ++tok) slots.push_back(cuda::q8_kmajor_token_slot(tok));
  for (int64_t tok = 0; tok < 48; ++tok) {
    ASSERT_EQ(slots[static_cast<size_t>(tok)] / 16, tok / 16) << "a slot stays within its 16 tokens";
    ASSERT_EQ(std::count(slots.begin(), slots.end(), slots[static_cast<size_t>(tok)]), 1) << "slots are distinct";
  }
  EXPECT_EQ(cuda::q8_kmajor_token_slot(2), 4);   // t = 1
  EXPECT_EQ(cuda::q8_kmajor_token_slot(9), 3);   // a = 1, e = 1
  EXPECT_EQ(cuda::q8_kmajor_token_slot(27), 23);  // 16 + (a 1, t 1, e 1): 16 + 4 + 2 + 1
  for (int64_t nt : {9, 13, 130, 253}) {
    const int64_t k = 32 * 37, nb = k / 32, ntp = cuda::q8_kmajor_padded_tokens(nt);
    ASSERT_EQ(ntp % 16, 0);
    const auto x = uniform(static_cast<size_t>(nt * k), 70 + static_cast<uint32_t>(nt));
    ASSERT_LE(cuda::q8_kmajor_bytes(nt, k), cuda::q8_activation_bytes(nt + 3, k)) << "nt " << nt;
    const size_t bytes = cuda::q8_activation_bytes(nt + 3, k);
    DeviceBuffer dx(x.size() * 4), dpad(bytes), dkm(bytes);
    ASSERT_CUDA(cudaMemcpy(dx.get(), x.data(), dx.bytes(), cudaMemcpyHostToDevice));
    ASSERT_EQ(cuda::launch_quantize_q8(dx.get<float>(), nt, k, dpad.get(), nullptr), 0);
    ASSERT_EQ(cuda::launch_quantize_q8_kmajor(dx.get<float>(), nt, k, dkm.get(), nullptr), 0);
    std::vector<uint8_t> pad(bytes), km(bytes);
    ASSERT_CUDA(cudaMemcpy(pad.data(), dpad.get(), bytes, cudaMemcpyDeviceToHost));
    ASSERT_CUDA(cudaMemcpy(km.data(), dkm.get(), bytes, cudaMemcpyDeviceToHost));
    const float* scales = reinterpret_cast<const float*>(km.data() + cuda::q8_kmajor_scales_offset(nt, k));
    const float* sums = reinterpret_cast<const float*>(km.data() + cuda::q8_kmajor_sums_offset(nt, k));
    for (int64_t tok = 0; tok < nt; ++tok)
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* blk = pad.data() + (tok * nb + b) * cuda::kQ8BlockBytes;
        for (int j = 0; j < 32; ++j)
          ASSERT_EQ(km[static_cast<size_t>(((b * 2 + j / 16) * nt + tok) * 16 + j % 16)], blk[j])
              << "nt " << nt << " token " << tok << " block " << b << " elem " << j;
        uint16_t d = 0;
        int32_t sum = 0;
        std::memcpy(&d, blk + 32, 2);
        std::memcpy(&sum, blk + 36, 4);
        const int64_t slot = b * ntp + cuda::q8_kmajor_token_slot(tok);
        ASSERT_EQ(scales[slot], quant::f16_to_f32(d)) << "nt " << nt << " block " << b << " token " << tok;
        ASSERT_EQ(sums[slot], static_cast<float>(sum)) << "nt " << nt << " block " << b << " token " << tok;
      }
  }
}

// The wgmma kernel performs the tile kernel's f32 operations in the tile kernel's order, so on a
// Hopper device the two must agree bit for bit: every type, token counts that fill no tile (9, 130)
// and several tiles, rows that fill no tile, and weights 2 bytes off 16-byte alignment (the
// unaligned window path).
TEST(CudaMmqWgmma, BitIdenticalToTheTileKernel) {
  if (!cuda::mmq_wgmma_usable(9, 256)) GTEST_SKIP() << "the wgmma kernel needs a compute capability 9.0 device";
  // Both ways the kernel stages weights: tensor copies of 16-byte aligned rows (offset 0; q6_K's only at
  // k = 2048, where its rows are 1680 bytes and its stages start inside a 16-byte line), and per-row
  // bulk copies (offset 2, and q6_K's 1050-byte rows at k = 1280).
  const int64_t od = 200;
  for (int64_t k : {int64_t{256 * 5}, int64_t{256 * 8}})
  for (WeightType type : quant::all_types()) {
    const auto w = uniform(static_cast<size_t>(od * k), 80);
    const auto blocks = quant::quantize_matrix(type, w.data(), od, k);
    // The tile kernel reads its weights with aligned loads: it gets an aligned copy of the same blocks.
    DeviceBuffer dw(blocks.size() + 16), dw_tile(blocks.size());
    ASSERT_CUDA(cudaMemcpy(dw_tile.get(), blocks.data(), blocks.size(), cudaMemcpyHostToDevice));
    for (size_t offset : {size_t{0}, size_t{2}}) {
      uint8_t* weights = dw.get<uint8_t>() + offset;
      ASSERT_CUDA(cudaMemcpy(weights, blocks.data(), blocks.size(), cudaMemcpyHostToDevice));
      for (int64_t nt : {9, 130, 300}) {
        const auto x = uniform(static_cast<size_t>(nt * k), 81 + static_cast<uint32_t>(nt));
        DeviceBuffer dx(x.size() * 4), dq(cuda::q8_activation_bytes(nt + 3, k)), dy1(nt * od * 4), dy2(nt * od * 4);
        ASSERT_CUDA(cudaMemcpy(dx.get(), x.data(), dx.bytes(), cudaMemcpyHostToDevice));
        ASSERT_CUDA(cudaMemset(dy2.get(), 0xff, dy2.bytes()));  // NaN: a result never written shows
        const auto t = static_cast<int32_t>(type);
        ASSERT_EQ(cuda::launch_quantize_q8(dx.get<float>(), nt, k, dq.get(), nullptr), 0);
        ASSERT_EQ(cuda::launch_mmq_gemm(t, dw_tile.get(), od, k, dq.get(), nt, dy1.get<float>(), nullptr), 0);
        ASSERT_EQ(cuda::launch_quantize_q8_kmajor(dx.get<float>(), nt, k, dq.get(), nullptr), 0);
        ASSERT_EQ(cuda::launch_mmq_wgmma(t, weights, od, k, dq.get(), nt, dy2.get<float>(), nullptr), 0);
        std::vector<float> y1(static_cast<size_t>(nt * od)), y2(y1.size());
        ASSERT_CUDA(cudaMemcpy(y1.data(), dy1.get(), dy1.bytes(), cudaMemcpyDeviceToHost));
        ASSERT_CUDA(cudaMemcpy(y2.data(), dy2.get(), dy2.bytes(), cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < y1.size(); ++i)
          ASSERT_EQ(std::memcmp(&y1[i], &y2[i], 4), 0)
              << quant::traits(type).name << " k " << k << " offset " << offset << " nt " << nt << " token " << i / od << " row "
              << i % od << ": tile " << y1[i] << " wgmma " << y2[i];
      }
    }
  }
  DeviceBuffer dq(64), dy(64);
  EXPECT_EQ(cuda::launch_mmq_wgmma(static_cast<int32_t>(WeightType::q4_0), dq.get(), 1, 288, dq.get(), 9,
                                   dy.get<float>(), nullptr),
            static_cast<int>(cudaErrorInvalidValue))
      << "k must be a multiple of 256";
}

// Both kernels: n % 4 != 0 takes the scalar one; n = 4 * 25001 the vector one, whose last CTA is
// partly past the end.
TEST(CudaActivationQuant, F16ConversionMatchesTheHost) {
  for (const size_t n : {size_t{100003}, size_t{100004}}) {
    auto x = uniform(n, 9);
    const float specials[] = {0.0f, -0.0f, 65504.0f, 65520.0f, 1e-8f, 5.96e-8f, 2.98e-8f, 1e10f, -1e10f, 0.1f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; ++i) x[i] = specials[i];
    for (size_t i = 10; i < 2000; ++i) x[i] *= 70000.0f;  // overflow to inf and large values
    DeviceBuffer dx(x.size() * 4), dy(x.size() * 2 + 64);
    ASSERT_CUDA(cudaMemcpy(dx.get(), x.data(), dx.bytes(), cudaMemcpyHostToDevice));
    ASSERT_CUDA(cudaMemset(dy.get(), 0x7c, dy.bytes()));
    ASSERT_EQ(cuda::launch_f32_to_f16(dx.get<float>(), dy.get(), static_cast<int64_t>(x.size()), nullptr), 0);
    std::vector<uint16_t> y(x.size() + 32);
    ASSERT_CUDA(cudaMemcpy(y.data(), dy.get(), dy.bytes(), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], quant::f32_to_f16(x[i])) << "n " << n << ", x = " << x[i];
    for (size_t i = x.size(); i < y.size(); ++i) ASSERT_EQ(y[i], 0x7c7c) << "n " << n << ": written past the end";
  }
}

// ---------------------------------------------------------------------------------------------
TEST(CudaBackend, RefusesTokensOutsidePreparedRange) {
  for (GemmPath path : {GemmPath::mmq, GemmPath::f16}) {
    CallResult error;
    auto backend = make_cuda_backend(path, 0, &error);
    ASSERT_NE(backend, nullptr) << error.message;
    const Shape s{8, 40, 256};
    const auto w = uniform(static_cast<size_t>(s.od * s.k), 3);
    const auto blocks = quant::quantize_matrix(WeightType::q8_0, w.data(), s.od, s.k);
    std::unique_ptr<PreparedGemm> gemm;
    const CallResult prepared = backend->prepare(WeightType::q8_0, s.od, s.k, blocks.data(), s.nt, &gemm);
    ASSERT_TRUE(prepared) << prepared.message;
    DeviceBuffer dx(static_cast<size_t>((s.nt + 1) * s.k) * 4), dy(static_cast<size_t>((s.nt + 1) * s.od) * 4);
    EXPECT_EQ(gemm->run(dx.get<float>(), s.nt + 1, dy.get<float>(), nullptr).status, QGATE_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(gemm->run(dx.get<float>(), 0, dy.get<float>(), nullptr).status, QGATE_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(gemm->run(nullptr, 1, dy.get<float>(), nullptr).status, QGATE_ERR_INVALID_ARGUMENT);
  }
}

TEST(CudaBackend, HugeRequestIsOutOfMemoryAndTheContextSurvives) {
  for (GemmPath path : {GemmPath::mmq, GemmPath::f16}) {
    CallResult error;
    auto backend = make_cuda_backend(path, 0, &error);
    ASSERT_NE(backend, nullptr) << error.message;
    // od * k = 2^40 elements (~0.56 TiB of q4_0, 2 TiB of f16): refused before the weights are
    // read, so a small stand-in buffer is enough.
    const std::vector<uint8_t> stand_in(1024, 0);
    std::unique_ptr<PreparedGemm> gemm;
    const CallResult r = backend->prepare(WeightType::q4_0, int64_t{1} << 20, int64_t{1} << 20, stand_in.data(), 1, &gemm);
    EXPECT_EQ(r.status, QGATE_ERR_OUT_OF_MEMORY) << r.message;
    EXPECT_NE(r.message.find("GiB"), std::string::npos) << r.message;
    EXPECT_EQ(gemm, nullptr);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    // The context still works: a normal case on the same device passes.
    const CaseResult ok = run_case(path, WeightType::q4_0, Shape{9, 65, 256}, 11);
    EXPECT_LT(ok.max_diff, 1e-3);
  }
}

TEST(CudaBackend, BuildInfo) {
  EXPECT_TRUE(cuda_backend_compiled());
  EXPECT_STRNE(cuda_archs_compiled(), "");
  CallResult error;
  EXPECT_EQ(make_cuda_backend(GemmPath::mmq, 1 << 20, &error), nullptr);
  EXPECT_EQ(error.status, QGATE_ERR_BACKEND);
  EXPECT_NE(error.message.find("does not exist"), std::string::npos) << error.message;
}

// ---------------------------------------------------------------------------------------------
// The benchmark's cuBLASLt baseline computes the same product as the f16 path.
TEST(CublasLtBaseline, MatchesTheF16Reference) {
  std::string error;
  auto lt = cuda::CublasLtF16Gemm::load(&error);
  if (!lt) GTEST_SKIP() << "cuBLASLt not loadable: " << error;
  const Shape s{65, 127, 512};
  const WeightType type = WeightType::q4_K;
  const auto w = uniform(static_cast<size_t>(s.od * s.k), 21);
  const auto x = uniform(static_cast<size_t>(s.nt * s.k), 22);
  const auto blocks = quant::quantize_matrix(type, w.data(), s.od, s.k);
  // Host f16 copies: the same rounding the f16 path's prepare and conversion kernel apply.
  std::vector<uint16_t> w16(static_cast<size_t>(s.od * s.k)), x16(x.size());
  std::vector<float> row(static_cast<size_t>(s.k));
  const size_t rb = quant::row_bytes(type, s.k);
  for (int64_t r = 0; r < s.od; ++r) {
    quant::dequantize_row(type, blocks.data() + r * rb, row.data(), s.k);
    for (int64_t i = 0; i < s.k; ++i) w16[static_cast<size_t>(r * s.k + i)] = quant::f32_to_f16(row[static_cast<size_t>(i)]);
  }
  for (size_t i = 0; i < x.size(); ++i) x16[i] = quant::f32_to_f16(x[i]);
  DeviceBuffer dw(w16.size() * 2), dx(x16.size() * 2), dy(static_cast<size_t>(s.nt * s.od) * 4);
  ASSERT_CUDA(cudaMemcpy(dw.get(), w16.data(), dw.bytes(), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemcpy(dx.get(), x16.data(), dx.bytes(), cudaMemcpyHostToDevice));
  ASSERT_CUDA(cudaMemset(dy.get(), 0xFF, dy.bytes()));
  ASSERT_EQ(lt->prepare(s.nt, s.od, s.k), "");
  ASSERT_EQ(lt->run(dx.get(), dw.get(), dy.get<float>(), nullptr), "");
  ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<float> y(static_cast<size_t>(s.nt * s.od));
  ASSERT_CUDA(cudaMemcpy(y.data(), dy.get(), dy.bytes(), cudaMemcpyDeviceToHost));
  std::vector<double> ref(y.size());
  ref = qgate::test_support::qgate_f16_expectation(type, blocks.data(), s.od, s.k, x.data(), s.nt);
  double max_diff = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_TRUE(std::isfinite(y[i])) << i;
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(y[i]) - ref[i]));
  }
  EXPECT_LT(max_diff, 1e-3) << "cuBLASLt (" << lt->library() << ")";
}

}  // namespace
}  // namespace qgate::kernels
