// Built-in model profiles: the GEMM lists, shapes and type mixes match the models they name, the
// Q4_K_M "more bits" rule picks the layers llama.cpp picks, and the arithmetic on a profile is right.
#include "qgate/profiles/model_profile.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

using namespace qgate::profiles;
using qgate::quant::WeightType;

namespace {

const ModelProfile& builtin(std::string_view name) {
  const ModelProfile* p = find_builtin_profile(name);
  if (p == nullptr) throw std::runtime_error("no built-in profile " + std::string(name));
  return *p;
}

// Copies per (role, type), summed over entries.
std::map<std::pair<std::string, WeightType>, int> counts_by_role_and_type(const ModelProfile& p) {
  std::map<std::pair<std::string, WeightType>, int> m;
  for (const ProfileGemm& g : p.gemms) m[{g.role, g.type}] += g.count;
  return m;
}

}  // namespace

TEST(ModelProfile, BuiltinsAreListedAndFoundByName) {
  EXPECT_EQ(builtin_profile_names(),
            (std::vector<std::string>{"llama-7b-q4_0", "llama-7b-q4_K_M", "llama-3-8b-q4_K_M", "cpu-tiny"}));
  EXPECT_EQ(builtin_profiles().size(), 4u);
  for (const std::string& name : builtin_profile_names()) {
    ASSERT_NE(find_builtin_profile(name), nullptr) << name;
    EXPECT_EQ(find_builtin_profile(name)->name, name);
  }
  EXPECT_EQ(find_builtin_profile("llama-7b"), nullptr);
  EXPECT_EQ(find_builtin_profile(""), nullptr);
}

TEST(ModelProfile, Llama7bQ4_0HasSevenGemmsPerLayerAndAHead) {
  const ModelProfile& p = builtin("llama-7b-q4_0");
  EXPECT_EQ(p.default_tokens, 512);
  EXPECT_EQ(p.gemms.size(), 8u);  // 7 roles merged over 32 layers, and the head
  EXPECT_EQ(p.gemm_count(), 7 * 32 + 1);
  const std::vector<ProfileGemm> expected = {
      {WeightType::q4_0, 4096, 4096, 32, "attn_q"},       {WeightType::q4_0, 4096, 4096, 32, "attn_k"},
      {WeightType::q4_0, 4096, 4096, 32, "attn_v"},       {WeightType::q4_0, 4096, 4096, 32, "attn_output"},
      {WeightType::q4_0, 11008, 4096, 32, "ffn_gate"},    {WeightType::q4_0, 11008, 4096, 32, "ffn_up"},
      {WeightType::q4_0, 4096, 11008, 32, "ffn_down"},    {WeightType::q6_K, 32000, 4096, 1, "output"},
  };
  EXPECT_EQ(p.gemms, expected);
  // 32 * (4 * 4096^2 + 3 * 11008 * 4096) + 32000 * 4096
  EXPECT_EQ(p.macs_per_token(), 6'607'077'376);
  EXPECT_NEAR(static_cast<double>(p.macs_per_token()), 6.7e9, 0.15e9);
  // q4_0: 18 bytes per 32; q6_K: 210 bytes per 256.
  const uint64_t layer = 4ull * 4096 * (4096 / 32 * 18) + 2ull * 11008 * (4096 / 32 * 18) + 4096ull * (11008 / 32 * 18);
  EXPECT_EQ(p.weight_bytes(), 32 * layer + 32000ull * (4096 / 256 * 210));
}

TEST(ModelProfile, Q4KMRulePicksSixteenOfThirtyTwoLayers) {
  std::vector<int> more;
  for (int layer = 0; layer < 32; ++layer) {
    if (q4_k_m_uses_more_bits(layer, 32)) more.push_back(layer);
  }
  EXPECT_EQ(more, (std::vector<int>{0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31}));
  // 80-layer models: first 10, last 10, every third between.
  int n80 = 0;
  for (int layer = 0; layer < 80; ++layer) n80 += q4_k_m_uses_more_bits(layer, 80) ? 1 : 0;
  EXPECT_EQ(n80, 10 + 10 + 20);
}

TEST(ModelProfile, Llama7bQ4KMUsesQ6KForMoreBitsVAndDown) {
  const ModelProfile& p = builtin("llama-7b-q4_K_M");
  const auto c = counts_by_role_and_type(p);
  EXPECT_EQ(p.gemm_count(), 7 * 32 + 1);
  EXPECT_EQ(p.gemms.size(), 10u);  // attn_v and ffn_down each split into a q4_K and a q6_K entry
  EXPECT_EQ(c.at({"attn_v", WeightType::q6_K}), 16);
  EXPECT_EQ(c.at({"attn_v", WeightType::q4_K}), 16);
  EXPECT_EQ(c.at({"ffn_down", WeightType::q6_K}), 16);
  EXPECT_EQ(c.at({"ffn_down", WeightType::q4_K}), 16);
  for (const char* role : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"}) {
    EXPECT_EQ(c.at({role, WeightType::q4_K}), 32) << role;
    EXPECT_EQ(c.count({role, WeightType::q6_K}), 0u) << role;
  }
  EXPECT_EQ(c.at({"output", WeightType::q6_K}), 1);
  EXPECT_EQ(p.macs_per_token(), builtin("llama-7b-q4_0").macs_per_token());  // same shapes, other types
}

TEST(ModelProfile, Llama3_8bHasGqaShapesAndTheBigVocabulary) {
  const ModelProfile& p = builtin("llama-3-8b-q4_K_M");
  EXPECT_EQ(p.gemm_count(), 7 * 32 + 1);
  std::set<std::tuple<std::string, int64_t, int64_t>> shapes;
  for (const ProfileGemm& g : p.gemms) shapes.insert({g.role, g.od, g.k});
  const std::set<std::tuple<std::string, int64_t, int64_t>> expected = {
      {"attn_q", 4096, 4096},     {"attn_k", 1024, 4096},   {"attn_v", 1024, 4096},
      {"attn_output", 4096, 4096}, {"ffn_gate", 14336, 4096}, {"ffn_up", 14336, 4096},
      {"ffn_down", 4096, 14336},  {"output", 128256, 4096},
  };
  EXPECT_EQ(shapes, expected);
  const auto c = counts_by_role_and_type(p);
  EXPECT_EQ(c.at({"attn_v", WeightType::q6_K}), 16);
  EXPECT_EQ(c.at({"ffn_down", WeightType::q6_K}), 16);
  // 32 * (2 * 4096^2 + 2 * 1024 * 4096 + 3 * 14336 * 4096) + 128256 * 4096
  EXPECT_EQ(p.macs_per_token(), 7'504'658'432);
}

TEST(ModelProfile, CpuTinyIsSmallAndMixesThreeTypes) {
  const ModelProfile& p = builtin("cpu-tiny");
  EXPECT_EQ(p.default_tokens, 32);
  EXPECT_EQ(p.gemm_count(), 7 * 2 + 1);
  std::set<WeightType> types;
  for (const ProfileGemm& g : p.gemms) types.insert(g.type);
  EXPECT_EQ(types, (std::set<WeightType>{WeightType::q4_0, WeightType::q4_K, WeightType::q6_K}));
  // A pass is ~63 M MACs: a CPU reference does that in well under a second on two cores.
  EXPECT_LT(p.macs_per_token() * p.default_tokens, 100'000'000);
}

TEST(ModelProfile, EveryBuiltinShapeIsRunnableAndMerged) {
  for (const ModelProfile& p : builtin_profiles()) {
    EXPECT_FALSE(p.description.empty()) << p.name;
    std::set<std::tuple<WeightType, int64_t, int64_t, std::string>> seen;
    for (const ProfileGemm& g : p.gemms) {
      EXPECT_GT(g.od, 0) << p.name << " " << g.role;
      EXPECT_EQ(g.k % qgate::quant::traits(g.type).block_elems, 0) << p.name << " " << g.role;
      EXPECT_EQ(g.k % 256, 0) << p.name << " " << g.role;  // every row fits the K-quant super-block too
      EXPECT_TRUE(seen.insert({g.type, g.od, g.k, g.role}).second) << p.name << ": unmerged " << g.role;
    }
    if (p.name != "cpu-tiny") EXPECT_EQ(p.default_tokens, 512) << p.name;
  }
}

TEST(ModelProfile, AddGemmMergesIdenticalEntriesAndRefusesEmptyShapes) {
  ModelProfile p;
  p.name = "t";
  p.add_gemm(WeightType::q8_0, 64, 128, "x");
  p.add_gemm(WeightType::q8_0, 64, 128, "x", 2);
  p.add_gemm(WeightType::q8_0, 64, 128, "y");
  p.add_gemm(WeightType::q4_1, 64, 128, "x");
  ASSERT_EQ(p.gemms.size(), 3u);
  EXPECT_EQ(p.gemms[0].count, 3);
  EXPECT_EQ(p.gemm_count(), 5);
  EXPECT_EQ(p.macs_per_token(), 5 * 64 * 128);
  EXPECT_EQ(p.gemms[0].weight_bytes(), 3u * 64 * (128 / 32 * 34));
  EXPECT_THROW(p.add_gemm(WeightType::q8_0, 0, 128, "z"), std::invalid_argument);
  EXPECT_THROW(p.add_gemm(WeightType::q8_0, 64, -32, "z"), std::invalid_argument);
  EXPECT_THROW(p.add_gemm(WeightType::q8_0, 64, 128, "z", 0), std::invalid_argument);
}

// What one worker holds after prepare: weights per entry (not per merged copy) as f16, one
// activation block per distinct k, one output for the widest GEMM.
TEST(ModelProfile, PreparedBytesCountEachEntryOnceAsF16PlusOneInputPerKAndTheWidestOutput) {
  ModelProfile p;
  p.add_gemm(WeightType::q4_0, 64, 128, "x", 3);
  p.add_gemm(WeightType::q6_K, 32, 256, "y");
  p.add_gemm(WeightType::q8_0, 96, 128, "z");
  const uint64_t weights = (64 * 128 + 32 * 256 + 96 * 128) * 2;
  const uint64_t inputs = 8 * (128 + 256) * 4;
  const uint64_t output = 8 * 96 * 4;
  EXPECT_EQ(p.prepared_bytes(8), weights + inputs + output);
}
