// Source scanning, build-fact parsing and the folder rules of the house rules (house_rules.h).
#include "house_rules.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace qgate::house_rules {
namespace {

namespace fs = std::filesystem;

bool is_source_file(const fs::path& path) {
  static const std::set<std::string> kExtensions = {".h", ".hh", ".hpp", ".inc", ".c", ".cc", ".cpp", ".cxx",
                                                    ".cu", ".cuh"};
  return kExtensions.count(path.extension().string()) > 0;
}

std::string_view trim_leading_blanks(std::string_view text) {
  const size_t start = text.find_first_not_of(" \t");
  return start == std::string_view::npos ? std::string_view{} : text.substr(start);
}

std::ifstream open_or_throw(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  return in;
}

// True when `folder` is `home` or below it.
bool is_in_folder(std::string_view folder, std::string_view home) {
  return folder == home || (folder.substr(0, home.size()) == home && folder.size() > home.size() &&
                            folder[home.size()] == '/');
}

}  // namespace

bool is_kernel_side(std::string_view folder) {
  const std::string_view top = folder.substr(0, folder.find('/'));
  return std::find(std::begin(kKernelSideFolders), std::end(kKernelSideFolders), top) != std::end(kKernelSideFolders);
}

std::vector<std::string> host_side_folders(const fs::path& root) {
  std::vector<std::string> folders;
  for (const fs::directory_entry& entry : fs::directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    const bool made_by_scripts = name.rfind("build", 0) == 0 || name == "dist" || name == "out";
    if (!entry.is_directory() || name.front() == '.' || made_by_scripts || is_kernel_side(name)) continue;
    folders.push_back(name);
  }
  std::sort(folders.begin(), folders.end());
  return folders;
}

std::string IncludeViolation::describe() const { return file + ":" + std::to_string(line) + ": " + text; }

bool is_forbidden_include(std::string_view line) {
  line = trim_leading_blanks(line);
  if (line.empty() || line.front() != '#') return false;
  line = trim_leading_blanks(line.substr(1));
  constexpr std::string_view kDirective = "include";
  if (line.substr(0, kDirective.size()) != kDirective) return false;
  line = trim_leading_blanks(line.substr(kDirective.size()));
  if (line.empty() || (line.front() != '"' && line.front() != '<')) return false;
  const std::string_view header = line.substr(1);
  return std::any_of(std::begin(kForbiddenHeaderPrefixes), std::end(kForbiddenHeaderPrefixes),
                     [&](std::string_view prefix) { return header.substr(0, prefix.size()) == prefix; });
}

std::vector<IncludeViolation> find_forbidden_includes(const fs::path& root, std::span<const std::string> dirs) {
  std::vector<IncludeViolation> violations;
  for (const std::string& dir : dirs) {
    const fs::path top = root / dir;
    if (!fs::is_directory(top)) throw std::runtime_error("no directory " + top.string() + " to check");
    for (const fs::directory_entry& entry : fs::recursive_directory_iterator(top)) {
      if (!entry.is_regular_file() || !is_source_file(entry.path())) continue;
      std::ifstream in = open_or_throw(entry.path());
      std::string text;
      for (int line = 1; std::getline(in, text); ++line) {
        if (is_forbidden_include(text)) {
          violations.push_back({entry.path().lexically_relative(root).generic_string(), line, text});
        }
      }
    }
  }
  std::sort(violations.begin(), violations.end(), [](const IncludeViolation& a, const IncludeViolation& b) {
    return a.file != b.file ? a.file < b.file : a.line < b.line;
  });
  return violations;
}

BuildFacts read_build_facts(const fs::path& file) {
  std::ifstream in = open_or_throw(file);
  BuildFacts facts;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind, name;
    words >> kind >> name;
    if (kind == "target") {
      TargetFact& fact = facts[name];
      words >> fact.type >> fact.folder;
    } else if (kind == "links") {
      const auto it = facts.find(name);
      if (it == facts.end()) throw std::runtime_error(file.string() + ": links of an undeclared target " + name);
      for (std::string target; words >> target;) it->second.links.insert(target);
    }
  }
  return facts;
}

std::vector<std::string> find_layer_crossings(const BuildFacts& facts) {
  std::vector<std::string> crossings;
  for (const auto& [name, fact] : facts) {
    if (is_kernel_side(fact.folder)) continue;
    for (const std::string& linked : fact.links) {
      const auto it = facts.find(linked);
      if (it != facts.end() && is_kernel_side(it->second.folder)) {
        crossings.push_back(fact.folder + ": " + name + " links " + linked + " (" + it->second.folder + ")");
      }
    }
  }
  std::sort(crossings.begin(), crossings.end());
  return crossings;
}

std::vector<std::string> find_misplaced_executables(const BuildFacts& facts) {
  std::vector<std::string> misplaced;
  for (const ProcessHome& home : kProcessHomes) {
    const auto it = facts.find(std::string(home.executable));
    if (it == facts.end()) {
      if (home.executable != "qgate-load") misplaced.push_back(std::string(home.executable) + " is not in the build");
    } else if (!is_in_folder(it->second.folder, home.folder)) {
      misplaced.push_back(std::string(home.executable) + " is defined in " + it->second.folder + "; its home is " +
                          std::string(home.folder));
    }
  }
  for (const auto& [name, fact] : facts) {
    if (fact.type != "EXECUTABLE") continue;
    const bool process = std::any_of(std::begin(kProcessHomes), std::end(kProcessHomes),
                                     [&](const ProcessHome& home) { return home.executable == name; });
    if (process) continue;
    const fs::path folder(fact.folder);
    bool helper = !folder.empty() && *folder.begin() == "tools";
    for (const fs::path& part : folder) {
      helper = helper || std::find(std::begin(kHelperFolderNames), std::end(kHelperFolderNames), part.string()) !=
                             std::end(kHelperFolderNames);
    }
    if (!helper) {
      misplaced.push_back(name + " in " + fact.folder +
                          " is no process and not in a tests/, test_builds/, bench/, fuzz/ or testing/ folder");
    }
  }
  std::sort(misplaced.begin(), misplaced.end());
  return misplaced;
}

std::map<std::string, std::vector<std::string>> read_include_facts(const fs::path& file) {
  std::ifstream in = open_or_throw(file);
  std::map<std::string, std::vector<std::string>> dirs_of;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string target;
    if (!std::getline(fields, target, '|') || target.empty()) continue;
    std::vector<std::string>& dirs = dirs_of[target];
    for (std::string dir; std::getline(fields, dir, '|');) {
      if (!dir.empty()) dirs.push_back(dir);
    }
  }
  return dirs_of;
}

}  // namespace qgate::house_rules
