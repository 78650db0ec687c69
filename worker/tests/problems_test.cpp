// Shapes, type lists and seeds: parsing errors are clear, the sweep is what the gate promises.
#include "qgate/worker/problems.h"

#include <gtest/gtest.h>

#include <set>

using namespace qgate::worker;
using qgate::quant::WeightType;

TEST(Problems, ParsesShapes) {
  std::string error;
  auto s = parse_shape("512x4096x14336", &error);
  ASSERT_TRUE(s) << error;
  EXPECT_EQ(*s, (GemmShape{512, 4096, 14336}));
  EXPECT_EQ(s->to_string(), "512x4096x14336");
}

TEST(Problems, RefusesBadShapesWithAReason) {
  for (const char* bad : {"", "512x4096", "0x4096x4096", "-1x2x3", "1xabcx3", "1x2x3x", "1x2x", "1x2x0"}) {
    std::string error;
    EXPECT_FALSE(parse_shape(bad, &error)) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
  std::string error;
  parse_shape("0x4096x4096", &error);
  EXPECT_NE(error.find("nt must be positive"), std::string::npos) << error;
}

TEST(Problems, StandardSweepIsEightShapesEveryTypeCanRun) {
  const auto& shapes = standard_shapes();
  ASSERT_EQ(shapes.size(), 8u);
  bool has_7b = false, has_two_superblocks = false, has_odd_edges = false;
  for (const auto& s : shapes) {
    EXPECT_EQ(s.k % 256, 0) << s.to_string();
    has_7b |= s == GemmShape{512, 4096, 4096};
    has_two_superblocks |= s.k == 512;
    has_odd_edges |= (s.nt % 64 != 0) && (s.od % 64 != 0);
  }
  EXPECT_TRUE(has_7b);
  EXPECT_TRUE(has_two_superblocks);
  EXPECT_TRUE(has_odd_edges);
}

TEST(Problems, ParsesTypes) {
  std::string error;
  auto all = parse_types("all", &error);
  ASSERT_TRUE(all);
  EXPECT_EQ(all->size(), 8u);
  auto two = parse_types("q4_0,Q6_k", &error);
  ASSERT_TRUE(two) << error;
  EXPECT_EQ((*two)[0], WeightType::q4_0);
  EXPECT_EQ((*two)[1], WeightType::q6_K);
  EXPECT_FALSE(parse_types("q4_0,q3_K", &error));
  EXPECT_NE(error.find("unknown weight type 'q3_K'"), std::string::npos) << error;
  EXPECT_FALSE(parse_types("", &error));
}

TEST(Problems, SeedsAreStableAndDistinct) {
  const GemmShape a{7, 33, 256}, b{7, 33, 512};
  EXPECT_EQ(case_seed(1, WeightType::q4_0, a), case_seed(1, WeightType::q4_0, a));
  std::set<uint64_t> seen = {case_seed(1, WeightType::q4_0, a), case_seed(1, WeightType::q4_1, a),
                             case_seed(1, WeightType::q4_0, b), case_seed(2, WeightType::q4_0, a)};
  EXPECT_EQ(seen.size(), 4u);
}

TEST(Problems, InputsAreSeededAndNeverZero) {
  auto x1 = make_activations(3, 64, 42), x2 = make_activations(3, 64, 42), x3 = make_activations(3, 64, 43);
  EXPECT_EQ(x1, x2);
  EXPECT_NE(x1, x3);
  for (float v : x1) EXPECT_NE(v, 0.0f);
  auto w1 = make_weights(WeightType::q5_K, 3, 256, 9), w2 = make_weights(WeightType::q5_K, 3, 256, 9);
  EXPECT_EQ(w1, w2);
  EXPECT_EQ(w1.size(), 3u * 176u);
}
