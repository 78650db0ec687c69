// qgate-prefill on the CUDA backend with the reference build: MMQ and f16 give the same greedy
// tokens of the tiny model, and the same as the CPU backend. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "prefill_process.h"
#include "qgate/worker/device_api.h"

namespace qgate::prefill::testing {
namespace {

std::vector<int> tokens_of(const ProcessResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out).at(0).at("tokens").get<std::vector<int>>();
}

TEST(PrefillGpu, MmqAndF16GiveTheCpuTokens) {
  if (worker::cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const std::string dir = make_temp_dir();
  const std::string model = dir + "/tiny.gguf";
  ASSERT_EQ(run_prefill("write-model --out " + model + " --shape tiny --seed 14").exit_code, 0);
  const std::string args = "run --model " + model + " --build " + ref_library() + " --prompt 512 --repetitions 2";
  const auto cpu = tokens_of(run_prefill(args + " --backend cpu", "MINFER_MMQ=1"));
  const ProcessResult mmq = run_prefill(args + " --backend cuda", "MINFER_MMQ=1");
  const ProcessResult f16 = run_prefill(args + " --backend cuda", "MINFER_MMQ=0");
  EXPECT_EQ(tokens_of(mmq), cpu);
  EXPECT_EQ(tokens_of(f16), cpu);
  const auto j = nlohmann::json::parse(mmq.out).at(0);
  EXPECT_EQ(j.at("backends"), "CUDA");
  EXPECT_EQ(j.at("mmq"), true);
  EXPECT_GT(j.at("avg_ts").get<double>(), 0.0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace qgate::prefill::testing
