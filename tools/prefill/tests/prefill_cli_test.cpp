// The real qgate-prefill binary on the CPU backend: MMQ and f16 agree on the greedy tokens of a tiny
// model, a build with a scale bug does not, the output is llama-bench JSON that qgate's importer
// reads, and unusable inputs exit 2 with a message naming the problem.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "prefill_process.h"
#include "qgate/interop/import_file.h"
#include "qgate/testing/gguf_test_model.h"

namespace qgate::prefill::testing {
namespace {

// A 512-token prompt, as llama-bench's default pp test: enough positions that the scale bug changes
// several greedy tokens (docs/prefill-engine.md measures how many).
constexpr int kPrompt = 512;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class PrefillCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = make_temp_dir();
    model_ = dir_ + "/tiny.gguf";
    const ProcessResult w = run_prefill("write-model --out " + model_ + " --shape tiny --seed 14");
    ASSERT_EQ(w.exit_code, 0) << w.err;
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }

  // `run` on the tiny model; `extra` adds options.
  static ProcessResult run(const std::string& build, const std::string& env, const std::string& extra = "",
                           int repetitions = 1) {
    return run_prefill("run --model " + model_ + " --build " + build + " --prompt " + std::to_string(kPrompt) +
                           " --repetitions " + std::to_string(repetitions) + " --threads 2 " + extra,
                       env);
  }
  // The single JSON object of a successful `run`.
  static nlohmann::json result(const ProcessResult& r) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const auto array = nlohmann::json::parse(r.out);
    EXPECT_TRUE(array.is_array());
    EXPECT_EQ(array.size(), 1u);
    return array.at(0);
  }
  static std::vector<int> tokens(const nlohmann::json& j) { return j.at("tokens").get<std::vector<int>>(); }

  static std::string dir_, model_;
};
std::string PrefillCli::dir_, PrefillCli::model_;

TEST_F(PrefillCli, MmqAndF16GiveTheSameTokens) {
  const auto mmq = result(run(ref_library(), "MINFER_MMQ=1", "", 2));
  const auto f16 = result(run(ref_library(), "MINFER_MMQ=0"));
  EXPECT_EQ(mmq.at("mmq"), true);
  EXPECT_EQ(f16.at("mmq"), false);
  for (const auto* j : {&mmq, &f16}) {
    EXPECT_EQ(j->at("n_prompt"), kPrompt);
    EXPECT_EQ(j->at("n_gen"), 0);
    EXPECT_GT(j->at("avg_ts").get<double>(), 0.0);
    EXPECT_EQ(j->at("backends"), "CPU");
    EXPECT_EQ(j->at("model_filename"), model_);
    EXPECT_EQ(tokens(*j).size(), size_t(kPrompt));
  }
  EXPECT_EQ(mmq.at("samples_ns").size(), 2u);
  EXPECT_EQ(f16.at("samples_ns").size(), 1u);
  EXPECT_EQ(tokens(mmq), tokens(f16));
  // The default path is the worker's: f16 when MINFER_MMQ is unset.
  EXPECT_EQ(result(run(ref_library(), "-u MINFER_MMQ")).at("mmq"), false);
}

TEST_F(PrefillCli, AnotherCorrectBuildGivesTheSameTokens) {
  // A build of ggml's numerics (another activation rounding) is a correct build: the same tokens.
  // (Its f16 path is the reference's f16 arithmetic; the MMQ path is where the two builds differ.)
  const auto ref = tokens(result(run(ref_library(), "MINFER_MMQ=1")));
  EXPECT_EQ(tokens(result(run(QGATE_GGML_CPU_BUILD, "MINFER_MMQ=1"))), ref);
}

TEST_F(PrefillCli, ScaleBugGivesOtherTokens) {
  const auto ref = tokens(result(run(ref_library(), "MINFER_MMQ=1")));
  for (const char* env : {"MINFER_MMQ=1", "MINFER_MMQ=0"}) {
    const auto bad = tokens(result(run(QGATE_GGML_CPU_BUILD_BAD, env)));
    ASSERT_EQ(bad.size(), ref.size());
    int differ = 0;
    for (size_t i = 0; i < ref.size(); ++i) differ += bad[i] != ref[i];
    EXPECT_GE(differ, 3) << env << ": the scale bug changed only " << differ << " of " << kPrompt << " tokens";
  }
}

TEST_F(PrefillCli, JsonlIsOneObjectPerLine) {
  const ProcessResult r = run(ref_library(), "MINFER_MMQ=1", "--output jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.back(), '\n');
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1);
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.at("n_prompt"), kPrompt);
  EXPECT_EQ(j.at("mmq"), true);
}

TEST_F(PrefillCli, InteropReadsTheOutputAsLlamaBench) {
  const ProcessResult r = run(ref_library(), "MINFER_MMQ=1");
  const auto j = result(r);
  const interop::ParsedImport json = interop::parse_import(r.out, "llama-bench-json", "prefill.json");
  ASSERT_EQ(json.runs.size(), 1u);
  const interop::ExternalRun& run = json.runs[0];
  EXPECT_EQ(run.tool, "llama-bench");
  EXPECT_EQ(run.path, "pp");
  EXPECT_EQ(run.tokens, kPrompt);
  EXPECT_EQ(run.profile, j.at("model_type").get<std::string>());
  EXPECT_EQ(run.build_commit, j.at("build_commit").get<std::string>());
  EXPECT_DOUBLE_EQ(run.tokens_per_s, j.at("avg_ts").get<double>());
  // The format is recognised without being named, as JSON and as JSON lines.
  EXPECT_EQ(interop::parse_import(r.out, "auto", "prefill.json").runs.size(), 1u);
  const ProcessResult lines = run_prefill("run --model " + model_ + " --build " + ref_library() +
                                          " --prompt 16 --repetitions 1 --output jsonl");
  ASSERT_EQ(lines.exit_code, 0) << lines.err;
  EXPECT_EQ(interop::parse_import(lines.out, "llama-bench-jsonl", "prefill.jsonl").runs.at(0).tokens, 16);
}

TEST_F(PrefillCli, MissingModelExitsTwo) {
  const std::string missing = dir_ + "/no-such-model.gguf";
  const ProcessResult r = run_prefill("run --model " + missing + " --build " + ref_library());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find(missing), std::string::npos) << r.err;
}

TEST_F(PrefillCli, TruncatedModelExitsTwo) {
  const std::string cut = dir_ + "/truncated.gguf";
  const std::string bytes = slurp(model_);
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  const ProcessResult r = run_prefill("run --model " + cut + " --build " + ref_library());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(cut), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("truncated"), std::string::npos) << r.err;
}

TEST_F(PrefillCli, ModelWithoutALlamaTensorExitsTwo) {
  // qgate's GGUF test model: llama-named, but block 1 has stacked experts and no ffn_gate.
  const std::string path = dir_ + "/experts.gguf";
  const auto tensors = profiles::testing::llama_test_tensors();
  const auto file = profiles::testing::make_test_gguf(tensors);
  std::string error;
  ASSERT_TRUE(profiles::testing::write_file(path, file.bytes, &error)) << error;
  // make_test_gguf writes no llama.* dimensions but block_count; the engine names the first gap.
  const ProcessResult r = run_prefill("run --model " + path + " --build " + ref_library());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("missing"), std::string::npos) << r.err;
}

TEST_F(PrefillCli, NonElfBuildExitsTwo) {
  const std::string fake = dir_ + "/not-a-build.so";
  std::ofstream(fake) << "this is a text file, not a shared object\n";
  const ProcessResult r = run_prefill("run --model " + model_ + " --build " + fake);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find(fake), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ELF"), std::string::npos) << r.err;
}

TEST_F(PrefillCli, WriteModelIsDeterministic) {
  const std::string a = dir_ + "/a.gguf", b = dir_ + "/b.gguf", c = dir_ + "/c.gguf";
  ASSERT_EQ(run_prefill("write-model --out " + a + " --shape tiny --layers 1 --seed 3").exit_code, 0);
  ASSERT_EQ(run_prefill("write-model --out " + b + " --shape tiny --layers 1 --seed 3").exit_code, 0);
  ASSERT_EQ(run_prefill("write-model --out " + c + " --shape tiny --layers 1 --seed 4").exit_code, 0);
  EXPECT_EQ(slurp(a), slurp(b));
  EXPECT_NE(slurp(a), slurp(c));
  EXPECT_EQ(slurp(a).size(), slurp(c).size());
}

TEST_F(PrefillCli, BadUsageExitsTwo) {
  EXPECT_EQ(run_prefill("run --build " + ref_library()).exit_code, 2);  // no --model
  EXPECT_EQ(run_prefill("write-model --out x.gguf --shape 13b").exit_code, 2);
  EXPECT_EQ(run_prefill("run --model " + model_ + " --build " + ref_library(), "MINFER_MMQ=2").exit_code, 1);
}

}  // namespace
}  // namespace qgate::prefill::testing
