// The verdicts' and comparisons' word lists: every value has its word and back, and a word that is
// none of them (wrong case, empty, a neighbour's) is refused rather than read as a default.
#include "qgate/common/verdicts.h"

#include <gtest/gtest.h>

namespace qgate {
namespace {

TEST(Verdicts, EveryVerdictReadsBackFromItsWord) {
  for (Verdict v : {Verdict::Pass, Verdict::Fail, Verdict::Inconclusive}) {
    EXPECT_EQ(verdict_from_string(to_string(v)), v) << to_string(v);
  }
  EXPECT_EQ(to_string(Verdict::Pass), "PASS");
  EXPECT_EQ(to_string(Verdict::Inconclusive), "INCONCLUSIVE");
}

TEST(Verdicts, EveryComparisonReadsBackFromItsWord) {
  for (Comparison c : {Comparison::Same, Comparison::Different, Comparison::Unknown}) {
    EXPECT_EQ(comparison_from_string(to_string(c)), c) << to_string(c);
  }
  EXPECT_EQ(to_string(Comparison::Different), "DIFFERENT");
}

TEST(Verdicts, WordsOfNoValueAreRefused) {
  EXPECT_EQ(verdict_from_string("pass"), std::nullopt);
  EXPECT_EQ(verdict_from_string(""), std::nullopt);
  EXPECT_EQ(verdict_from_string("SAME"), std::nullopt);
  EXPECT_EQ(comparison_from_string("PASS"), std::nullopt);
  EXPECT_EQ(comparison_from_string("Same"), std::nullopt);
}

}  // namespace
}  // namespace qgate
