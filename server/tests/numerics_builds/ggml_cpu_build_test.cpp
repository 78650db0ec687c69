// Self-check of the two test kernel builds in this folder: each is dlopen'ed like the worker does,
// runs a small GEMM per weight type on both paths, and is compared with an f64 product of the
// dequantized weights and the f32 activations. The good build must stay within llama.cpp's NMSE
// threshold of 5e-4; the build with the scale-indexing bug must miss it by far on every type.
// The weights come from qgate's quantizer; the f64 side decodes them here, from the block spec.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "qgate/kernel_abi.h"
#include "qgate/quant/quantize.h"

namespace {

using qgate::quant::WeightType;

struct Build {
  void* handle = nullptr;
  decltype(&qgate_abi_version) abi_version = nullptr;
  decltype(&qgate_get_build_info) build_info = nullptr;
  decltype(&qgate_context_create) context_create = nullptr;
  decltype(&qgate_context_destroy) context_destroy = nullptr;
  decltype(&qgate_context_path) context_path = nullptr;
  decltype(&qgate_context_last_error) last_error = nullptr;
  decltype(&qgate_gemm_prepare) prepare = nullptr;
  decltype(&qgate_gemm_run) run = nullptr;
  decltype(&qgate_gemm_resident_bytes) resident = nullptr;
  decltype(&qgate_gemm_release) release = nullptr;
  const char* (*numerics)() = nullptr;

  ~Build() {
    if (handle != nullptr) dlclose(handle);
  }
};

template <typename T>
void bind(void* handle, const char* name, T* out) {
  *out = reinterpret_cast<T>(dlsym(handle, name));
}

void load(const char* path, Build* b) {
  b->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(b->handle, nullptr) << dlerror();
  bind(b->handle, "qgate_abi_version", &b->abi_version);
  bind(b->handle, "qgate_get_build_info", &b->build_info);
  bind(b->handle, "qgate_context_create", &b->context_create);
  bind(b->handle, "qgate_context_destroy", &b->context_destroy);
  bind(b->handle, "qgate_context_path", &b->context_path);
  bind(b->handle, "qgate_context_last_error", &b->last_error);
  bind(b->handle, "qgate_gemm_prepare", &b->prepare);
  bind(b->handle, "qgate_gemm_run", &b->run);
  bind(b->handle, "qgate_gemm_resident_bytes", &b->resident);
  bind(b->handle, "qgate_gemm_release", &b->release);
  bind(b->handle, "qgate_build_numerics", &b->numerics);
  ASSERT_TRUE(b->abi_version && b->build_info && b->context_create && b->context_destroy && b->context_path &&
              b->last_error && b->prepare && b->run && b->resident && b->release);
}

const WeightType kTypes[] = {WeightType::q4_0, WeightType::q4_1, WeightType::q5_0, WeightType::q5_1,
                             WeightType::q8_0, WeightType::q4_K, WeightType::q5_K, WeightType::q6_K};

// ---- the block formats, read from their specification, one element at a time --------------

double half_value(const uint8_t* p) {
  const unsigned h = unsigned(p[0]) | (unsigned(p[1]) << 8);
  const int e = int((h >> 10) & 31), m = int(h & 1023);
  const double mag = e == 0 ? std::ldexp(double(m), -24) : std::ldexp(double(1024 + m), e - 25);
  return (h & 0x8000) ? -mag : mag;
}

int block_elems(WeightType t) {
  return (t == WeightType::q4_K || t == WeightType::q5_K || t == WeightType::q6_K) ? 256 : 32;
}

int block_bytes(WeightType t) {
  switch (t) {
    case WeightType::q4_0: return 18;
    case WeightType::q4_1: return 20;
    case WeightType::q5_0: return 22;
    case WeightType::q5_1: return 24;
    case WeightType::q8_0: return 34;
    case WeightType::q4_K: return 144;
    case WeightType::q5_K: return 176;
    case WeightType::q6_K: return 210;
  }
  return 0;
}

// Element i (0 <= i < block_elems) of one block.
double element(WeightType t, const uint8_t* b, int i) {
  switch (t) {
    case WeightType::q4_0:
    case WeightType::q4_1: {
      const int hdr = t == WeightType::q4_0 ? 2 : 4;
      const int nib = i < 16 ? (b[hdr + i] & 15) : (b[hdr + i - 16] >> 4);
      return t == WeightType::q4_0 ? half_value(b) * (nib - 8) : half_value(b) * nib + half_value(b + 2);
    }
    case WeightType::q5_0:
    case WeightType::q5_1: {
      const int hdr = t == WeightType::q5_0 ? 2 : 4;
      const uint8_t* qh = b + hdr;
      const int nib = i < 16 ? (b[hdr + 4 + i] & 15) : (b[hdr + 4 + i - 16] >> 4);
      const int high = (qh[i / 8] >> (i % 8)) & 1;
      const int v = nib + 16 * high;
      return t == WeightType::q5_0 ? half_value(b) * (v - 16) : half_value(b) * v + half_value(b + 2);
    }
    case WeightType::q8_0:
      return half_value(b) * double(int8_t(b[2 + i]));
    case WeightType::q4_K:
    case WeightType::q5_K: {
      const int sub = i / 32, pos = i % 32;
      const uint8_t* s = b + 4;
      int sc, mn;
      if (sub < 4) {
        sc = s[sub] & 63;
        mn = s[sub + 4] & 63;
      } else {
        sc = (s[sub + 4] & 15) + 16 * (s[sub - 4] >> 6);
        mn = (s[sub + 4] >> 4) + 16 * (s[sub] >> 6);
      }
      const uint8_t* qs = b + (t == WeightType::q4_K ? 16 : 48);
      const int byte = qs[32 * (sub / 2) + pos];
      int v = sub % 2 == 0 ? (byte & 15) : (byte >> 4);
      if (t == WeightType::q5_K) v += 16 * ((b[16 + pos] >> sub) & 1);
      return half_value(b) * sc * v - half_value(b + 2) * mn;
    }
    case WeightType::q6_K: {
      const int half = i / 128, r = i % 128, quarter = r / 32, pos = r % 32;
      const uint8_t lbyte = b[64 * half + 32 * (quarter % 2) + pos];
      const int low = quarter < 2 ? (lbyte & 15) : (lbyte >> 4);
      const int high = (b[128 + 32 * half + pos] >> (2 * quarter)) & 3;
      const int scale = int8_t(b[192 + i / 16]);
      return half_value(b + 208) * scale * (low + 16 * high - 32);
    }
  }
  return 0;
}

std::vector<double> dequantize(WeightType t, const std::vector<uint8_t>& blocks, int64_t od, int64_t k) {
  std::vector<double> w(size_t(od * k));
  const int be = block_elems(t), bb = block_bytes(t);
  for (int64_t o = 0; o < od; ++o)
    for (int64_t i = 0; i < k; ++i)
      w[size_t(o * k + i)] = element(t, blocks.data() + (o * (k / be) + i / be) * bb, int(i % be));
  return w;
}

// Weights whose 32-blocks differ in magnitude, so a scale taken from the wrong block shows.
std::vector<float> make_weights(int64_t od, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-1.5f, 1.5f);
  std::vector<float> w(size_t(od * k));
  for (int64_t o = 0; o < od; ++o) {
    for (int64_t b = 0; b < k / 32; ++b) {
      const float scale = 0.05f * std::exp(log_scale(rng));
      const float shift = 0.5f * scale * gauss(rng);  // gives the types with a min something to do
      for (int i = 0; i < 32; ++i) w[size_t(o * k + b * 32 + i)] = scale * gauss(rng) + shift;
    }
  }
  return w;
}

struct Case {
  int64_t nt = 6, od = 37, k = 512;
  std::vector<float> x;
  std::vector<uint8_t> blocks;
  std::vector<double> ref;  // nt x od, f64
};

Case make_case(WeightType t) {
  Case c;
  const std::vector<float> w = make_weights(c.od, c.k, 1234u + uint32_t(t));
  c.blocks = qgate::quant::quantize_matrix(t, w.data(), c.od, c.k);
  std::mt19937 rng(99u + uint32_t(t));
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  c.x.resize(size_t(c.nt * c.k));
  for (auto& v : c.x) v = gauss(rng);
  std::fill(c.x.begin() + 2 * c.k, c.x.begin() + 3 * c.k, 0.0f);  // row 2: all zero
  const std::vector<double> wd = dequantize(t, c.blocks, c.od, c.k);
  c.ref.assign(size_t(c.nt * c.od), 0.0);
  for (int64_t r = 0; r < c.nt; ++r)
    for (int64_t o = 0; o < c.od; ++o) {
      double s = 0;
      for (int64_t i = 0; i < c.k; ++i) s += wd[size_t(o * c.k + i)] * double(c.x[size_t(r * c.k + i)]);
      c.ref[size_t(r * c.od + o)] = s;
    }
  return c;
}

std::vector<float> run_build(const Build& b, WeightType t, const Case& c, int32_t path) {
  qgate_context_options opt{};
  opt.struct_size = sizeof opt;
  opt.backend = QGATE_BACKEND_CPU;
  opt.path = path;
  opt.cpu_threads = 2;
  qgate_context* ctx = nullptr;
  char err[256] = "";
  EXPECT_EQ(b.context_create(&opt, &ctx, err, sizeof err), QGATE_OK) << err;
  if (ctx == nullptr) return {};
  EXPECT_EQ(b.context_path(ctx), path);
  qgate_gemm* g = nullptr;
  EXPECT_EQ(b.prepare(ctx, int32_t(t), c.od, c.k, c.blocks.data(), c.nt, &g), QGATE_OK) << b.last_error(ctx);
  std::vector<float> y(size_t(c.nt * c.od), std::nanf(""));
  if (g != nullptr) {
    EXPECT_GT(b.resident(g), 0);
    EXPECT_EQ(b.run(g, c.x.data(), c.nt, y.data(), nullptr), QGATE_OK) << b.last_error(ctx);
    b.release(g);
  }
  b.context_destroy(ctx);
  return y;
}

double nmse(const std::vector<float>& y, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(y[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return num / den;
}

const char* type_name(WeightType t) {
  switch (t) {
    case WeightType::q4_0: return "q4_0";
    case WeightType::q4_1: return "q4_1";
    case WeightType::q5_0: return "q5_0";
    case WeightType::q5_1: return "q5_1";
    case WeightType::q8_0: return "q8_0";
    case WeightType::q4_K: return "q4_K";
    case WeightType::q5_K: return "q5_K";
    case WeightType::q6_K: return "q6_K";
  }
  return "?";
}

constexpr double kNmseGate = 5e-4;  // llama.cpp test-backend-ops

TEST(GgmlCpuBuild, TestDecoderAgreesWithQgateDequantizer) {
  // The f64 side decodes the blocks on its own; it must read them as qgate's library does.
  for (WeightType t : kTypes) {
    const Case c = make_case(t);
    const std::vector<double> wd = dequantize(t, c.blocks, c.od, c.k);
    std::vector<float> row(size_t(c.k));
    const size_t row_bytes = c.blocks.size() / size_t(c.od);
    for (int64_t o = 0; o < c.od; ++o) {
      qgate::quant::dequantize_row(t, c.blocks.data() + size_t(o) * row_bytes, row.data(), c.k);
      for (int64_t i = 0; i < c.k; ++i)
        ASSERT_NEAR(wd[size_t(o * c.k + i)], double(row[size_t(i)]), 1e-6 * (1.0 + std::fabs(row[size_t(i)])))
            << type_name(t) << " row " << o << " element " << i;
    }
  }
}

TEST(GgmlCpuBuild, ExportsTheAbiAndDeclaresGgmlNumerics) {
  Build good, bad;
  load(QGATE_GGML_CPU_BUILD, &good);
  load(QGATE_GGML_CPU_BUILD_BAD, &bad);
  for (const Build* b : {&good, &bad}) {
    EXPECT_EQ(b->abi_version(), QGATE_ABI_VERSION);
    ASSERT_NE(b->numerics, nullptr);
    EXPECT_STREQ(b->numerics(), "ggml");
    EXPECT_STREQ(b->build_info()->backends, "cpu");
    EXPECT_STREQ(b->build_info()->cuda_archs, "");
  }
  EXPECT_STRNE(good.build_info()->name, bad.build_info()->name);

  qgate_context_options opt{};
  opt.struct_size = sizeof opt;
  opt.backend = QGATE_BACKEND_CUDA;
  opt.path = QGATE_PATH_MMQ;
  qgate_context* ctx = reinterpret_cast<qgate_context*>(&opt);
  char err[256] = "";
  EXPECT_EQ(good.context_create(&opt, &ctx, err, sizeof err), QGATE_ERR_UNSUPPORTED);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_NE(std::string(err).find("CUDA"), std::string::npos) << err;

  // MINFER_MMQ picks the path; anything but 0/1 is refused.
  opt.backend = QGATE_BACKEND_CPU;
  opt.path = QGATE_PATH_FROM_ENV;
  for (const auto& [value, expected] : {std::pair<const char*, int32_t>{"1", QGATE_PATH_MMQ}, {"0", QGATE_PATH_F16}}) {
    setenv("MINFER_MMQ", value, 1);
    ASSERT_EQ(good.context_create(&opt, &ctx, err, sizeof err), QGATE_OK) << err;
    EXPECT_EQ(good.context_path(ctx), expected);
    good.context_destroy(ctx);
  }
  setenv("MINFER_MMQ", "yes", 1);
  EXPECT_EQ(good.context_create(&opt, &ctx, err, sizeof err), QGATE_ERR_INVALID_ARGUMENT);
  unsetenv("MINFER_MMQ");

  // Bad sizes are refused with a message, not computed.
  opt.path = QGATE_PATH_MMQ;
  ASSERT_EQ(good.context_create(&opt, &ctx, err, sizeof err), QGATE_OK) << err;
  std::vector<uint8_t> blocks(18 * 4);
  qgate_gemm* g = nullptr;
  EXPECT_EQ(good.prepare(ctx, QGATE_TYPE_Q4_0, 2, 48, blocks.data(), 4, &g), QGATE_ERR_INVALID_ARGUMENT);
  EXPECT_STRNE(good.last_error(ctx), "");
  EXPECT_EQ(good.prepare(ctx, 99, 2, 64, blocks.data(), 4, &g), QGATE_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(good.prepare(ctx, QGATE_TYPE_Q4_0, 2, 64, blocks.data(), 4, &g), QGATE_OK);
  std::vector<float> x(5 * 64, 1.0f), y(5 * 2);
  EXPECT_EQ(good.run(g, x.data(), 5, y.data(), nullptr), QGATE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(good.run(g, x.data(), 0, y.data(), nullptr), QGATE_ERR_INVALID_ARGUMENT);
  good.release(g);
  good.context_destroy(ctx);
}

TEST(GgmlCpuBuild, GoodBuildIsWithinTheNmseGateOnEveryTypeAndPath) {
  Build good;
  load(QGATE_GGML_CPU_BUILD, &good);
  for (WeightType t : kTypes) {
    const Case c = make_case(t);
    for (int32_t path : {QGATE_PATH_MMQ, QGATE_PATH_F16}) {
      const std::vector<float> y = run_build(good, t, c, path);
      ASSERT_EQ(y.size(), c.ref.size());
      const double e = nmse(y, c.ref);
      std::printf("good %s %s nmse %.3g\n", type_name(t), path == QGATE_PATH_MMQ ? "mmq" : "f16", e);
      EXPECT_LT(e, kNmseGate) << type_name(t) << (path == QGATE_PATH_MMQ ? " mmq" : " f16");
      // Quantization error is there (MMQ) but small; the f16 path is much closer still.
      if (path == QGATE_PATH_F16) EXPECT_LT(e, 1e-5) << type_name(t) << " f16";
      for (int64_t o = 0; o < c.od; ++o) EXPECT_EQ(y[size_t(2 * c.od + o)], 0.0f) << type_name(t) << " zero row";
    }
  }
}

TEST(GgmlCpuBuild, BadBuildMissesTheNmseGateOnEveryTypeAndPath) {
  Build bad;
  load(QGATE_GGML_CPU_BUILD_BAD, &bad);
  for (WeightType t : kTypes) {
    const Case c = make_case(t);
    for (int32_t path : {QGATE_PATH_MMQ, QGATE_PATH_F16}) {
      const std::vector<float> y = run_build(bad, t, c, path);
      ASSERT_EQ(y.size(), c.ref.size());
      const double e = nmse(y, c.ref);
      std::printf("bad  %s %s nmse %.3g\n", type_name(t), path == QGATE_PATH_MMQ ? "mmq" : "f16", e);
      EXPECT_GT(e, 10 * kNmseGate) << type_name(t) << (path == QGATE_PATH_MMQ ? " mmq" : " f16");
    }
  }
}

}  // namespace
