// The checks behind qgate_house_rules_test: #include lines that reach into kernels/ or the worker
// from host-only code, and the build facts (link closures, include directories) that CMake wrote.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace qgate::house_rules {

/// Header prefixes that belong to kernels/ or server/worker/ and so stay out of host-only code.
inline constexpr std::string_view kForbiddenHeaderPrefixes[] = {
    "qgate/quant/", "qgate/reference/", "qgate/kernel_abi.h", "qgate/worker/", "qgate/cuda/"};

/// Directories (relative to the source root) whose code must include none of those headers.
inline constexpr std::string_view kHostOnlyDirs[] = {
    "client",       "server/src",      "server/include", "server/profiles/src", "server/profiles/include",
    "server/stats", "server/cotenant", "db",             "common",
    "dashboards"};

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
                                                      std::span<const std::string_view> dirs);

/// What CMake wrote about linking: the targets defined under kernels/ and server/worker/, and for
/// each checked executable the targets of this build on its link line.
struct LinkFacts {
  std::set<std::string> forbidden;
  std::map<std::string, std::set<std::string>> closure_of;
};
/// Parses "forbidden t1 t2 ..." and "links exe t1 t2 ..." lines. Throws std::runtime_error when the
/// file cannot be read.
LinkFacts read_link_facts(const std::filesystem::path& file);

/// Parses "target|dir|dir..." lines: each target's include directories. Throws when unreadable.
std::map<std::string, std::vector<std::string>> read_include_facts(const std::filesystem::path& file);

}  // namespace qgate::house_rules
