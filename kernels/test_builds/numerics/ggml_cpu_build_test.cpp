// Self-check of the two test kernel builds in this folder: each is dlopen'ed like the worker does,
// runs a small GEMM per weight type on both paths, and is compared with an f64 product of the
// dequantized weights and the f32 activations. The good build must stay within llama.cpp's NMSE
// threshold of 5e-4; the build with the scale-indexing bug must miss it by far on every type.
// The weights come from qgate's quantizer; the f64 side decodes them here, from the block spec.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "qgate/kernel_abi.h"
#include "qgate/kernel_abi_table.h"
#include "qgate/quant/quantize.h"

namespace {

using qgate::quant::WeightType;

struct Build : qgate::abi::EntryPoints {
  void* handle = nullptr;
  ~Build() {
    if (handle != nullptr) dlclose(handle);
  }
};

void load(const char* path, Build* b) {
  b->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(b->handle, nullptr) << dlerror();
  const std::string missing = qgate::abi::bind_entry_points(b->handle, b);
  ASSERT_EQ(missing, "") << path << " lacks part of the kernel ABI";
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
  EXPECT_EQ(b.gemm_prepare(ctx, int32_t(t), c.od, c.k, c.blocks.data(), c.nt, &g), QGATE_OK) << b.context_last_error(ctx);
  std::vector<float> y(size_t(c.nt * c.od), std::nanf(""));
  if (g != nullptr) {
    EXPECT_GT(b.gemm_resident_bytes(g), 0);
    EXPECT_EQ(b.gemm_run(g, c.x.data(), c.nt, y.data(), nullptr), QGATE_OK) << b.context_last_error(ctx);
    b.gemm_release(g);
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
    ASSERT_NE(b->build_numerics, nullptr);
    EXPECT_STREQ(b->build_numerics(), "ggml");
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
  EXPECT_EQ(good.gemm_prepare(ctx, QGATE_TYPE_Q4_0, 2, 48, blocks.data(), 4, &g), QGATE_ERR_INVALID_ARGUMENT);
  EXPECT_STRNE(good.context_last_error(ctx), "");
  EXPECT_EQ(good.gemm_prepare(ctx, 99, 2, 64, blocks.data(), 4, &g), QGATE_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(good.gemm_prepare(ctx, QGATE_TYPE_Q4_0, 2, 64, blocks.data(), 4, &g), QGATE_OK);
  std::vector<float> x(5 * 64, 1.0f), y(5 * 2);
  EXPECT_EQ(good.gemm_run(g, x.data(), 5, y.data(), nullptr), QGATE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(good.gemm_run(g, x.data(), 0, y.data(), nullptr), QGATE_ERR_INVALID_ARGUMENT);
  good.gemm_release(g);
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
      if (path == QGATE_PATH_F16) {
        EXPECT_LT(e, 1e-5) << type_name(t) << " f16";
      }
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

// ---- golden values from ggml itself ----------------------------------------------------------

// y = x * W^T for synthetic blocks (random bytes, f16 scales in [2^-6, 2^-1)) and activations
// (uniform in [-4, 4), row 1 all zero), od = 4, k = 256, nt = 12 (above 8 tokens, so ggml takes MMQ,
// not MMVQ), as computed by ggml's CUDA mul_mat (ggml-org/ggml d99724f2, built with its default
// -use_fast_math for sm_90, CUDA 13.0) on an NVIDIA H200. Types in kTypes order, y[t][o] row-major.
const float kGgmlH200[8][48] = {
    {  // q4_0
        -0x1.b4e516p-1f, 0x1.7191dp-1f, -0x1.2ee516p+6f, -0x1.897804p+4f,
        0x0p+0f, 0x0p+0f, 0x0p+0f, 0x0p+0f,
        -0x1.01723ap+2f, 0x1.9c7446p+3f, 0x1.fb563cp+5f, -0x1.52f4fap+3f,
        -0x1.1e21a8p+5f, 0x1.546276p+5f, 0x1.5771fap+3f, -0x1.8d281ep+3f,
        0x1.23d46ap+3f, -0x1.761d9ep+6f, -0x1.2a48fep+4f, -0x1.848f4p+4f,
        0x1.256ddcp+1f, -0x1.49eb6cp+5f, 0x1.cbb8e2p+4f, 0x1.0c2baap+5f,
        -0x1.0eacdap+5f, 0x1.59ccd2p+4f, -0x1.772d7ep+4f, 0x1.b20d0ep+2f,
        -0x1.21741p+2f, 0x1.ccc986p+3f, 0x1.01f67cp+4f, -0x1.399c7cp+3f,
        -0x1.e6c1bap+5f, -0x1.bdd3d2p+6f, -0x1.a133acp+5f, 0x1.5890a2p+5f,
        0x1.2e3e0ep+4f, -0x1.fc6d9p+0f, 0x1.aefep+4f, -0x1.fc1e94p+3f,
        0x1.b27f12p+3f, 0x1.bc31f8p+4f, 0x1.4fc422p+4f, 0x1.7a1a7ap+4f,
        -0x1.725c86p+6f, 0x1.64dff8p+4f, 0x1.d35e8cp+3f, 0x1.6367e2p+4f,
    },
    {  // q4_1
        0x1.b8827ep+4f, 0x1.926d8p+5f, 0x1.3997fap+7f, 0x1.1ed72cp+5f,
        0x0p+0f, 0x0p+0f, 0x0p+0f, 0x0p+0f,
        0x1.24d34ep+4f, -0x1.d352dp+5f, 0x1.c72f98p+3f, -0x1.1d1c1cp+5f,
        -0x1.674d88p+4f, 0x1.8ca8aap+4f, -0x1.09bad8p+4f, -0x1.a9c5fcp+0f,
        0x1.f65998p+4f, 0x1.c8889p+3f, 0x1.0224eep+6f, -0x1.12daccp+3f,
        0x1.8b682ep+5f, -0x1.5be03cp+5f, 0x1.9fcc7p+5f, 0x1.5d4214p+2f,
        -0x1.187204p+5f, -0x1.6f19b6p+5f, -0x1.f60692p+5f, -0x1.0936bp+1f,
        0x1.d40928p+4f, -0x1.35ac9cp+4f, 0x1.0e3694p+5f, 0x1.b4656ep+4f,
        0x1.4b9e06p+2f, -0x1.b3032ep+5f, 0x1.c68634p+4f, 0x1.ca2e82p+4f,
        0x1.c735b4p+3f, 0x1.b351d2p+5f, 0x1.ea219cp+4f, 0x1.423bb2p+5f,
        0x1.bbf698p+4f, 0x1.c864f4p+1f, -0x1.44f926p+4f, 0x1.6a02cap+5f,
        -0x1.fb751cp+4f, -0x1.4868bap+6f, -0x1.7adb1cp+5f, -0x1.406988p+6f,
    },
    {  // q5_0
        -0x1.ab1e1p+5f, 0x1.a34548p+5f, -0x1.2642dep+4f, 0x1.bcb7a4p+2f,
        0x0p+0f, 0x0p+0f, 0x0p+0f, 0x0p+0f,
        -0x1.3c6e6ap+5f, -0x1.7e8ee2p+6f, -0x1.3e8998p+1f, 0x1.f475c8p+3f,
        0x1.c22ab6p+4f, 0x1.c3b1ep+5f, 0x1.9c077cp+3f, 0x1.09adb2p+7f,
        0x1.4d3406p+5f, -0x1.93b592p+6f, 0x1.a757f8p+4f, 0x1.09cc84p+6f,
        0x1.5f4848p+5f, 0x1.8202fap+5f, -0x1.63c4d8p+6f, -0x1.dfc082p+6f,
        -0x1.fabcf8p+6f, 0x1.5a6d62p+4f, -0x1.36176ep+2f, 0x1.55d7fcp+7f,
        -0x1.09d776p+0f, -0x1.c1737p+4f, -0x1.0fc8e8p+6f, 0x1.d454ccp+5f,
        -0x1.17a8b4p+4f, -0x1.32dbc2p+4f, -0x1.ea4ec4p-2f, -0x1.2a88cp+5f,
        0x1.b280a2p+4f, 0x1.09e512p+6f, 0x1.13760cp+3f, 0x1.edcep+6f,
        -0x1.4d1a4ap+7f, 0x1.a38046p+5f, 0x1.5716fap+5f, 0x1.1900aap+6f,
        0x1.588166p+3f, -0x1.ce394ap+4f, 0x1.fde88p+4f, -0x1.96d4e6p+2f,
    },
    {  // q5_1
        0x1.255288p+6f, 0x1.0c094p+6f, -0x1.33bf46p+3f, 0x1.50d5acp+6f,
        0x0p+0f, 0x0p+0f, 0x0p+0f, 0x0p+0f,
        0x1.463974p+6f, 0x1.cb8f8cp+6f, -0x1.b640d4p+5f, 0x1.d1d2fep+5f,
        0x1.cfada8p+7f, 0x1.14606ap+6f, 0x1.c6fc84p+5f, 0x1.48d68cp+5f,
        0x1.c119bcp+6f, 0x1.7447c6p+6f, -0x1.79c17ep+7f, 0x1.5a9902p+3f,
        0x1.5d790cp+4f, -0x1.b39a8cp+5f, 0x1.41eeb6p+6f, -0x1.24dda8p+3f,
        -0x1.9854bcp+6f, -0x1.5160eap+7f, -0x1.0b49d4p+5f, -0x1.83ea96p+6f,
        0x1.5faa2ep+6f, 0x1.e461a8p+7f, 0x1.5154bap+8f, 0x1.abfa08p+6f,
        0x1.e71b6cp+5f, 0x1.402398p+6f, 0x1.b8608cp+7f, 0x1.265de8p+6f,
        0x1.e1a6p+4f, 0x1.1cf494p+5f, 0x1.0e8204p+5f, 0x1.2a977p+5f,
        0x1.f2c052p+6f, 0x1.d3a2e4p+6f, 0x1.c0878ap+7f, 0x1.18c1ep+5f,
        -0x1.ee706ep+6f, -0x1.3302d2p+6f, -0x1.4a691p+7f, -0x1.c6d754p+5f,
    },
    {  // q8_0
        0x1.090d74p+9f, 0x1.6e36d2p+9f, 0x1.5813d8p+8f, -0x1.847816p+9f,
        0x0p+0f, 0x0p+0f, 0x0p+0f, 0x0p+0f,
        0x1.1a3c1p+10f, -0x1.5c2c64p+8f, -0x1.72cd86p+7f, 0x1.09afccp+10f,
        -0x1.99e988p+3f, -0x1.33b178p+10f, 0x1.0bfe58p+9f, 0x1.c870b4p+6f,
        0x1.7ebae6p+9f, 0x1.73ad1p+8f, -0x1.548918p+7f, -0x1.58f0cp+6f,
        -0x1.5087cp+8f, 0x1.499c54p+9f, -0x1.10c95ap+5f, 0x1.69db98p+1f,
        -0x1.8ea47ep+8f, -0x1.8efa6cp+5f, -0x1.66cd5ap+6f, -0x1.57f768p+6f,
        -0x1.d2a4a4p+9f, 0x1.2f4f5p+7f, -0x1.761f66p+6f, 0x1.972946p+9f,
        0x1.34a39cp+4f, 0x1.7c478ap+9f, -0x1.cc0e1ep+7f, -0x1.1af5a6p+9f,
        0x1.3de438p+4f, -0x1.53e9p+9f, 0x1.9a7adep+5f, -0x1.5563cap+4f,
        -0x1.d785cap+7f, 0x1.0648c2p+8f, -0x1.2d500ep+7f, -0x1.d65daep+7f,
        -0x1.e7414cp+9f, -0x1.abd826p+8f, 0x1.80dac4p+6f, -0x1.1258aap+9f,
    },
    {  // q4_K
        0x1.832bcap+9f, 0x1.40d51cp+10f, -0x1.234c18p+8f, -0x1.439868p+8f,
        0x0p+0f, 0x0p+0f, 0x0p+0f, 0x0p+0f,
        -0x1.af0bfap+8f, 0x1.70a474p+11f, 0x1.21daa4p+9f, 0x1.779b3cp+10f,
        -0x1.e29994p+6f, 0x1.5b3e48p+11f, 0x1.1a7afp+10f, -0x1.668a26p+8f,
        -0x1.79d358p+9f, 0x1.2b1fc4p+12f, 0x1.156a92p+9f, 0x1.c020ep+9f,
        0x1.56b47cp+8f, 0x1.04c286p+11f, -0x1.5f3ec4p+8f, -0x1.b577c8p+10f,
        0x1.6ac076p+8f, -0x1.7ee44p+9f, -0x1.ed8d48p+10f, -0x1.35d4cp+10f,
        0x1.6f977p+5f, 0x1.e4fcd4p+10f, -0x1.de37a2p+9f, -0x1.3132p+9f,
        0x1.4948cep+8f, 0x1.3589c6p+12f, 0x1.cd1956p+9f, 0x1.612d28p+9f,
        0x1.831466p+8f, -0x1.08f5bcp+10f, -0x1.2fe0dap+9f, -0x1.1f63fp+9f,
        -0x1.1a7bfcp+7f, 0x1.d2bcdap+8f, 0x1.cb9f88p+8f, -0x1.57c072p+9f,
        0x1.561ba4p+5f, -0x1.09deeep+12f, -0x1.d01d3ap+9f, -0x1.968e46p+8f,
    },
    {  // q5_K
        0x1.7d8248p+6f, 0x1.872fdp+11f, 0x1.4ceab4p+8f, -0x1.a01f66p+11f,
        0x0p+0f, 0x0p+0f, 0x0p+0f, 0x0p+0f,
        -0x1.8e4ca4p+9f, -0x1.447c02p+12f, -0x1.07300cp+8f, -0x1.58b4aep+12f,
        -0x1.bd54a4p+9f, 0x1.ac5becp+10f, -0x1.57341ap+8f, -0x1.2f5deap+11f,
        -0x1.94103ap+9f, -0x1.0db5fep+13f, 0x1.3e3a2cp+8f, -0x1.313956p+11f,
        -0x1.07087ep+9f, -0x1.ad2662p+11f, -0x1.156326p+11f, 0x1.427e28p+9f,
        -0x1.7d2db8p+9f, 0x1.f1144ep+11f, 0x1.c0d1e6p+10f, -0x1.883788p+9f,
        -0x1.c92914p+9f, 0x1.59c15ap+11f, 0x1.59393ap+9f, -0x1.7704f2p+9f,
        0x1.d3c32ap+8f, 0x1.a219c6p+12f, 0x1.b542d4p+6f, 0x1.0bb06p+11f,
        -0x1.0dde6p+0f, -0x1.a85634p+12f, -0x1.3bf618p+5f, 0x1.ffcff6p+10f,
        0x1.4e472ap+8f, -0x1.7b020ap+12f, -0x1.5b5f32p+8f, -0x1.6e4834p+11f,
        0x1.935a62p+8f, 0x1.20541ep+13f, 0x1.2d98e2p+11f, 0x1.0e139ap+12f,
    },
    {  // q6_K
        0x1.9020ccp+12f, -0x1.b3c502p+13f, 0x1.4a11b6p+11f, 0x1.57ece8p+11f,
        0x0p+0f, 0x0p+0f, 0x0p+0f, 0x0p+0f,
        -0x1.3b5134p+12f, 0x1.7235fp+13f, -0x1.aa09a4p+9f, -0x1.60decep+10f,
        -0x1.fd2738p+13f, -0x1.07bcaap+15f, -0x1.7338dp+10f, -0x1.2df608p+11f,
        0x1.7d9ee2p+13f, 0x1.706724p+15f, -0x1.683b28p+9f, -0x1.6ed3bcp+10f,
        0x1.c6e9dep+13f, 0x1.8cadb4p+9f, 0x1.479bap+10f, -0x1.162262p+10f,
        0x1.18675cp+13f, 0x1.2ca9bep+13f, -0x1.b3c4e2p+9f, -0x1.100a04p+10f,
        -0x1.b315fcp+9f, 0x1.c1c668p+13f, 0x1.453294p+10f, -0x1.dd0a48p+9f,
        0x1.501cdcp+13f, -0x1.5e5afep+13f, -0x1.b6279cp+10f, -0x1.dce50cp+9f,
        0x1.2e767ep+15f, 0x1.01f9ap+15f, -0x1.47931p+6f, 0x1.605a14p+6f,
        -0x1.d92804p+12f, -0x1.2b87bep+13f, 0x1.90b3fcp+8f, -0x1.503fe2p+11f,
        -0x1.639592p+13f, 0x1.431584p+11f, -0x1.4a6b98p+9f, -0x1.1eea6ap+6f,
    },
};

struct XorShift {
  uint32_t s;
  uint32_t next() {
    s ^= s << 13;
    s ^= s >> 17;
    s ^= s << 5;
    return s;
  }
};

uint16_t synthetic_scale(XorShift& g, bool may_be_negative) {
  uint16_t h = uint16_t(((9 + g.next() % 5) << 10) | (g.next() & 0x3ff));
  if (may_be_negative && (g.next() & 1)) h = uint16_t(h | 0x8000);
  return h;
}

// The golden case's inputs, generated exactly as they were for the recording.
void golden_inputs(WeightType t, std::vector<uint8_t>* blocks, std::vector<float>* x) {
  XorShift g{0x9e3779b9u ^ uint32_t(t)};
  const int bb = block_bytes(t);
  const size_t nb = size_t(4 * 256 / block_elems(t));
  blocks->assign(nb * size_t(bb), 0);
  for (size_t b = 0; b < nb; ++b) {
    uint8_t* p = blocks->data() + b * size_t(bb);
    for (int i = 0; i < bb; ++i) p[i] = uint8_t(g.next() & 0xff);
    const uint16_t d = synthetic_scale(g, false);
    uint16_t m = synthetic_scale(g, true);
    switch (t) {
      case WeightType::q4_1:
      case WeightType::q5_1:
        std::memcpy(p, &d, 2);
        std::memcpy(p + 2, &m, 2);
        break;
      case WeightType::q4_K:
      case WeightType::q5_K:
        m = uint16_t(m & 0x7fff);
        std::memcpy(p, &d, 2);
        std::memcpy(p + 2, &m, 2);
        break;
      case WeightType::q6_K:
        std::memcpy(p + 208, &d, 2);
        break;
      default:
        std::memcpy(p, &d, 2);
        break;
    }
  }
  x->resize(12 * 256);
  for (auto& v : *x) v = (float(g.next() >> 8) * (1.0f / 16777216.0f) - 0.5f) * 8.0f;
  std::fill(x->begin() + 256, x->begin() + 512, 0.0f);
}

// Where ggml hands the kernel an f16 activation scale (the (d, sum) layouts), every f32 step after
// it is reproduced, so the CPU build must match bit for bit. Where it keeps d in f32, the device's
// approximate 127/amax and 1/d_inv (fast math) leave a few ulps that IEEE division cannot follow.
bool golden_is_bit_exact(WeightType t) {
  return t == WeightType::q4_0 || t == WeightType::q4_1 || t == WeightType::q5_1 || t == WeightType::q4_K ||
         t == WeightType::q5_K;
}

std::vector<float> run_golden(const Build& b, WeightType t) {
  Case c;
  c.nt = 12;
  c.od = 4;
  c.k = 256;
  golden_inputs(t, &c.blocks, &c.x);
  return run_build(b, t, c, QGATE_PATH_MMQ);
}

TEST(GgmlCpuBuild, MatchesGgmlCudaOutputRecordedOnAnH200) {
  Build good;
  load(QGATE_GGML_CPU_BUILD, &good);
  for (size_t ti = 0; ti < 8; ++ti) {
    const WeightType t = kTypes[ti];
    const std::vector<float> y = run_golden(good, t);
    ASSERT_EQ(y.size(), 48u);
    for (size_t i = 0; i < 48; ++i) {
      const float g = kGgmlH200[ti][i];
      if (golden_is_bit_exact(t)) {
        EXPECT_EQ(y[i], g) << type_name(t) << " y[" << i / 4 << "][" << i % 4 << "]";
      } else {
        EXPECT_LE(std::fabs(double(y[i]) - g), 3e-5 * std::max(1.0, std::fabs(double(g))))
            << type_name(t) << " y[" << i / 4 << "][" << i % 4 << "]";
      }
    }
  }
}

TEST(GgmlCpuBuild, BadBuildDoesNotMatchTheRecordedOutput) {
  Build bad;
  load(QGATE_GGML_CPU_BUILD_BAD, &bad);
  for (size_t ti = 0; ti < 8; ++ti) {
    const std::vector<float> y = run_golden(bad, kTypes[ti]);
    ASSERT_EQ(y.size(), 48u);
    double worst = 0;
    for (size_t i = 0; i < 48; ++i)
      worst = std::max(worst, std::fabs(double(y[i]) - kGgmlH200[ti][i]) / std::max(1.0, std::fabs(double(kGgmlH200[ti][i]))));
    EXPECT_GT(worst, 1e-2) << type_name(kTypes[ti]);
  }
}

}  // namespace
