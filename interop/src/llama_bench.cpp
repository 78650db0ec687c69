// llama-bench rows to ExternalRuns: a pp test (n_gen = 0) is path "pp", a tg test "tg", a combined
// one "pp+tg"; the model_type is the profile; avg_ts is the run's tok/s, samples_ts its samples.
#include "qgate/interop/llama_bench.h"

#include <cstdio>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace qgate::interop {

const std::vector<LlamaBenchColumn>& llama_bench_columns() {
  static const std::vector<LlamaBenchColumn> columns = {
      {"build_commit", SqlType::Text}, {"build_number", SqlType::Integer},
      {"cpu_info", SqlType::Text}, {"gpu_info", SqlType::Text},
      {"backends", SqlType::Text}, {"model_filename", SqlType::Text},
      {"model_type", SqlType::Text}, {"model_size", SqlType::Integer},
      {"model_n_params", SqlType::Integer}, {"n_batch", SqlType::Integer},
      {"n_ubatch", SqlType::Integer}, {"n_threads", SqlType::Integer},
      {"cpu_mask", SqlType::Text}, {"cpu_strict", SqlType::Integer},
      {"poll", SqlType::Integer}, {"type_k", SqlType::Text},
      {"type_v", SqlType::Text}, {"n_gpu_layers", SqlType::Integer},
      {"split_mode", SqlType::Text}, {"main_gpu", SqlType::Integer},
      {"no_kv_offload", SqlType::Integer}, {"flash_attn", SqlType::Integer},
      {"tensor_split", SqlType::Text}, {"tensor_buft_overrides", SqlType::Text},
      {"use_mmap", SqlType::Integer}, {"embeddings", SqlType::Integer},
      {"no_op_offload", SqlType::Integer}, {"n_prompt", SqlType::Integer},
      {"n_gen", SqlType::Integer}, {"n_depth", SqlType::Integer},
      {"test_time", SqlType::Text}, {"avg_ns", SqlType::Integer},
      {"stddev_ns", SqlType::Integer}, {"avg_ts", SqlType::Real},
      {"stddev_ts", SqlType::Real}, {"n_cpu_moe", SqlType::Integer},
      {"fit_target", SqlType::Integer}, {"fit_min_ctx", SqlType::Integer},
  };
  return columns;
}

std::string_view sql_type_name(SqlType type) {
  switch (type) {
    case SqlType::Integer: return "INTEGER";
    case SqlType::Real: return "REAL";
    case SqlType::Text: break;
  }
  return "TEXT";
}

std::int64_t parse_test_time(const std::string& text, std::size_t line, const std::string& field) {
  std::tm tm{};
  int fraction_end = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &fraction_end) != 6 ||
      (text.substr(static_cast<std::size_t>(fraction_end)) != "Z" &&
       text.substr(static_cast<std::size_t>(fraction_end)) != ""))
    throw ImportError(line, field, fmt::format("'{}' is not a time like 2026-11-30T01:22:59Z", text));
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return static_cast<std::int64_t>(timegm(&tm)) * 1000;
}

std::string format_test_time(std::int64_t unix_ms) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec);
}

namespace {

// The fields that already have a place in the run; the rest go into options_json.
bool mapped(const std::string& field) {
  static const char* const kMapped[] = {"build_commit", "backends", "gpu_info", "model_type", "n_prompt",
                                        "n_gen", "test_time", "avg_ts", "stddev_ts", "samples_ts",
                                        "avg_ns", "stddev_ns", "samples_ns"};
  for (const char* m : kMapped)
    if (field == m) return true;
  return false;
}

std::vector<double> json_numbers(const TableRow& row, const std::string& field) {
  const std::string text = row.text_or(field, "");
  if (text.empty()) return {};
  try {
    const auto array = nlohmann::json::parse(text);
    if (!array.is_array()) throw ImportError(row.line, field, "expected an array of numbers");
    std::vector<double> out;
    for (const auto& v : array) {
      if (!v.is_number()) throw ImportError(row.line, field, fmt::format("'{}' is not a number", v.dump()));
      out.push_back(v.get<double>());
    }
    return out;
  } catch (const nlohmann::json::exception&) {
    throw ImportError(row.line, field, "expected an array of numbers");
  }
}

ExternalRun run_of(const TableRow& row) {
  ExternalRun run;
  run.tool = "llama-bench";
  run.line = row.line;
  run.build_commit = row.text("build_commit");
  run.backend = row.text_or("backends", "");
  run.gpu_name = row.text_or("gpu_info", "");
  run.profile = row.text("model_type");
  const std::int64_t n_prompt = row.integer("n_prompt");
  const std::int64_t n_gen = row.integer("n_gen");
  if (n_prompt < 0) throw ImportError(row.line, "n_prompt", "must not be negative");
  if (n_gen < 0) throw ImportError(row.line, "n_gen", "must not be negative");
  if (n_prompt + n_gen == 0) throw ImportError(row.line, "n_prompt", "n_prompt and n_gen are both 0");
  run.path = n_gen == 0 ? "pp" : n_prompt == 0 ? "tg" : "pp+tg";
  run.tokens = n_prompt + n_gen;
  run.started_ms = parse_test_time(row.text("test_time"), row.line, "test_time");
  run.tokens_per_s = row.real("avg_ts");
  if (!(run.tokens_per_s > 0)) throw ImportError(row.line, "avg_ts", "must be positive");
  const auto samples = json_numbers(row, "samples_ts");
  for (double v : samples) run.samples.push_back({"tokens_per_s", "tok/s", v});
  if (samples.empty()) run.samples.push_back({"tokens_per_s", "tok/s", run.tokens_per_s});
  if (row.text_or("stddev_ts", "") != "") run.samples.push_back({"stddev_tokens_per_s", "tok/s", row.real("stddev_ts")});
  nlohmann::json options = nlohmann::json::object();
  for (const auto& [key, value] : row.fields)
    if (!mapped(key)) options[key] = value ? nlohmann::json(*value) : nlohmann::json();
  run.options_json = options.dump();
  return run;
}

}  // namespace

std::vector<ExternalRun> llama_bench_runs(const std::vector<TableRow>& rows) {
  std::vector<ExternalRun> runs;
  runs.reserve(rows.size());
  for (const auto& row : rows) runs.push_back(run_of(row));
  return runs;
}

}  // namespace qgate::interop
