// Loading kernel builds: the reference build loads; each kind of bad file is refused with its
// own reason and a message that names the file.
#include "qgate/worker/kernel_build.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace qgate::worker;

namespace {

std::unique_ptr<KernelBuild> load(const std::string& path, BuildLoadError* error, std::string* msg) {
  return KernelBuild::load(path, error, msg);
}

}  // namespace

TEST(KernelBuild, LoadsTheReferenceBuild) {
  BuildLoadError error;
  std::string msg;
  auto build = load(QGATE_REF_LIBRARY, &error, &msg);
  ASSERT_TRUE(build) << msg;
  EXPECT_EQ(error, BuildLoadError::none);
  auto info = build->info();
  EXPECT_EQ(info.name(), "qgate-ref");
  EXPECT_EQ(info.abi_version(), QGATE_ABI_VERSION);
  EXPECT_EQ(info.sha256().size(), 64u);
}

TEST(KernelBuild, RefusesAMissingFile) {
  BuildLoadError error;
  std::string msg;
  EXPECT_FALSE(load("/nonexistent/libnothing.so", &error, &msg));
  EXPECT_EQ(error, BuildLoadError::not_found);
  EXPECT_NE(msg.find("/nonexistent/libnothing.so"), std::string::npos) << msg;
}

TEST(KernelBuild, RefusesAFileThatIsNotElf) {
  const std::string path = ::testing::TempDir() + "/not_a_build.so";
  std::ofstream(path) << "#!/bin/sh\necho this is a script, not a shared object\n";
  BuildLoadError error;
  std::string msg;
  EXPECT_FALSE(load(path, &error, &msg));
  EXPECT_EQ(error, BuildLoadError::not_elf);
  EXPECT_NE(msg.find("not a shared object"), std::string::npos) << msg;
}

TEST(KernelBuild, RefusesAnElfThatIsNotAKernelBuild) {
  BuildLoadError error;
  std::string msg;
  EXPECT_FALSE(load(QGATE_NO_ABI_LIBRARY, &error, &msg));
  EXPECT_EQ(error, BuildLoadError::missing_symbol);
  EXPECT_NE(msg.find("qgate_abi_version"), std::string::npos) << msg;
}

TEST(KernelBuild, RefusesAnAbiVersionMismatch) {
  BuildLoadError error;
  std::string msg;
  EXPECT_FALSE(load(QGATE_WRONG_ABI_LIBRARY, &error, &msg));
  EXPECT_EQ(error, BuildLoadError::abi_mismatch);
  EXPECT_NE(msg.find("999"), std::string::npos) << msg;
}

TEST(KernelBuild, RefusesATruncatedElf) {
  const std::string path = ::testing::TempDir() + "/truncated.so";
  {
    std::ifstream in(QGATE_REF_LIBRARY, std::ios::binary);
    std::string head(4096, '\0');
    in.read(head.data(), head.size());
    std::ofstream(path, std::ios::binary) << head;
  }
  BuildLoadError error;
  std::string msg;
  EXPECT_FALSE(load(path, &error, &msg));
  EXPECT_EQ(error, BuildLoadError::not_elf);
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}
