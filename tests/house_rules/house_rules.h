// The checks behind qgate_house_rules_test: the layering of docs/architecture.md, by folder. Each
// top-level folder is kernel side (it may include kernel headers and link kernel libraries) or host
// side (it may not); each process has one home folder. The checks read #include lines in the
// sources and the build facts (targets, their folders and link closures) that CMake wrote.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qgate::house_rules {

/// Top-level folders on the kernel side: the kernels and their test builds, the process that loads a
/// build (worker/), the tools that do (tools/), and builds made from other engines (adapters/). Every
/// other top-level folder that holds code is host side.
inline constexpr std::string_view kKernelSideFolders[] = {"kernels", "worker", "tools", "adapters"};

/// Header prefixes that belong to the kernel side and so stay out of host-side code.
inline constexpr std::string_view kForbiddenHeaderPrefixes[] = {
    "qgate/quant/", "qgate/reference/", "qgate/kernel_abi", "qgate/worker/", "qgate/cuda/", "qgate/prefill/",
    "qgate/testing/"};

/// Each process and the folder that is its home (its code is there or below): `server/` holds qgated
/// alone.
struct ProcessHome {
  std::string_view executable;
  std::string_view folder;
};
inline constexpr ProcessHome kProcessHomes[] = {{"qgated", "server"},
                                                {"qgate", "client"},
                                                {"qgate-worker", "worker"},
                                                {"qgate-prefill", "tools/prefill"},
                                                {"qgate-load", "kernels"}};

/// Folder names under which an executable that is not a process may live (tests, benchmarks,
/// fuzzers, test builds, test support). tools/ may hold any executable.
inline constexpr std::string_view kHelperFolderNames[] = {"tests", "test_builds", "bench", "fuzz", "testing"};

/// True when `folder` (relative to the source root, "/"-separated) is on the kernel side.
bool is_kernel_side(std::string_view folder);

/// The top-level folders of `root` that are host side: every directory except the kernel side's,
/// hidden ones and what the scripts make (build*, dist, out).
std::vector<std::string> host_side_folders(const std::filesystem::path& root);

struct IncludeViolation {
  std::string file;  ///< relative to the scanned root
  int line = 0;      ///< 1-based
  std::string text;  ///< the line as written
  /// "client/src/cli.cpp:21: #include "qgate/quant/block_formats.h""
  std::string describe() const;
};

/// True when `line` is an #include directive ("#include", "# include", <> or "") of a header under
/// one of kForbiddenHeaderPrefixes.
bool is_forbidden_include(std::string_view line);

/// Every forbidden #include in the C/C++/CUDA sources under root/dir for each of `dirs`, sorted by
/// file and line. Throws std::runtime_error when one of the directories does not exist, so a renamed
/// folder cannot silently drop out of the check.
std::vector<IncludeViolation> find_forbidden_includes(const std::filesystem::path& root,
                                                      std::span<const std::string> dirs);

/// One target of the build as CMake described it.
struct TargetFact {
  std::string type;             ///< EXECUTABLE, STATIC_LIBRARY, SHARED_LIBRARY, ...
  std::string folder;           ///< where it is defined, relative to the source root
  std::set<std::string> links;  ///< the targets of this build on its link line, transitively
};
using BuildFacts = std::map<std::string, TargetFact>;

/// Parses "target NAME TYPE FOLDER" and "links NAME t1 t2 ..." lines. Throws std::runtime_error when
/// the file cannot be read or a links line names no known target.
BuildFacts read_build_facts(const std::filesystem::path& file);

/// "server/tests: qgate_x links qgate_quant (kernels)" for each host-side target that links a
/// kernel-side one, sorted.
std::vector<std::string> find_layer_crossings(const BuildFacts& facts);

/// "qgate-prefill is defined in server/prefill; its home is tools/prefill" for each process outside its
/// home, and "qgate-foo in server/src is no process and not in a tests/, test_builds/, bench/, fuzz/ or
/// testing/ folder" for each other executable outside tools/ and such folders, sorted. qgated, qgate and
/// qgate-worker missing from the build are reported too (qgate-load is built only with CUDA).
std::vector<std::string> find_misplaced_executables(const BuildFacts& facts);

/// Parses "target|dir|dir..." lines: each target's include directories. Throws when unreadable.
std::map<std::string, std::vector<std::string>> read_include_facts(const std::filesystem::path& file);

}  // namespace qgate::house_rules
