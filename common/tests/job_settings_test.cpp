// A job's settings' word lists: every value has its word and back, and a word of no value (wrong
// case, empty, another enum's) is refused rather than read as a default.
#include "qgate/common/job_settings.h"

#include <gtest/gtest.h>

namespace qgate {
namespace {

TEST(JobSettings, EveryValueReadsBackFromItsWord) {
  for (RunOrder v : {RunOrder::Abba, RunOrder::Sequential}) EXPECT_EQ(run_order_from_string(to_string(v)), v);
  for (TimingMode v : {TimingMode::Gemm, TimingMode::Pass}) EXPECT_EQ(timing_mode_from_string(to_string(v)), v);
  for (ShapeSet v : {ShapeSet::Unspecified, ShapeSet::Standard, ShapeSet::Quick, ShapeSet::None})
    EXPECT_EQ(shape_set_from_string(to_string(v)), v);
  EXPECT_EQ(to_string(RunOrder::Abba), "abba");
  EXPECT_EQ(to_string(TimingMode::Pass), "pass");
  EXPECT_EQ(to_string(ShapeSet::Quick), "quick");
}

TEST(JobSettings, WordsOfNoValueAreRefused) {
  EXPECT_EQ(run_order_from_string("ABBA"), std::nullopt);
  EXPECT_EQ(run_order_from_string(""), std::nullopt);
  EXPECT_EQ(timing_mode_from_string("abba"), std::nullopt);
  EXPECT_EQ(shape_set_from_string("all"), std::nullopt);
}

}  // namespace
}  // namespace qgate
