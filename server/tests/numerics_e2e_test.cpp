// Numerics profiles end to end: kernel builds that were not written with qgate's kernels, submitted
// to a real qgated through the real CLI. A build in ggml's numerics that declares so PASSes its
// parity job; judged in qgate's numerics it FAILs; its twin with a scale-indexing bug FAILs,
// INCORRECT, whatever profile it is judged in. Every stored case names the profile it was judged by.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "daemon_under_test.h"

using namespace qgate::testing;
using nlohmann::json;

namespace {

struct Ended {
  int watch_code = -1;
  json job;
};

Ended parity_job(const DaemonUnderTest& d, const std::string& build, const std::string& name, const std::string& args) {
  Ended out;
  auto submitted = d.cli("--json submit --build " + build + " --name " + name +
                         " --kind parity --parity-shapes quick " + args);
  EXPECT_EQ(submitted.code, 0) << submitted.err;
  if (submitted.code != 0) return out;
  const int64_t id = json::parse(submitted.out)["job_id"].get<int64_t>();
  out.watch_code = d.cli("watch " + std::to_string(id)).code;
  out.job = show(d, id);
  return out;
}

}  // namespace

TEST(NumericsEndToEnd, AGgmlBuildPassesAndItsBuggyTwinFails) {
  DaemonUnderTest d;
  d.start();

  const Ended good = parity_job(d, QGATE_GGML_CPU_BUILD, "ggml-cpu", "");
  EXPECT_EQ(good.watch_code, 0) << good.job.dump();
  EXPECT_EQ(good.job["verdict"]["verdict"], "VERDICT_PASS") << good.job.dump();
  EXPECT_EQ(good.job["verdict"]["parity_passed"].get<int>(), 8 * (7 + 5) * 2) << good.job.dump();

  // Judged in the profile it does not follow, the same bytes fail.
  const Ended wrong_profile = parity_job(d, QGATE_GGML_CPU_BUILD, "ggml-cpu-as-qgate", "--numerics qgate");
  EXPECT_EQ(wrong_profile.watch_code, 1) << wrong_profile.job.dump();
  EXPECT_EQ(wrong_profile.job.value("disposition", ""), "DISPOSITION_INCORRECT") << wrong_profile.job.dump();

  for (const char* numerics : {"", "--numerics qgate", "--numerics ggml"}) {
    const Ended bad = parity_job(d, QGATE_GGML_CPU_BUILD_BAD, "ggml-cpu-bad", numerics);
    EXPECT_EQ(bad.watch_code, 1) << numerics << ": " << bad.job.dump();
    EXPECT_EQ(bad.job["verdict"]["verdict"], "VERDICT_FAIL") << bad.job.dump();
    EXPECT_EQ(bad.job.value("disposition", ""), "DISPOSITION_INCORRECT") << bad.job.dump();
    EXPECT_GT(bad.job["verdict"]["parity_failed"].get<int>(), 8 * 7) << numerics << ": every type fails";
  }
}
