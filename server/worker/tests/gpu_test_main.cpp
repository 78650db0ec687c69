// Main of the worker's GPU tests: without a CUDA device they exit 77, which ctest reports as
// skipped (never as passed).
#include <gtest/gtest.h>

#include <cstdio>

#include "qgate/worker/device_api.h"

int main(int argc, char** argv) {
  if (qgate::worker::cuda_device_count() == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
