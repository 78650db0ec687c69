// Source scanning and build-fact parsing for the house rules (house_rules.h).
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

}  // namespace

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

std::vector<IncludeViolation> find_forbidden_includes(const fs::path& root, std::span<const std::string_view> dirs) {
  std::vector<IncludeViolation> violations;
  for (std::string_view dir : dirs) {
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

LinkFacts read_link_facts(const fs::path& file) {
  std::ifstream in = open_or_throw(file);
  LinkFacts facts;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "forbidden") {
      for (std::string target; words >> target;) facts.forbidden.insert(target);
    } else if (kind == "links") {
      std::string executable;
      words >> executable;
      std::set<std::string>& closure = facts.closure_of[executable];
      for (std::string target; words >> target;) closure.insert(target);
    }
  }
  return facts;
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
