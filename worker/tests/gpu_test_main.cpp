// main() of the worker's GPU tests. Without a CUDA device every case is skipped as it starts (its
// body never runs), so each reads as skipped in ctest, never as passed. Listing the cases
// (--gtest_list_tests, as ctest's test discovery does) needs no device.
#include <gtest/gtest.h>

#include "qgate/worker/device_api.h"

namespace {

class SkipEveryCase : public ::testing::EmptyTestEventListener {
 public:
  // Called once the case is the current one: the skip is recorded on it, and gtest then runs
  // neither its SetUp nor its body.
  void OnTestStart(const ::testing::TestInfo&) override { GTEST_SKIP() << "no CUDA device"; }
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!GTEST_FLAG_GET(list_tests) && qgate::worker::cuda_device_count() == 0) {
    ::testing::UnitTest::GetInstance()->listeners().Append(new SkipEveryCase);
  }
  return RUN_ALL_TESTS();
}
