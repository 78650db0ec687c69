// Tests of the spec enumerations' words: both directions, unknown words, and `qgate show` printing
// the words rather than the enum names.
#include "qgate/v1/spec_words.h"

#include <gtest/gtest.h>

#include "qgate/client/format.h"

namespace qgate::client {
using namespace qgate::words;
namespace {

TEST(SpecWords, EveryWordNamesItsValueAndBack) {
  for (const char* word : {"abba", "sequential"}) EXPECT_EQ(spec_word(run_order_from_word(word).value()), word);
  for (const char* word : {"gemm", "pass"}) EXPECT_EQ(spec_word(timing_mode_from_word(word).value()), word);
  for (const char* word : {"standard", "quick", "none"})
    EXPECT_EQ(spec_word(shape_set_from_word(word).value()), word);
  EXPECT_EQ(run_order_from_word("sequential"), v1::RUN_ORDER_SEQUENTIAL);
  EXPECT_EQ(timing_mode_from_word("pass"), v1::TIMING_MODE_PASS);
  EXPECT_EQ(shape_set_from_word("none"), v1::SHAPE_SET_NONE);
}

TEST(SpecWords, UnspecifiedReadsAsItsDefaultAndUnknownWordsNameNothing) {
  EXPECT_EQ(spec_word(v1::RUN_ORDER_UNSPECIFIED), "abba");
  EXPECT_EQ(spec_word(v1::TIMING_MODE_UNSPECIFIED), "gemm");
  EXPECT_EQ(spec_word(v1::SHAPE_SET_UNSPECIFIED), "standard");
  EXPECT_FALSE(run_order_from_word("RUN_ORDER_ABBA").has_value());
  EXPECT_FALSE(timing_mode_from_word("").has_value());
  EXPECT_FALSE(shape_set_from_word("Quick").has_value());
}

TEST(SpecWords, JobDetailsShowTheWords) {
  v1::Job job;
  job.set_id(5);
  job.mutable_spec()->set_kind(v1::JOB_KIND_AB);
  job.mutable_spec()->set_order(v1::RUN_ORDER_SEQUENTIAL);
  job.mutable_spec()->set_timing(v1::TIMING_MODE_PASS);
  job.mutable_spec()->set_parity_shapes(v1::SHAPE_SET_QUICK);
  job.set_disposition(v1::DISPOSITION_LEAKED);
  const std::string text = format_job_details(job, 0);
  EXPECT_NE(text.find("order sequential, timing pass, parity shapes quick"), std::string::npos) << text;
  EXPECT_NE(text.find("LEAKED"), std::string::npos) << text;
  EXPECT_EQ(text.find("RUN_ORDER"), std::string::npos) << text;
}

}  // namespace
}  // namespace qgate::client
