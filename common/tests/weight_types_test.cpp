// The weight types' host facts: ggml's ids, names, block sizes and min terms, the name and id
// lookups, and row sizes.
#include "qgate/common/weight_types.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

namespace qgate::quant {
namespace {

TEST(WeightTypes, AllTypesInSweepOrder) {
  const std::vector<WeightType> expected = {WeightType::q4_0, WeightType::q4_1, WeightType::q5_0,
                                            WeightType::q5_1, WeightType::q8_0, WeightType::q4_K,
                                            WeightType::q5_K, WeightType::q6_K};
  const auto types = all_types();
  ASSERT_EQ(types.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(types[i], expected[i]);
}

TEST(WeightTypes, TraitsMatchGgml) {
  struct Row { WeightType type; const char* name; int elems; int bytes; bool has_min; };
  const Row rows[] = {
      {WeightType::q4_0, "q4_0", 32, 18, false},  {WeightType::q4_1, "q4_1", 32, 20, true},
      {WeightType::q5_0, "q5_0", 32, 22, false},  {WeightType::q5_1, "q5_1", 32, 24, true},
      {WeightType::q8_0, "q8_0", 32, 34, false},  {WeightType::q4_K, "q4_K", 256, 144, true},
      {WeightType::q5_K, "q5_K", 256, 176, true}, {WeightType::q6_K, "q6_K", 256, 210, false},
  };
  for (const Row& r : rows) {
    const TypeTraits& t = traits(r.type);
    EXPECT_EQ(t.type, r.type);
    EXPECT_EQ(t.name, r.name);
    EXPECT_EQ(t.block_elems, r.elems) << r.name;
    EXPECT_EQ(t.block_bytes, r.bytes) << r.name;
    EXPECT_EQ(t.has_min, r.has_min) << r.name;
  }
  EXPECT_THROW(traits(static_cast<WeightType>(9)), std::invalid_argument);
}

TEST(WeightTypes, ParseTypeIsCaseInsensitiveAndStrict) {
  EXPECT_EQ(parse_type("q4_0"), WeightType::q4_0);
  EXPECT_EQ(parse_type("Q4_1"), WeightType::q4_1);
  EXPECT_EQ(parse_type("q4_K"), WeightType::q4_K);
  EXPECT_EQ(parse_type("q4_k"), WeightType::q4_K);
  EXPECT_EQ(parse_type("Q5_K"), WeightType::q5_K);
  EXPECT_EQ(parse_type("q6_k"), WeightType::q6_K);
  EXPECT_EQ(parse_type("q8_0"), WeightType::q8_0);
  for (const char* bad : {"", "q4", "q4_2", "q8_K", "q4_K ", " q4_K", "f16", "q4_0x"}) {
    EXPECT_FALSE(parse_type(bad).has_value()) << '"' << bad << '"';
  }
  for (WeightType t : all_types()) EXPECT_EQ(parse_type(traits(t).name), t);
}

TEST(WeightTypes, ValidTypeIdsAreGgmlsNumbers) {
  for (int32_t id : {2, 3, 6, 7, 8, 12, 13, 14}) EXPECT_TRUE(is_valid_type_id(id)) << id;
  for (int32_t id : {-1, 0, 1, 4, 5, 9, 10, 11, 15, 16, 1000}) EXPECT_FALSE(is_valid_type_id(id)) << id;
}

TEST(WeightTypes, RowBytes) {
  EXPECT_EQ(row_bytes(WeightType::q4_0, 64), 36u);
  EXPECT_EQ(row_bytes(WeightType::q8_0, 4096), 128u * 34u);
  EXPECT_EQ(row_bytes(WeightType::q4_K, 512), 288u);
  EXPECT_EQ(row_bytes(WeightType::q6_K, 4096), 16u * 210u);
  EXPECT_EQ(row_bytes(WeightType::q5_K, 0), 0u);
  EXPECT_THROW(row_bytes(WeightType::q4_K, 32), std::invalid_argument);
  EXPECT_THROW(row_bytes(WeightType::q4_0, 33), std::invalid_argument);
}

TEST(WeightTypes, TraitsAreUsableAtCompileTime) {
  static_assert(traits(WeightType::q6_K).block_bytes == 210);
  static_assert(traits(WeightType::q4_1).has_min);
  EXPECT_EQ(traits(WeightType::q5_0).name, "q5_0");
}

}  // namespace
}  // namespace qgate::quant
