// libqgate_ref.so through its C ABI, loaded the way the worker loads it: versions, build info,
// MINFER_MMQ resolution, and clear errors for every bad argument.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "qgate/kernel_abi.h"

namespace {

struct RefBuild {
  void* handle = nullptr;
  template <typename Fn> Fn sym(const char* name) {
    void* p = dlsym(handle, name);
    EXPECT_NE(p, nullptr) << name;
    return reinterpret_cast<Fn>(p);
  }
};

class KernelAbiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lib.handle = dlopen(QGATE_REF_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib.handle, nullptr) << dlerror();
    abi_version = lib.sym<uint32_t (*)()>("qgate_abi_version");
    build_info = lib.sym<const qgate_build_info* (*)()>("qgate_get_build_info");
    create = lib.sym<decltype(create)>("qgate_context_create");
    destroy = lib.sym<void (*)(qgate_context*)>("qgate_context_destroy");
    path = lib.sym<int32_t (*)(const qgate_context*)>("qgate_context_path");
    last_error = lib.sym<const char* (*)(const qgate_context*)>("qgate_context_last_error");
    prepare = lib.sym<decltype(prepare)>("qgate_gemm_prepare");
    run = lib.sym<decltype(run)>("qgate_gemm_run");
    release = lib.sym<void (*)(qgate_gemm*)>("qgate_gemm_release");
    unsetenv("MINFER_MMQ");
  }
  void TearDown() override { unsetenv("MINFER_MMQ"); }

  qgate_context* make_cpu(int32_t p, qgate_status* status = nullptr, std::string* msg = nullptr) {
    qgate_context_options o{};
    o.struct_size = sizeof o;
    o.backend = QGATE_BACKEND_CPU;
    o.path = p;
    o.cpu_threads = 2;
    qgate_context* ctx = nullptr;
    char err[512] = {};
    qgate_status s = create(&o, &ctx, err, sizeof err);
    if (status) *status = s;
    if (msg) *msg = err;
    return ctx;
  }

  RefBuild lib;
  uint32_t (*abi_version)() = nullptr;
  const qgate_build_info* (*build_info)() = nullptr;
  qgate_status (*create)(const qgate_context_options*, qgate_context**, char*, size_t) = nullptr;
  void (*destroy)(qgate_context*) = nullptr;
  int32_t (*path)(const qgate_context*) = nullptr;
  const char* (*last_error)(const qgate_context*) = nullptr;
  qgate_status (*prepare)(qgate_context*, int32_t, int64_t, int64_t, const void*, int64_t, qgate_gemm**) = nullptr;
  qgate_status (*run)(qgate_gemm*, const float*, int64_t, float*, void*) = nullptr;
  void (*release)(qgate_gemm*) = nullptr;
};

TEST_F(KernelAbiTest, ReportsVersionAndBuildInfo) {
  EXPECT_EQ(abi_version(), QGATE_ABI_VERSION);
  const qgate_build_info* info = build_info();
  ASSERT_NE(info, nullptr);
  EXPECT_EQ(info->abi_version, QGATE_ABI_VERSION);
  EXPECT_STREQ(info->name, "qgate-ref");
  EXPECT_EQ(std::string(info->backends).rfind("cpu", 0), 0u) << info->backends;
}

TEST_F(KernelAbiTest, PathComesFromMinferMmq) {
  qgate_context* ctx = make_cpu(QGATE_PATH_FROM_ENV);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(path(ctx), QGATE_PATH_F16) << "unset MINFER_MMQ must select f16";
  destroy(ctx);

  setenv("MINFER_MMQ", "1", 1);
  ctx = make_cpu(QGATE_PATH_FROM_ENV);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(path(ctx), QGATE_PATH_MMQ);
  destroy(ctx);

  setenv("MINFER_MMQ", "0", 1);
  ctx = make_cpu(QGATE_PATH_FROM_ENV);
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(path(ctx), QGATE_PATH_F16);
  destroy(ctx);

  setenv("MINFER_MMQ", "yes", 1);
  qgate_status status;
  std::string msg;
  EXPECT_EQ(make_cpu(QGATE_PATH_FROM_ENV, &status, &msg), nullptr);
  EXPECT_EQ(status, QGATE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("MINFER_MMQ"), std::string::npos) << msg;
}

TEST_F(KernelAbiTest, RefusesBadContextOptions) {
  qgate_context* ctx = nullptr;
  char err[256] = {};
  EXPECT_EQ(create(nullptr, &ctx, err, sizeof err), QGATE_ERR_INVALID_ARGUMENT);
  qgate_context_options o{};
  o.struct_size = 4;
  EXPECT_EQ(create(&o, &ctx, err, sizeof err), QGATE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(err).find("struct_size"), std::string::npos) << err;
  o.struct_size = sizeof o;
  o.backend = 42;
  EXPECT_EQ(create(&o, &ctx, err, sizeof err), QGATE_ERR_INVALID_ARGUMENT);
  o.backend = QGATE_BACKEND_CPU;
  o.path = 7;
  EXPECT_EQ(create(&o, &ctx, err, sizeof err), QGATE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ctx, nullptr);
}

TEST_F(KernelAbiTest, RefusesBadGemmArguments) {
  qgate_context* ctx = make_cpu(QGATE_PATH_MMQ);
  ASSERT_NE(ctx, nullptr);
  std::vector<uint8_t> blocks(18 * 8, 0);
  qgate_gemm* g = nullptr;
  EXPECT_EQ(prepare(ctx, 99, 1, 256, blocks.data(), 1, &g), QGATE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(last_error(ctx)).find("unknown weight type"), std::string::npos);
  EXPECT_EQ(prepare(ctx, QGATE_TYPE_Q4_0, 0, 256, blocks.data(), 1, &g), QGATE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(prepare(ctx, QGATE_TYPE_Q4_0, 1, -32, blocks.data(), 1, &g), QGATE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(prepare(ctx, QGATE_TYPE_Q4_0, 1, 33, blocks.data(), 1, &g), QGATE_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(last_error(ctx)).find("not a multiple"), std::string::npos) << last_error(ctx);
  EXPECT_EQ(prepare(ctx, QGATE_TYPE_Q4_K, 1, 32, blocks.data(), 1, &g), QGATE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(prepare(ctx, QGATE_TYPE_Q4_0, 1, 256, nullptr, 1, &g), QGATE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(g, nullptr);

  // A valid GEMM: then nt outside [1, max_nt] is refused and the context stays usable.
  ASSERT_EQ(prepare(ctx, QGATE_TYPE_Q4_0, 1, 256, blocks.data(), 2, &g), QGATE_OK) << last_error(ctx);
  std::vector<float> x(3 * 256, 0.25f), y(3, -1.0f);
  EXPECT_EQ(run(g, x.data(), 3, y.data(), nullptr), QGATE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(run(g, x.data(), 0, y.data(), nullptr), QGATE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(run(g, x.data(), 2, y.data(), nullptr), QGATE_OK) << last_error(ctx);
  // All-zero blocks (d = 0) multiply to exactly zero.
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], -1.0f) << "a row beyond nt must not be written";
  release(g);
  destroy(ctx);
}

TEST_F(KernelAbiTest, CudaWithoutDeviceIsAClearError) {
  qgate_context_options o{};
  o.struct_size = sizeof o;
  o.backend = QGATE_BACKEND_CUDA;
  o.device = 0;
  o.path = QGATE_PATH_MMQ;
  qgate_context* ctx = nullptr;
  char err[512] = {};
  qgate_status s = create(&o, &ctx, err, sizeof err);
  if (s == QGATE_OK) {
    destroy(ctx);
    GTEST_SKIP() << "a CUDA device is present; this test is about its absence";
  }
  EXPECT_TRUE(s == QGATE_ERR_BACKEND || s == QGATE_ERR_UNSUPPORTED) << s;
  EXPECT_GT(std::string(err).size(), 10u) << "the error must say why";
  o.device = -1;
  EXPECT_EQ(create(&o, &ctx, err, sizeof err), QGATE_ERR_INVALID_ARGUMENT);
}

}  // namespace
