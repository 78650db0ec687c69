// The house rules, by folder: host-side code includes no kernel-side header and links no kernel-side
// target; each process lives in its home folder (server/ holds qgated alone); no target outside
// kernels/ has kernels/src on its include path. Each check also runs on a planted violation, to show
// it can fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "house_rules.h"

namespace qgate::house_rules {
namespace {

namespace fs = std::filesystem;

std::string list_violations(const std::vector<IncludeViolation>& violations) {
  std::string text;
  for (const IncludeViolation& v : violations) text += "  " + v.describe() + "\n";
  return text;
}

// A scratch source tree, removed when the test ends.
class ScratchTree {
 public:
  ScratchTree()
      : root_(fs::temp_directory_path() /
              ("qgate_house_rules_" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()))) {
    fs::create_directories(root_);
  }
  ~ScratchTree() { fs::remove_all(root_); }
  ScratchTree(const ScratchTree&) = delete;
  ScratchTree& operator=(const ScratchTree&) = delete;

  void write(const std::string& relative, const std::string& text) {
    fs::create_directories((root_ / relative).parent_path());
    std::ofstream(root_ / relative) << text;
  }
  const fs::path& root() const { return root_; }

 private:
  fs::path root_;
};

TEST(HouseRules, HostSideCodeIncludesNoKernelSideHeader) {
  const std::vector<std::string> host = host_side_folders(QGATE_SOURCE_DIR);
  for (const char* folder : {"server", "client", "db", "common", "jobs", "stats", "profiles", "cotenant"}) {
    EXPECT_NE(std::find(host.begin(), host.end(), folder), host.end()) << folder << " is not checked as host side";
  }
  for (const char* folder : {"kernels", "worker", "tools", "adapters"}) {
    EXPECT_EQ(std::find(host.begin(), host.end(), folder), host.end()) << folder << " is kernel side";
  }
  const auto violations = find_forbidden_includes(QGATE_SOURCE_DIR, host);
  EXPECT_TRUE(violations.empty()) << "host-side code must include qgate/common/ (or db/, proto, profiles) "
                                     "headers, never kernel-side ones:\n"
                                  << list_violations(violations);
}

TEST(HouseRules, IncludeScanNamesFileAndLineOfAPlantedViolation) {
  ScratchTree tree;
  tree.write("client/src/bad.cpp",
             "// uses the kernels\n#include \"qgate/common/weight_types.h\"\n#include \"qgate/quant/quantize.h\"\n");
  tree.write("server/include/qgate/server/bad.h", "#pragma once\n  #  include <qgate/worker/parity.h>\n");
  tree.write("server/src/fine.cpp", "// #include \"qgate/quant/quantize.h\" in a comment is no include\n");
  tree.write("jobs/src/bad.cpp", "#include \"qgate/prefill/prefill_engine.h\"\n");
  tree.write("worker/src/allowed.cpp", "#include \"qgate/quant/quantize.h\"\n");    // kernel side
  tree.write("tools/prefill/src/allowed.cpp", "#include \"qgate/worker/kernel_build.h\"\n");
  tree.write("build/gen/ignored.cpp", "#include \"qgate/quant/quantize.h\"\n");  // made by the scripts

  const std::vector<std::string> host = host_side_folders(tree.root());
  EXPECT_EQ(host, (std::vector<std::string>{"client", "jobs", "server"}));
  const auto violations = find_forbidden_includes(tree.root(), host);

  ASSERT_EQ(violations.size(), 3u) << list_violations(violations);
  EXPECT_EQ(violations[0].describe(), "client/src/bad.cpp:3: #include \"qgate/quant/quantize.h\"");
  EXPECT_EQ(violations[1].file, "jobs/src/bad.cpp");
  EXPECT_EQ(violations[2].file, "server/include/qgate/server/bad.h");
  EXPECT_EQ(violations[2].line, 2);
}

TEST(HouseRules, IncludeScanRefusesAMissingDirectory) {
  ScratchTree tree;
  const std::vector<std::string> dirs = {"server/paths"};
  EXPECT_THROW(find_forbidden_includes(tree.root(), dirs), std::runtime_error);
}

TEST(HouseRules, ForbiddenIncludeForms) {
  EXPECT_TRUE(is_forbidden_include("#include \"qgate/quant/block_formats.h\""));
  EXPECT_TRUE(is_forbidden_include("#include <qgate/reference/parity_reference.h>"));
  EXPECT_TRUE(is_forbidden_include("# include \"qgate/kernel_abi.h\""));
  EXPECT_TRUE(is_forbidden_include("#include \"qgate/kernel_abi_table.h\""));
  EXPECT_TRUE(is_forbidden_include("\t#include \"qgate/worker/sha256.h\""));
  EXPECT_TRUE(is_forbidden_include("#include \"qgate/testing/gguf_test_model.h\""));
  EXPECT_FALSE(is_forbidden_include("#include \"qgate/common/weight_types.h\""));
  EXPECT_FALSE(is_forbidden_include("#include \"qgate/profiles/gguf.h\""));
  EXPECT_FALSE(is_forbidden_include("#include \"qgate/jobs/job_messages.h\""));
  EXPECT_FALSE(is_forbidden_include("// #include \"qgate/quant/block_formats.h\""));
  EXPECT_FALSE(is_forbidden_include("#include \"my/qgate/quant/x.h\""));
}

TEST(HouseRules, FolderSides) {
  EXPECT_TRUE(is_kernel_side("kernels/test_builds/faults"));
  EXPECT_TRUE(is_kernel_side("worker"));
  EXPECT_TRUE(is_kernel_side("tools/prefill/tests"));
  EXPECT_FALSE(is_kernel_side("server/tests"));
  EXPECT_FALSE(is_kernel_side("workers"));
  EXPECT_FALSE(is_kernel_side(""));
}

class BuildFactsOfThisBuild : public ::testing::Test {
 protected:
  void SetUp() override {
    facts_ = read_build_facts(QGATE_BUILD_FACTS_FILE);
    // The facts must describe this build, or an empty file would pass every check.
    ASSERT_TRUE(facts_.count("qgate_quant")) << "kernels' targets missing from " << QGATE_BUILD_FACTS_FILE;
    ASSERT_TRUE(facts_.count("qgate-worker")) << "the worker missing from " << QGATE_BUILD_FACTS_FILE;
    ASSERT_TRUE(facts_.count("qgated")) << "qgated missing from " << QGATE_BUILD_FACTS_FILE;
  }
  BuildFacts facts_;
};

TEST_F(BuildFactsOfThisBuild, HostSideTargetsLinkNoKernelSideTarget) {
  EXPECT_TRUE(facts_.at("qgated").links.count("qgate_server"));
  EXPECT_TRUE(facts_.at("qgated").links.count("qgate_common"));
  EXPECT_TRUE(facts_.at("qgate").links.count("qgate_client"));
  const auto crossings = find_layer_crossings(facts_);
  std::string text;
  for (const std::string& c : crossings) text += "  " + c + "\n";
  EXPECT_TRUE(crossings.empty()) << "host-side targets must not link the kernels, the worker or the tools:\n" << text;
}

TEST_F(BuildFactsOfThisBuild, CatchesTheWorkerOnTheHostSide) {
  // The positive control: the worker links the kernels, which is allowed only because of its folder.
  EXPECT_EQ(facts_.at("qgate-worker").folder, "worker/src");
  EXPECT_TRUE(facts_.at("qgate-worker").links.count("qgate_quant"));
  EXPECT_TRUE(facts_.at("qgate-worker").links.count("qgate_worker"));
  BuildFacts moved = facts_;
  moved.at("qgate-worker").folder = "server/worker";
  const auto crossings = find_layer_crossings(moved);
  EXPECT_NE(std::find(crossings.begin(), crossings.end(),
                      "server/worker: qgate-worker links qgate_quant (" + facts_.at("qgate_quant").folder + ")"),
            crossings.end());
}

TEST_F(BuildFactsOfThisBuild, EachProcessLivesInItsHomeFolder) {
  const auto misplaced = find_misplaced_executables(facts_);
  std::string text;
  for (const std::string& m : misplaced) text += "  " + m + "\n";
  EXPECT_TRUE(misplaced.empty()) << "server/ holds qgated alone; each process has its own folder:\n" << text;
}

TEST(HouseRules, MisplacedExecutablesAreNamed) {
  BuildFacts facts;
  facts["qgated"] = {"EXECUTABLE", "server/src", {}};
  facts["qgate-serverless"] = {"EXECUTABLE", "serverless", {}};
  facts["qgate"] = {"EXECUTABLE", "client", {}};
  facts["qgate-prefill"] = {"EXECUTABLE", "server/prefill", {}};
  facts["qgate-helper"] = {"EXECUTABLE", "server/src", {}};
  facts["qgate_daemon_test"] = {"EXECUTABLE", "server/tests", {}};
  facts["qgate-load-test"] = {"EXECUTABLE", "server/bench", {}};
  facts["qgate_write_test_gguf"] = {"EXECUTABLE", "tools/test_gguf", {}};
  facts["qgate_server"] = {"STATIC_LIBRARY", "server", {}};
  facts["qgate"] = {"EXECUTABLE", "clients/src", {}};  // a folder named like client/ is not client/
  EXPECT_EQ(find_misplaced_executables(facts),
            (std::vector<std::string>{
                "qgate is defined in clients/src; its home is client",
                "qgate-helper in server/src is no process and not in a tests/, test_builds/, bench/, fuzz/ or testing/ folder",
                "qgate-prefill is defined in server/prefill; its home is tools/prefill",
                "qgate-serverless in serverless is no process and not in a tests/, test_builds/, bench/, fuzz/ or testing/ "
                "folder",
                "qgate-worker is not in the build"}));
}

TEST(HouseRules, BuildFactsRefuseLinksOfAnUndeclaredTarget) {
  ScratchTree tree;
  tree.write("facts.txt", "target a EXECUTABLE server\nlinks a b\nlinks c a\n");
  EXPECT_THROW(read_build_facts(tree.root() / "facts.txt"), std::runtime_error);
  tree.write("good.txt", "target a EXECUTABLE server\ntarget b STATIC_LIBRARY kernels\nlinks a b\n");
  const BuildFacts facts = read_build_facts(tree.root() / "good.txt");
  EXPECT_EQ(facts.at("a").links, (std::set<std::string>{"b"}));
  EXPECT_EQ(find_layer_crossings(facts), (std::vector<std::string>{"server: a links b (kernels)"}));
}

TEST(HouseRules, NoTargetOutsideKernelsSeesKernelsSrc) {
  const auto dirs_of = read_include_facts(QGATE_INCLUDE_FACTS_FILE);
  const fs::path kernels_src = fs::path(QGATE_SOURCE_DIR) / "kernels" / "src";
  ASSERT_TRUE(dirs_of.count("qgate_worker")) << "no include facts in " << QGATE_INCLUDE_FACTS_FILE;
  // The facts are resolved transitively: the worker sees kernels/include through qgate_quant.
  const auto& worker_dirs = dirs_of.at("qgate_worker");
  EXPECT_NE(std::find(worker_dirs.begin(), worker_dirs.end(), (fs::path(QGATE_SOURCE_DIR) / "kernels" / "include").string()),
            worker_dirs.end());
  std::string offenders;
  for (const auto& [target, dirs] : dirs_of) {
    for (const std::string& dir : dirs) {
      if (fs::path(dir).lexically_normal() == kernels_src.lexically_normal()) offenders += "  " + target + "\n";
    }
  }
  EXPECT_TRUE(offenders.empty()) << "kernels/src is private to kernels/; these targets have it on their include "
                                    "path:\n"
                                 << offenders;
}

}  // namespace
}  // namespace qgate::house_rules
