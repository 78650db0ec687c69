// The GPU choice of a job (gpu_choice.h): the queue it goes to, and every refusal at submit, against
// the GPUs a daemon serves.
#include <gtest/gtest.h>

#include "qgate/jobs/application_error.h"
#include "qgate/jobs/gpu_choice.h"

namespace qgate::jobs {
namespace {

JobPolicy serving(std::vector<std::string> names) {
  JobPolicy o;
  o.backend = "cuda";
  for (size_t i = 0; i < names.size(); ++i) o.served.push_back({int(i), names[i], "GPU-" + std::to_string(i)});
  return o;
}

v1::JobSpec spec(v1::JobKind kind, std::vector<int> gpus, bool split = false) {
  v1::JobSpec s;
  s.set_kind(kind);
  for (int g : gpus) s.add_gpus(g);
  s.set_split_gpus(split);
  return s;
}

std::string refusal(const v1::JobSpec& s, const JobPolicy& o) {
  try {
    check_gpu_choice(s, o);
  } catch (const ApplicationError& e) {
    EXPECT_EQ(e.kind(), ApplicationErrorKind::InvalidArgument);
    return e.what();
  }
  return "";
}

TEST(GpuChoiceTest, TheQueueIsThePinnedGpuOrAny) {
  EXPECT_EQ(queued_device(spec(v1::JOB_KIND_AB, {})), kAnyGpu);
  EXPECT_EQ(queued_device(spec(v1::JOB_KIND_AB, {1})), 1);
  EXPECT_EQ(queued_device(spec(v1::JOB_KIND_AB, {}, true)), kAnyGpu);
  EXPECT_EQ(queued_device(spec(v1::JOB_KIND_AB, {1, 0}, true)), 1);  // a named pair: where it is claimed
}

TEST(GpuChoiceTest, AcceptsWhatTheDaemonServes) {
  const JobPolicy two = serving({"H200", "H200"});
  EXPECT_EQ(refusal(spec(v1::JOB_KIND_GATE, {}), two), "");
  EXPECT_EQ(refusal(spec(v1::JOB_KIND_GATE, {1}), two), "");
  EXPECT_EQ(refusal(spec(v1::JOB_KIND_GATE, {}, true), two), "");
  EXPECT_EQ(refusal(spec(v1::JOB_KIND_AB, {0, 1}, true), two), "");
  EXPECT_EQ(refusal(spec(v1::JOB_KIND_COMMAND, {1, 0}, true), two), "");
  EXPECT_EQ(refusal(spec(v1::JOB_KIND_PARITY, {0}), two), "");
  // A daemon that has not described its GPUs serves --gpu alone.
  JobPolicy bare;
  bare.gpu = 3;
  EXPECT_EQ(refusal(spec(v1::JOB_KIND_AB, {3}), bare), "");
  EXPECT_NE(refusal(spec(v1::JOB_KIND_AB, {0}), bare), "");
}

TEST(GpuChoiceTest, RefusesWhatItCannotHonour) {
  const JobPolicy two = serving({"H200", "H200"});
  EXPECT_EQ(refusal(spec(v1::JOB_KIND_AB, {5}), two),
            "GPU 5 is not served by this daemon; it serves GPU 0 (H200), 1 (H200)");
  EXPECT_EQ(refusal(spec(v1::JOB_KIND_AB, {0, 1}), two),
            "a job runs on one GPU: name one with --gpu, or run the arms on two with --split-gpus");
  EXPECT_EQ(refusal(spec(v1::JOB_KIND_AB, {1, 1}, true), two), "GPU 1 is named twice");
  EXPECT_EQ(refusal(spec(v1::JOB_KIND_AB, {1}, true), two),
            "--split-gpus takes a pair: name two GPUs, or none for any two of one model");
  EXPECT_NE(refusal(spec(v1::JOB_KIND_PARITY, {}, true), two).find("a parity job has no arms"), std::string::npos);
  v1::JobSpec sequential = spec(v1::JOB_KIND_AB, {}, true);
  sequential.set_order(v1::RUN_ORDER_SEQUENTIAL);
  EXPECT_NE(refusal(sequential, two).find("no sequential order"), std::string::npos);
  EXPECT_NE(refusal(spec(v1::JOB_KIND_AB, {}, true), serving({"H200"})).find("this daemon serves one"),
            std::string::npos);
  const JobPolicy mixed = serving({"H200", "A100", "A100"});
  EXPECT_EQ(refusal(spec(v1::JOB_KIND_AB, {0, 1}, true), mixed),
            "--split-gpus needs two identical GPUs: GPU 0 is H200, GPU 1 is A100");
  EXPECT_EQ(refusal(spec(v1::JOB_KIND_AB, {1, 2}, true), mixed), "");
  EXPECT_EQ(refusal(spec(v1::JOB_KIND_AB, {}, true), mixed), "");
  EXPECT_NE(refusal(spec(v1::JOB_KIND_AB, {}, true), serving({"H200", "A100"})).find("no two served GPUs are of one model"),
            std::string::npos);
}

TEST(GpuChoiceTest, OnItsOwnStoreADaemonRefusesAJobNoneOfItsGpusFits) {
  JobPolicy one = serving({"NVIDIA H100 80GB HBM3"});
  one.labels = {"sm90"};
  v1::JobSpec s = spec(v1::JOB_KIND_AB, {});
  s.set_gpu_model("h100");
  s.add_labels("sm90");
  EXPECT_EQ(refusal(s, one), "");
  s.set_gpu_model("H200");
  EXPECT_NE(refusal(s, one).find("asks for GPU model H200 and this daemon serves NVIDIA H100 80GB HBM3"), std::string::npos)
      << refusal(s, one);
  s.set_gpu_model("");
  s.set_gpu_uuid("GPU-9");
  EXPECT_NE(refusal(s, one).find("GPU-9"), std::string::npos);
  s.set_gpu_uuid("GPU-0");
  EXPECT_EQ(refusal(s, one), "");
  s.add_labels("rack2");
  EXPECT_NE(refusal(s, one).find("label 'rack2' and this daemon carries sm90"), std::string::npos) << refusal(s, one);
  s.clear_labels();
  s.add_labels("bad label");
  EXPECT_NE(refusal(s, one).find("'bad label'"), std::string::npos);
}

TEST(GpuChoiceTest, InAFleetAJobThisDaemonCannotRunWaitsForOneThatCan) {
  JobPolicy one = serving({"NVIDIA H100 80GB HBM3"});
  one.fleet = true;
  v1::JobSpec s = spec(v1::JOB_KIND_AB, {}, true);  // a split, on a daemon of one GPU
  s.set_gpu_model("H200");
  s.add_labels("sm90");
  EXPECT_EQ(refusal(s, one), "");
  s.set_gpu_model("!!");  // still spelled by the rules
  EXPECT_NE(refusal(s, one).find("gpu_model"), std::string::npos);
}

}  // namespace
}  // namespace qgate::jobs
