// Numerics profiles end to end: kernel builds that were not written with qgate's kernels, submitted
// to a real qgated through the real CLI. A build in ggml's numerics that declares so PASSes its
// parity job; judged in qgate's numerics it FAILs; its twin with a scale-indexing bug FAILs,
// INCORRECT, whatever profile it is judged in. Every stored case names the profile it was judged by.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "daemon_under_test.h"
#include "process_run.h"

using namespace qgate::testing;
using nlohmann::json;

namespace {

EndedJob parity_job(const DaemonUnderTest& d, const std::string& build, const std::string& name, const std::string& args) {
  const std::string shapes = args.find("--parity-shapes") == std::string::npos ? " --parity-shapes quick " : " ";
  return run_job(d, build, name, "--kind parity" + shapes + args);
}

}  // namespace

TEST(NumericsEndToEnd, AGgmlBuildPassesAndItsBuggyTwinFails) {
  DaemonUnderTest d;
  d.start();

  const EndedJob good = parity_job(d, QGATE_GGML_CPU_BUILD, "ggml-cpu", "");
  EXPECT_EQ(good.watch_code, 0) << good.job.dump();
  EXPECT_EQ(good.job["verdict"]["verdict"], "VERDICT_PASS") << good.job.dump();
  EXPECT_EQ(good.job["verdict"]["parity_passed"].get<int>(), 8 * (7 + 5) * 2) << good.job.dump();

  // Judged in the profile it does not follow, the same bytes fail.
  const EndedJob wrong_profile = parity_job(d, QGATE_GGML_CPU_BUILD, "ggml-cpu-as-qgate", "--numerics qgate");
  EXPECT_EQ(wrong_profile.watch_code, 1) << wrong_profile.job.dump();
  EXPECT_EQ(wrong_profile.job.value("disposition", ""), "DISPOSITION_INCORRECT") << wrong_profile.job.dump();

  for (const char* numerics : {"", "--numerics qgate", "--numerics ggml"}) {
    const EndedJob bad = parity_job(d, QGATE_GGML_CPU_BUILD_BAD, "ggml-cpu-bad", numerics);
    EXPECT_EQ(bad.watch_code, 1) << numerics << ": " << bad.job.dump();
    EXPECT_EQ(bad.job["verdict"]["verdict"], "VERDICT_FAIL") << bad.job.dump();
    EXPECT_EQ(bad.job.value("disposition", ""), "DISPOSITION_INCORRECT") << bad.job.dump();
    EXPECT_GT(bad.job["verdict"]["parity_failed"].get<int>(), 8 * 7) << numerics << ": every type fails";
  }
}

TEST(NumericsEndToEnd, AParityJobRunsOnTheBlocksOfAModelFile) {
  DaemonUnderTest d;
  std::string why;
  ASSERT_TRUE(d.try_start({"--models-dir", d.dir()}, "", &why)) << why;
  const std::string model = d.dir() + "/model.gguf";
  // The llama-shaped test model, written by the tool (tools/test_gguf) rather than linked: the model's
  // blocks are quantized by the kernels' code, which no daemon test links.
  const auto written = qgate::test_support::run_process(QGATE_WRITE_TEST_GGUF, model);
  ASSERT_EQ(written.exit_code, 0) << written.err;

  const EndedJob job = parity_job(d, QGATE_REF_LIBRARY, "ref", "--parity-shapes quick --gguf " + model +
                                                             " --tensors 'blk.0.*,output.weight'");
  // --parity-shapes names a set, so the sweep is the quick shapes and edge rows plus the model's 8 matrices.
  EXPECT_EQ(job.watch_code, 0) << job.job.dump();
  EXPECT_EQ(job.job["verdict"]["parity_passed"].get<int>(), 2 * (8 * (7 + 5) + 8)) << job.job.dump();

  // Without a shape set the model's tensors are the whole sweep; a glob that matches nothing fails
  // the job with the worker's message rather than passing an empty sweep.
  auto submitted = d.cli("--json submit --build " + std::string(QGATE_REF_LIBRARY) +
                         " --name ref --kind parity --gguf " + model + " --tensors 'blk.0.*'");
  ASSERT_EQ(submitted.code, 0) << submitted.err;
  const int64_t only_model = json_data(submitted, "submission")["job_id"].get<int64_t>();
  EXPECT_EQ(d.cli("watch " + std::to_string(only_model)).code, 0);
  EXPECT_EQ(show(d, only_model)["verdict"]["parity_passed"].get<int>(), 2 * 7);

  auto typo = d.cli("submit --build " + std::string(QGATE_REF_LIBRARY) + " --name ref --kind parity --gguf " +
                    model + " --tensors 'blk.9.*' --wait");
  EXPECT_NE(typo.code, 0);
  EXPECT_NE((typo.out + typo.err).find("blk.9.*"), std::string::npos) << typo.out << typo.err;
}
