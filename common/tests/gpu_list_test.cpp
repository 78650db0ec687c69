// GPU lists as qgated --gpus and the CLI's --gpu take them.
#include "qgate/common/gpu_list.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace qgate::common {
namespace {

TEST(GpuList, ParsesCommaSeparatedOrdinals) {
  EXPECT_EQ(parse_gpu_list("0,1"), (std::vector<int>{0, 1}));
  EXPECT_EQ(parse_gpu_list("3"), (std::vector<int>{3}));
  for (const char* bad : {"", ",", "0,", "a", "-1", "0 1", "1.5", "99999"})
    EXPECT_THROW(parse_gpu_list(bad), std::invalid_argument) << bad;
}

}  // namespace
}  // namespace qgate::common
