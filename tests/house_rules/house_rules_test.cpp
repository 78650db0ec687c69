// The house rules: host-only code (the CLI, the daemon, their libraries, db/, common/) includes no
// kernels/ or worker/ header; qgated and qgate link no kernels or worker library; no target outside
// kernels/ has kernels/src on its include path. Each check also runs on a planted violation, to show
// it can fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
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

TEST(HouseRules, HostOnlyCodeIncludesNoKernelsOrWorkerHeader) {
  const auto violations = find_forbidden_includes(QGATE_SOURCE_DIR, kHostOnlyDirs);
  EXPECT_TRUE(violations.empty()) << "host-only code must include qgate/common/ (or db/, proto, profiles) "
                                     "headers, never kernels/ or worker/ ones:\n"
                                  << list_violations(violations);
}

TEST(HouseRules, IncludeScanNamesFileAndLineOfAPlantedViolation) {
  ScratchTree tree;
  tree.write("client/src/bad.cpp",
             "// uses the kernels\n#include \"qgate/common/weight_types.h\"\n#include \"qgate/quant/quantize.h\"\n");
  tree.write("server/include/qgate/server/bad.h", "#pragma once\n  #  include <qgate/worker/parity.h>\n");
  tree.write("server/src/fine.cpp", "// #include \"qgate/quant/quantize.h\" in a comment is no include\n");
  tree.write("server/worker/src/allowed.cpp", "#include \"qgate/quant/quantize.h\"\n");  // not host-only
  const std::string_view dirs[] = {"client", "server/src", "server/include"};

  const auto violations = find_forbidden_includes(tree.root(), dirs);

  ASSERT_EQ(violations.size(), 2u) << list_violations(violations);
  EXPECT_EQ(violations[0].describe(), "client/src/bad.cpp:3: #include \"qgate/quant/quantize.h\"");
  EXPECT_EQ(violations[1].file, "server/include/qgate/server/bad.h");
  EXPECT_EQ(violations[1].line, 2);
}

TEST(HouseRules, IncludeScanRefusesAMissingDirectory) {
  ScratchTree tree;
  const std::string_view dirs[] = {"server/paths"};
  EXPECT_THROW(find_forbidden_includes(tree.root(), dirs), std::runtime_error);
}

TEST(HouseRules, ForbiddenIncludeForms) {
  EXPECT_TRUE(is_forbidden_include("#include \"qgate/quant/block_formats.h\""));
  EXPECT_TRUE(is_forbidden_include("#include <qgate/reference/parity_reference.h>"));
  EXPECT_TRUE(is_forbidden_include("# include \"qgate/kernel_abi.h\""));
  EXPECT_TRUE(is_forbidden_include("\t#include \"qgate/worker/sha256.h\""));
  EXPECT_FALSE(is_forbidden_include("#include \"qgate/common/weight_types.h\""));
  EXPECT_FALSE(is_forbidden_include("#include \"qgate/profiles/gguf.h\""));
  EXPECT_FALSE(is_forbidden_include("// #include \"qgate/quant/block_formats.h\""));
  EXPECT_FALSE(is_forbidden_include("#include \"my/qgate/quant/x.h\""));
}

class LinkClosure : public ::testing::Test {
 protected:
  void SetUp() override {
    facts_ = read_link_facts(QGATE_LINK_FACTS_FILE);
    // The facts must describe this build, or an empty file would pass every check.
    ASSERT_TRUE(facts_.forbidden.count("qgate_quant")) << "kernels' targets missing from " << QGATE_LINK_FACTS_FILE;
    ASSERT_TRUE(facts_.forbidden.count("qgate_worker")) << "worker's targets missing from " << QGATE_LINK_FACTS_FILE;
  }
  std::vector<std::string> forbidden_in(const std::string& executable) {
    std::vector<std::string> found;
    for (const std::string& target : facts_.closure_of.at(executable)) {
      if (facts_.forbidden.count(target)) found.push_back(target);
    }
    return found;
  }
  LinkFacts facts_;
};

TEST_F(LinkClosure, QgatedLinksNoKernelsOrWorkerLibrary) {
  ASSERT_TRUE(facts_.closure_of.count("qgated"));
  EXPECT_TRUE(facts_.closure_of.at("qgated").count("qgate_server"));
  EXPECT_TRUE(facts_.closure_of.at("qgated").count("qgate_common"));
  EXPECT_EQ(forbidden_in("qgated"), std::vector<std::string>{});
}

TEST_F(LinkClosure, QgateLinksNoKernelsOrWorkerLibrary) {
  ASSERT_TRUE(facts_.closure_of.count("qgate"));
  EXPECT_TRUE(facts_.closure_of.at("qgate").count("qgate_client"));
  EXPECT_EQ(forbidden_in("qgate"), std::vector<std::string>{});
}

TEST_F(LinkClosure, CatchesTheWorkerLinkingTheKernels) {
  // The positive control: the same check on qgate-worker must find the kernels it does link.
  ASSERT_TRUE(facts_.closure_of.count("qgate-worker"));
  const auto found = forbidden_in("qgate-worker");
  EXPECT_NE(std::find(found.begin(), found.end(), "qgate_quant"), found.end());
  EXPECT_NE(std::find(found.begin(), found.end(), "qgate_worker"), found.end());
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
