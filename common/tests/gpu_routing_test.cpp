// GPU models match whole words of a GPU's name, whatever the spelling; labels keep one form.
#include "qgate/common/gpu_routing.h"

#include <gtest/gtest.h>

namespace qgate {
namespace {

TEST(GpuRouting, AModelIsNormalizedToUpperCaseWordsSeparatedByOneSpace) {
  EXPECT_EQ(normalize_gpu_model("NVIDIA A100-SXM4-80GB"), "NVIDIA A100 SXM4 80GB");
  EXPECT_EQ(normalize_gpu_model("  rtx   4090 "), "RTX 4090");
  EXPECT_EQ(normalize_gpu_model("--"), "");
}

TEST(GpuRouting, AModelMatchesWholeWordsOfTheGpusNameInOrder) {
  EXPECT_TRUE(gpu_is_model("NVIDIA H100 80GB HBM3", "H100"));
  EXPECT_TRUE(gpu_is_model("NVIDIA H200", "h200"));
  EXPECT_TRUE(gpu_is_model("NVIDIA GeForce RTX 4090", "rtx-4090"));
  EXPECT_TRUE(gpu_is_model("NVIDIA A100-SXM4-80GB", "A100"));
  EXPECT_FALSE(gpu_is_model("NVIDIA A100-SXM4-80GB", "A10"));
  EXPECT_FALSE(gpu_is_model("NVIDIA H100 80GB HBM3", "H200"));
  EXPECT_FALSE(gpu_is_model("NVIDIA GeForce RTX 4090", "4090 RTX"));
  EXPECT_TRUE(gpu_is_model("anything", ""));
}

TEST(GpuRouting, ModelsAndLabelsOutsideTheirSpellingAreRefusedWithAReason) {
  EXPECT_FALSE(invalid_gpu_model("H200"));
  EXPECT_TRUE(invalid_gpu_model(""));
  EXPECT_TRUE(invalid_gpu_model("---"));
  EXPECT_TRUE(invalid_gpu_model(std::string(65, 'A')));
  EXPECT_FALSE(invalid_label("sm90"));
  EXPECT_FALSE(invalid_label("rack-2.pool_a"));
  EXPECT_TRUE(invalid_label(""));
  EXPECT_TRUE(invalid_label("-x"));
  EXPECT_TRUE(invalid_label("a,b"));
  EXPECT_TRUE(invalid_label("a b"));
  ASSERT_TRUE(invalid_label("a b"));
  EXPECT_NE(invalid_label("a b")->find("'a b'"), std::string::npos);
}

TEST(GpuRouting, HostNamesAreHostnamesOrNodeNames) {
  EXPECT_FALSE(invalid_host_name("gpu-node-7.pool.example"));
  EXPECT_FALSE(invalid_host_name("ip-10-0-3-17"));
  EXPECT_TRUE(invalid_host_name(""));
  EXPECT_TRUE(invalid_host_name(".hidden"));
  EXPECT_TRUE(invalid_host_name("two words"));
  EXPECT_TRUE(invalid_host_name("a:b"));
  EXPECT_TRUE(invalid_host_name(std::string(254, 'a')));
  EXPECT_FALSE(invalid_host_name(std::string(253, 'a')));
  ASSERT_TRUE(invalid_host_name("a/b"));
  EXPECT_NE(invalid_host_name("a/b")->find("'a/b'"), std::string::npos);
  EXPECT_FALSE(machine_host_name().empty());
  EXPECT_FALSE(invalid_host_name(machine_host_name()));
}

TEST(GpuRouting, LabelsAreKeptSortedWithoutRepeats) {
  EXPECT_EQ(canonical_labels({"sm90", "a", "sm90"}), (std::vector<std::string>{"a", "sm90"}));
}

}  // namespace
}  // namespace qgate
