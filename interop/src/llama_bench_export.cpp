// The llama-bench SQL writer: today's llama_bench table from qgate's runs, with a build_commit per
// build and a model_type per series that compare-llama-bench.py keeps apart (docs/interop.md).
#include "qgate/interop/llama_bench_export.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <set>

#include <fmt/format.h>

#include "qgate/interop/llama_bench.h"

namespace qgate::interop {

namespace {

constexpr std::size_t kCommitLength = 8;     // the script's own default cut (its "hexsha8")
constexpr std::size_t kShortestCommit = 7;   // git's default short hash

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char ch : text) {
    out += ch;
    if (ch == '\'') out += '\'';
  }
  return out + "'";
}

std::string lower_hex_or_empty(const std::string& text) {
  std::string out;
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (!std::isxdigit(c)) return "";
    out += static_cast<char>(std::tolower(c));
  }
  return out;
}

std::string build_identity(const LlamaBenchExportRun& run) {
  return run.build_sha256.empty() ? "name:" + run.build_name : run.build_sha256;
}

// The build's content hash as hex; a build without a hex hash gets the FNV-1a 64 hash of its identity.
std::string content_hex(const LlamaBenchExportRun& run) {
  const std::string hex = lower_hex_or_empty(run.build_sha256);
  if (hex.size() >= kCommitLength) return hex;
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (char ch : build_identity(run)) {
    hash ^= static_cast<unsigned char>(ch);
    hash *= 0x100000001b3ULL;
  }
  return fmt::format("{:016x}", hash);
}

bool prefix_related(const std::string& a, const std::string& b) {
  const std::size_t n = std::min(a.size(), b.size());
  return a.compare(0, n, b, 0, n) == 0;
}

// Mean and sample standard deviation of the run's samples (its figure alone: sd 0).
std::pair<double, double> mean_sd(const LlamaBenchExportRun& run) {
  const auto& values = run.tokens_per_s_samples;
  if (values.size() < 2) return {run.tokens_per_s, 0.0};
  double sum = 0;
  for (double v : values) sum += v;
  const double mean = sum / static_cast<double>(values.size());
  double ss = 0;
  for (double v : values) ss += (v - mean) * (v - mean);
  return {run.tokens_per_s, std::sqrt(ss / static_cast<double>(values.size() - 1))};
}

}  // namespace

const std::vector<std::string_view>& compare_llama_bench_key_properties() {
  static const std::vector<std::string_view> keys = {
      "cpu_info",  "gpu_info",  "backends",   "n_gpu_layers", "n_cpu_moe",     "tensor_buft_overrides",
      "model_filename", "model_type", "n_batch", "n_ubatch",  "embeddings",    "cpu_mask",
      "cpu_strict", "poll",     "n_threads",  "type_k",       "type_v",        "use_mmap",
      "no_kv_offload", "split_mode", "main_gpu", "tensor_split", "flash_attn", "n_prompt",
      "n_gen",     "n_depth",   "fit_target", "fit_min_ctx"};
  return keys;
}

const std::vector<std::string_view>& compare_llama_bench_required_fields() {
  static const std::vector<std::string_view> fields = {"build_commit", "test_time", "avg_ts"};
  return fields;
}

std::map<std::string, std::string> llama_bench_build_commits(const std::vector<LlamaBenchExportRun>& runs) {
  struct Candidate {
    std::string text;
    bool from_commit = false;
    std::string content;
  };
  std::map<std::string, Candidate> builds;
  for (const auto& run : runs) {
    auto [it, added] = builds.try_emplace(build_identity(run));
    if (!added) continue;
    it->second.content = content_hex(run);
    const std::string commit = lower_hex_or_empty(run.commit);
    it->second.from_commit = commit.size() >= kShortestCommit;
    it->second.text = it->second.from_commit ? commit : it->second.content;
  }
  // Builds of one commit (other flags, the same source) would be one build to the script: those
  // take their content hash instead. So would two whose texts agree on the cut: the cut grows first.
  for (;;) {
    std::size_t shortest = SIZE_MAX;
    for (const auto& [id, c] : builds) shortest = std::min(shortest, c.text.size());
    auto clashes = [&](std::size_t length) {
      std::set<std::string> seen;
      for (const auto& [id, c] : builds)
        if (!seen.insert(c.text.substr(0, length)).second) return true;
      return false;
    };
    std::size_t length = std::min(kCommitLength, shortest);
    while (length < shortest && clashes(length)) ++length;
    if (!clashes(length)) {
      std::map<std::string, std::string> out;
      for (const auto& [id, c] : builds) out[id] = c.text.substr(0, length);
      return out;
    }
    std::vector<std::string> demoted;
    for (const auto& [id, c] : builds) {
      if (!c.from_commit) continue;
      for (const auto& [other_id, other] : builds)
        if (other_id != id && prefix_related(c.text, other.text)) {
          demoted.push_back(id);
          break;
        }
    }
    // No commit clashes, yet the cut does (content hashes alike in their first digits, cut short by a
    // short commit): every build takes its content hash, so the cut can grow past the commits.
    if (demoted.empty())
      for (const auto& [id, c] : builds)
        if (c.from_commit) demoted.push_back(id);
    for (const auto& id : demoted) {
      builds[id].text = builds[id].content;
      builds[id].from_commit = false;
    }
    if (demoted.empty()) {  // two content hashes alike to the last digit: keep the full hashes
      std::map<std::string, std::string> out;
      for (const auto& [id, c] : builds) out[id] = c.text;
      return out;
    }
  }
}

std::string llama_bench_model_type(const LlamaBenchExportRun& run) {
  std::string out = run.profile;
  for (const std::string* part : {&run.weight_type, &run.path})
    if (!part->empty()) out += (out.empty() ? "" : " ") + *part;
  return out;
}

std::string write_llama_bench_sql(const std::vector<LlamaBenchExportRun>& runs) {
  const auto& columns = llama_bench_columns();
  const auto commits = llama_bench_build_commits(runs);
  std::string names;
  std::string out = "CREATE TABLE IF NOT EXISTS llama_bench (\n";
  for (std::size_t i = 0; i < columns.size(); ++i) {
    out += fmt::format("  {} {}{}\n", columns[i].name, sql_type_name(columns[i].type), i + 1 < columns.size() ? "," : "");
    names += fmt::format("{}{}", i ? ", " : "", columns[i].name);
  }
  out += ");\n\n";
  for (const auto& run : runs) {
    const auto [avg_ts, stddev_ts] = mean_sd(run);
    const double avg_ns = static_cast<double>(run.tokens) / avg_ts * 1e9;
    const double stddev_ns = avg_ts > 0 ? avg_ns * stddev_ts / avg_ts : 0.0;
    const std::map<std::string_view, std::string> values = {
        {"build_commit", quoted(commits.at(build_identity(run)))},
        {"gpu_info", quoted(run.gpu_name)},
        {"backends", quoted(run.backend)},
        {"model_type", quoted(llama_bench_model_type(run))},
        {"n_prompt", std::to_string(run.tokens)},
        {"n_gen", "0"},
        {"test_time", quoted(format_test_time(run.started_ms))},
        {"avg_ns", fmt::format("{}", std::llround(avg_ns))},
        {"stddev_ns", fmt::format("{}", std::llround(stddev_ns))},
        {"avg_ts", fmt::format("{:.6f}", avg_ts)},
        {"stddev_ts", fmt::format("{:.6f}", stddev_ts)},
    };
    std::string row;
    for (std::size_t i = 0; i < columns.size(); ++i) {
      const auto it = values.find(columns[i].name);
      const std::string value = it != values.end() ? it->second : columns[i].type == SqlType::Text ? "''" : "0";
      row += fmt::format("{}{}", i ? ", " : "", value);
    }
    out += fmt::format("INSERT INTO llama_bench ({}) VALUES ({});\n", names, row);
  }
  return out;
}

}  // namespace qgate::interop
