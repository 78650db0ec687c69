// The CPU backend against the CPU references on odd shapes, for both paths and all types, plus
// its argument checks and out-of-memory handling.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "detail/gemm_backend.h"
#include "qgate/quant/block_formats.h"
#include "qgate/quant/mmq_math.h"
#include "qgate/quant/quantize.h"
#include "qgate_expectation.h"

namespace qgate::kernels {
namespace {

using quant::WeightType;

std::vector<float> uniform(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Shape { int64_t nt, od, k; };

const char* path_name(GemmPath p) { return p == GemmPath::mmq ? "mmq" : "f16"; }

// Runs one case and returns max |backend - reference| over all outputs; fails the test on any
// unwritten (still NaN) or non-finite output.
double run_case(GemmPath path, WeightType type, Shape s, int threads, uint32_t seed,
                std::vector<float>* y_out = nullptr) {
  const auto w = uniform(static_cast<size_t>(s.od * s.k), seed);
  const auto x = uniform(static_cast<size_t>(s.nt * s.k), seed + 1);
  const auto blocks = quant::quantize_matrix(type, w.data(), s.od, s.k);

  auto backend = make_cpu_backend(path, threads);
  std::unique_ptr<PreparedGemm> gemm;
  const CallResult prepared = backend->prepare(type, s.od, s.k, blocks.data(), s.nt, &gemm);
  EXPECT_TRUE(prepared) << prepared.message;
  if (!prepared) return INFINITY;
  EXPECT_GT(gemm->resident_bytes(), 0);

  std::vector<float> y(static_cast<size_t>(s.nt * s.od), std::numeric_limits<float>::quiet_NaN());
  const CallResult ran = gemm->run(x.data(), s.nt, y.data(), nullptr);
  EXPECT_TRUE(ran) << ran.message;

  std::vector<double> ref(y.size());
  if (path == GemmPath::mmq) {
    ref = qgate::test_support::qgate_mmq_expectation(type, blocks.data(), s.od, s.k, x.data(), s.nt);
  } else {
    ref = qgate::test_support::qgate_f16_expectation(type, blocks.data(), s.od, s.k, x.data(), s.nt);
  }
  double max_diff = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_TRUE(std::isfinite(y[i])) << "output " << i << " unwritten or not finite";
    if (!std::isfinite(y[i])) return INFINITY;
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(y[i]) - ref[i]));
  }
  if (y_out) *y_out = y;
  return max_diff;
}

class CpuBackendParity : public ::testing::TestWithParam<std::tuple<GemmPath, WeightType>> {};

TEST_P(CpuBackendParity, MatchesTheReferenceOnOddShapes) {
  const auto [path, type] = GetParam();
  for (Shape s : {Shape{7, 33, 256}, Shape{65, 63, 512}, Shape{1, 1, 256}, Shape{70, 35, 768}}) {
    const double diff = run_case(path, type, s, 2, 1000 + static_cast<uint32_t>(s.od));
    EXPECT_LT(diff, 1e-3) << path_name(path) << " " << quant::traits(type).name << " " << s.nt
                          << "x" << s.od << "x" << s.k;
  }
}

TEST_P(CpuBackendParity, ThreadCountDoesNotChangeTheResult) {
  const auto [path, type] = GetParam();
  std::vector<float> one, two;
  run_case(path, type, Shape{9, 41, 512}, 1, 5, &one);
  run_case(path, type, Shape{9, 41, 512}, 3, 5, &two);
  EXPECT_EQ(one, two);
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, CpuBackendParity,
    ::testing::Combine(::testing::Values(GemmPath::mmq, GemmPath::f16),
                       ::testing::ValuesIn(quant::all_types().begin(), quant::all_types().end())),
    [](const auto& info) {
      return std::string(path_name(std::get<0>(info.param))) + "_" +
             std::string(quant::traits(std::get<1>(info.param)).name);
    });

TEST(CpuBackend, MmqPathDiffersFromF16PathByActivationQuantization) {
  // Guards against both paths silently running the same math.
  std::vector<float> mmq, f16;
  run_case(GemmPath::mmq, WeightType::q4_K, Shape{4, 8, 512}, 2, 9, &mmq);
  run_case(GemmPath::f16, WeightType::q4_K, Shape{4, 8, 512}, 2, 9, &f16);
  double max_diff = 0;
  for (size_t i = 0; i < mmq.size(); ++i) max_diff = std::max(max_diff, std::fabs(double(mmq[i]) - f16[i]));
  EXPECT_GT(max_diff, 1e-4);
}

TEST(CpuBackend, ReportsResidentBytes) {
  const auto w = uniform(16 * 512, 1);
  const auto blocks = quant::quantize_matrix(WeightType::q6_K, w.data(), 16, 512);
  std::unique_ptr<PreparedGemm> gemm;
  ASSERT_TRUE(make_cpu_backend(GemmPath::f16, 1)->prepare(WeightType::q6_K, 16, 512, blocks.data(), 4, &gemm));
  EXPECT_EQ(gemm->resident_bytes(), 16 * 512 * 2);
  ASSERT_TRUE(make_cpu_backend(GemmPath::mmq, 1)->prepare(WeightType::q6_K, 16, 512, blocks.data(), 4, &gemm));
  EXPECT_EQ(gemm->resident_bytes(), static_cast<int64_t>(16 * 16 * sizeof(quant::MmqWeightBlock)));
}

TEST(CpuBackend, RejectsTokenCountsOutsideOneToMaxNt) {
  const int64_t od = 4, k = 256, max_nt = 3;
  const auto w = uniform(od * k, 2);
  const auto blocks = quant::quantize_matrix(WeightType::q8_0, w.data(), od, k);
  for (GemmPath path : {GemmPath::mmq, GemmPath::f16}) {
    std::unique_ptr<PreparedGemm> gemm;
    ASSERT_TRUE(make_cpu_backend(path, 2)->prepare(WeightType::q8_0, od, k, blocks.data(), max_nt, &gemm));
    const auto x = uniform((max_nt + 1) * k, 3);
    std::vector<float> y((max_nt + 1) * od, std::numeric_limits<float>::quiet_NaN());
    EXPECT_EQ(gemm->run(x.data(), max_nt + 1, y.data(), nullptr).status, QGATE_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(gemm->run(x.data(), 0, y.data(), nullptr).status, QGATE_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(gemm->run(x.data(), -1, y.data(), nullptr).status, QGATE_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(std::isnan(y[0])) << "a rejected run must not write";
    const CallResult ok = gemm->run(x.data(), max_nt, y.data(), nullptr);
    EXPECT_TRUE(ok) << ok.message;
    EXPECT_TRUE(std::isfinite(y[0]));
  }
}

TEST(CpuBackend, AbsurdWeightSizesFailWithOutOfMemory) {
  // The weight bytes are never read: the size check must come before any allocation or copy.
  const uint8_t dummy[256] = {};
  struct Size { int64_t od, k; };
  for (GemmPath path : {GemmPath::mmq, GemmPath::f16}) {
    for (Size s : {Size{int64_t{1} << 24, int64_t{1} << 24},    // 2^48 elements: > any host RAM
                   Size{int64_t{1} << 40, int64_t{1} << 30}}) {  // od*k overflows int64
      std::unique_ptr<PreparedGemm> gemm;
      const CallResult r = make_cpu_backend(path, 2)->prepare(WeightType::q4_0, s.od, s.k, dummy, 1, &gemm);
      EXPECT_EQ(r.status, QGATE_ERR_OUT_OF_MEMORY) << path_name(path) << " " << r.message;
      EXPECT_FALSE(r.message.empty());
      EXPECT_EQ(gemm, nullptr);
    }
  }
}

}  // namespace
}  // namespace qgate::kernels
