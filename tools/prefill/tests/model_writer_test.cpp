// qgate-prefill's model writer: llama.cpp's q4_K_M type choices, a tiny file that reads back as
// planned with every gated type present, and llama-bench's statistics of the report.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>

#include "qgate/prefill/bench_report.h"
#include "qgate/prefill/model_writer.h"
#include "qgate/profiles/gguf_tensors.h"

namespace qgate::prefill {
namespace {

constexpr uint32_t kQ4_K = 12, kQ6_K = 14, kF16 = 1, kF32 = 0;

std::map<std::string, uint32_t> types_of(const std::vector<PlannedTensor>& plan) {
  std::map<std::string, uint32_t> out;
  for (const auto& t : plan) out[t.name] = t.type;
  return out;
}

TEST(PrefillModelWriter, Q4KMediumUsesQ6KWhereLlamaCppDoes) {
  // llama.cpp's use_more_bits for 32 layers: the first and last four, and every third from 6 to 27.
  const std::set<int> more_bits = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31};
  const auto types = types_of(plan_tensors(model_spec(ModelShape::llama7b_q4_K_M, 32)));
  EXPECT_EQ(types.at("token_embd.weight"), kQ4_K);
  EXPECT_EQ(types.at("output.weight"), kQ6_K);
  EXPECT_EQ(types.at("output_norm.weight"), kF32);
  for (int i = 0; i < 32; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const uint32_t wide = more_bits.count(i) ? kQ6_K : kQ4_K;
    EXPECT_EQ(types.at(b + "attn_v.weight"), wide) << b;
    EXPECT_EQ(types.at(b + "ffn_down.weight"), wide) << b;
    for (const char* n : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"})
      EXPECT_EQ(types.at(b + n + ".weight"), kQ4_K) << b << n;
    EXPECT_EQ(types.at(b + "attn_norm.weight"), kF32);
  }
  // Two layers (the default): only the last is a use_more_bits layer (i >= 7*2/8 = 1).
  const auto two = types_of(plan_tensors(model_spec(ModelShape::llama7b_q4_K_M, 2)));
  EXPECT_EQ(two.at("blk.0.attn_v.weight"), kQ4_K);
  EXPECT_EQ(two.at("blk.0.ffn_down.weight"), kQ4_K);
  EXPECT_EQ(two.at("blk.1.attn_v.weight"), kQ6_K);
  EXPECT_EQ(two.at("blk.1.ffn_down.weight"), kQ6_K);
}

TEST(PrefillModelWriter, SevenBHasLlamaSevenBDimensions) {
  const ModelSpec s = model_spec(ModelShape::llama7b_q4_K_M, 2);
  EXPECT_EQ(s.n_embd, 4096);
  EXPECT_EQ(s.n_ff, 11008);
  EXPECT_EQ(s.n_head, 32);
  EXPECT_EQ(s.n_vocab, 32000);
  std::map<std::string, std::vector<uint64_t>> dims;
  for (const auto& t : plan_tensors(s)) dims[t.name] = t.ne;
  EXPECT_EQ(dims.at("blk.0.ffn_up.weight"), (std::vector<uint64_t>{4096, 11008}));
  EXPECT_EQ(dims.at("blk.0.ffn_down.weight"), (std::vector<uint64_t>{11008, 4096}));
  EXPECT_EQ(dims.at("output.weight"), (std::vector<uint64_t>{4096, 32000}));
  EXPECT_THROW(model_spec(ModelShape::tiny, 0), std::invalid_argument);
}

TEST(PrefillModelWriter, TinyFileReadsBackAsPlannedWithEveryGatedType) {
  const std::string path = ::testing::TempDir() + "prefill-tiny-" + std::to_string(getpid()) + ".gguf";
  const ModelSpec spec = model_spec(ModelShape::tiny, 2);
  write_model(path, spec, 7);
  std::string error;
  auto source = profiles::GgufTensorSource::open(path, &error);
  ASSERT_TRUE(source) << error;
  const auto plan = plan_tensors(spec);
  ASSERT_EQ(source->tensors().size(), plan.size());
  std::set<int32_t> gated;
  for (size_t i = 0; i < plan.size(); ++i) {
    const auto& t = source->tensors()[i];
    EXPECT_EQ(t.name, plan[i].name);
    EXPECT_EQ(t.type, plan[i].type) << t.name;
    for (size_t d = 0; d < plan[i].ne.size(); ++d) EXPECT_EQ(t.ne[d], plan[i].ne[d]) << t.name;
    if (t.gated()) gated.insert(int32_t(*t.weight_type));
    auto bytes = source->read(t, &error);
    ASSERT_TRUE(bytes) << error;
    EXPECT_EQ(bytes->size(), t.bytes);
  }
  EXPECT_EQ(gated.size(), 8u) << "the tiny model holds every gated type";
  EXPECT_EQ(source->find("token_embd.weight")->type, kF16);
  EXPECT_EQ(source->header().find("llama.embedding_length")->u, 256u);
  std::filesystem::remove(path);
}

TEST(PrefillBenchReport, StatisticsAreLlamaBenchs) {
  BenchRecord r;
  r.n_prompt = 100;
  r.samples_ns = {1'000'000, 2'000'000};  // 100000 and 50000 tok/s
  const BenchStats s = bench_stats(r);
  EXPECT_EQ(s.avg_ns, 1'500'000u);
  EXPECT_EQ(s.stddev_ns, 707'107u);
  EXPECT_DOUBLE_EQ(s.avg_ts, 75000.0);
  EXPECT_NEAR(s.stddev_ts, 35355.339, 1e-3);
  const std::string line = bench_jsonl({r, r});
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 2);
}

}  // namespace
}  // namespace qgate::prefill
