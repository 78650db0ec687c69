// main() of the GPU tests. Without a usable CUDA device every case is skipped as it starts (its
// body never runs), so each reads as skipped in ctest, never as passed. Listing the
// cases (--gtest_list_tests, as ctest's test discovery does) needs no device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace {

class SkipEveryCase : public ::testing::EmptyTestEventListener {
 public:
  explicit SkipEveryCase(std::string reason) : reason_(std::move(reason)) {}
  // Called once the case is the current one: the skip is recorded on it, and gtest then runs
  // neither its SetUp nor its body.
  void OnTestStart(const ::testing::TestInfo&) override { GTEST_SKIP() << reason_; }

 private:
  std::string reason_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!GTEST_FLAG_GET(list_tests)) {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      const std::string why = e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount reported 0 devices";
      ::testing::UnitTest::GetInstance()->listeners().Append(new SkipEveryCase("no CUDA device: " + why));
    }
  }
  return RUN_ALL_TESTS();
}
