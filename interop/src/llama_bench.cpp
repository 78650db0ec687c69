// llama-bench rows to ExternalRuns: a pp test (n_gen = 0) is path "pp", a tg test "tg", a combined
// one "pp+tg"; the model_type is the profile; avg_ts is the run's tok/s, samples_ts its samples.
#include "qgate/interop/llama_bench.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace qgate::interop {

const std::vector<LlamaBenchColumn>& llama_bench_columns() {
  static const std::vector<LlamaBenchColumn> columns = {
      {"build_commit", SqlType::Text},           {"build_number", SqlType::Integer},
      {"cpu_info", SqlType::Text},               {"gpu_info", SqlType::Text},
      {"backends", SqlType::Text},               {"model_filename", SqlType::Text},
      {"model_type", SqlType::Text},             {"model_size", SqlType::Integer},
      {"model_n_params", SqlType::Integer},      {"n_batch", SqlType::Integer},
      {"n_ubatch", SqlType::Integer},            {"n_threads", SqlType::Integer},
      {"cpu_mask", SqlType::Text},               {"cpu_strict", SqlType::Integer},
      {"poll", SqlType::Integer},                {"type_k", SqlType::Text},
      {"type_v", SqlType::Text},                 {"n_gpu_layers", SqlType::Integer},
      {"n_cpu_moe", SqlType::Integer},           {"split_mode", SqlType::Text},
      {"main_gpu", SqlType::Integer},            {"no_kv_offload", SqlType::Integer},
      {"flash_attn", SqlType::Integer},          {"devices", SqlType::Text},
      {"tensor_split", SqlType::Text},           {"tensor_buft_overrides", SqlType::Text},
      {"load_mode", SqlType::Text},              {"use_mmap", SqlType::Integer},
      {"embeddings", SqlType::Integer},          {"no_op_offload", SqlType::Integer},
      {"no_host", SqlType::Integer},             {"fit_target", SqlType::Integer},
      {"fit_min_ctx", SqlType::Integer},         {"n_prompt", SqlType::Integer},
      {"n_gen", SqlType::Integer},               {"n_depth", SqlType::Integer},
      {"test_time", SqlType::Text},              {"avg_ns", SqlType::Integer},
      {"stddev_ns", SqlType::Integer},           {"avg_ts", SqlType::Real},
      {"stddev_ts", SqlType::Real},
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

// The settings llama-bench keys a series on (compare-llama-bench.py's key properties) for which a qgate
// run has no field of its own, in this order, each with llama-bench's default where that default has
// not changed across its versions ("" for none). A setting at its default is left out, so that a
// markdown table, which names only the settings that differ from the defaults, keys as the other
// formats do. docs/interop.md lists them.
struct KeySetting {
  const char* field;
  const char* default_value;
};
constexpr KeySetting kKeySettings[] = {
    {"n_batch", "2048"},      {"n_ubatch", "512"},       {"n_threads", ""},
    {"n_gpu_layers", ""},     {"n_cpu_moe", "0"},        {"type_k", "f16"},
    {"type_v", "f16"},        {"flash_attn", ""},        {"split_mode", "layer"},
    {"main_gpu", "0"},        {"no_kv_offload", "0"},    {"tensor_split", "0.00"},
    {"tensor_buft_overrides", "none"}, {"devices", "auto"}, {"use_mmap", "1"},
    {"load_mode", ""},        {"embeddings", "0"},       {"no_op_offload", "0"},
    {"no_host", "0"},         {"cpu_mask", "0x0"},       {"cpu_strict", "0"},
    {"poll", "50"},           {"n_depth", "0"},          {"fit_target", ""},
    {"fit_min_ctx", ""}};

/// "n_ubatch=256 flash_attn=1 n_depth=4096": the row's key settings that are not at their defaults.
/// JSON's true and false read as 1 and 0, as the SQL and CSV forms write them.
std::string settings_of(const TableRow& row) {
  std::string out;
  for (const KeySetting& setting : kKeySettings) {
    std::string value = row.text_or(setting.field, "");
    if (value == "true") value = "1";
    if (value == "false") value = "0";
    if (value.empty() || value == setting.default_value) continue;
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", setting.field, value);
  }
  return out;
}

ExternalRun run_of(const TableRow& row) {
  ExternalRun run;
  run.tool = "llama-bench";
  run.line = row.line;
  run.build_commit = row.text("build_commit");
  run.backend = row.text_or("backends", "");
  run.gpu_name = row.text_or("gpu_info", "");
  run.profile = row.text("model_type");
  run.settings = settings_of(row);
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

// The markdown table's short column names for the fields' long ones (llama-bench's markdown printer).
std::string field_of_header(const std::string& header) {
  static const std::map<std::string, std::string> kLongNames = {
      {"model", "model_type"},       {"backend", "backends"},       {"ngl", "n_gpu_layers"},
      {"threads", "n_threads"},      {"sm", "split_mode"},          {"nkvo", "no_kv_offload"},
      {"fa", "flash_attn"},          {"dev", "devices"},            {"ts", "tensor_split"},
      {"ot", "tensor_buft_overrides"}, {"lm", "load_mode"},         {"mmap", "use_mmap"},
      {"embd", "embeddings"},        {"nopo", "no_op_offload"},     {"noh", "no_host"},
      {"fitt", "fit_target"},        {"fitc", "fit_min_ctx"},       {"size", "model_size_text"},
      {"params", "model_n_params_text"}};
  const auto found = kLongNames.find(header);
  return found == kLongNames.end() ? header : found->second;
}

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  const auto last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

// "| a | b |" as {"a", "b"}.
std::vector<std::string> markdown_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::string body = trimmed(line);
  if (body.size() < 2 || body.front() != '|' || body.back() != '|') return cells;
  body = body.substr(1, body.size() - 2);
  std::size_t start = 0;
  while (true) {
    const auto bar = body.find('|', start);
    cells.push_back(trimmed(body.substr(start, bar == std::string::npos ? std::string::npos : bar - start)));
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return cells;
}

// "pp512", "tg128", "pp512+tg128", each with an optional " @ d4096": n_prompt, n_gen, n_depth.
void read_test_name(const std::string& test, std::size_t line, std::map<std::string, std::optional<std::string>>& fields) {
  std::string name = test, depth = "0";
  if (const auto at = test.find('@'); at != std::string::npos) {
    name = trimmed(test.substr(0, at));
    const std::string d = trimmed(test.substr(at + 1));
    if (d.size() < 2 || d[0] != 'd' || d.find_first_not_of("0123456789", 1) != std::string::npos)
      throw ImportError(line, "test", fmt::format("'{}' is not a depth like d4096", d));
    depth = d.substr(1);
  }
  std::string prompt = "0", gen = "0";
  std::size_t start = 0;
  while (start < name.size()) {
    const auto plus = name.find('+', start);
    const std::string part = name.substr(start, plus == std::string::npos ? std::string::npos : plus - start);
    const bool digits = part.size() > 2 && part.find_first_not_of("0123456789", 2) == std::string::npos;
    if (digits && part.rfind("pp", 0) == 0) prompt = part.substr(2);
    else if (digits && part.rfind("tg", 0) == 0) gen = part.substr(2);
    else throw ImportError(line, "test", fmt::format("'{}' is not a test like pp512, tg128 or pp512+tg128", test));
    if (plus == std::string::npos) break;
    start = plus + 1;
  }
  fields["n_prompt"] = prompt;
  fields["n_gen"] = gen;
  fields["n_depth"] = depth;
}

// "123.45 ± 1.23" (or without the spread): avg_ts and stddev_ts.
void read_rate(const std::string& cell, std::size_t line, std::map<std::string, std::optional<std::string>>& fields) {
  static const std::string kPlusMinus = "\u00b1";
  const auto pm = cell.find(kPlusMinus);
  const std::string average = trimmed(cell.substr(0, pm));
  const std::string spread = pm == std::string::npos ? "" : trimmed(cell.substr(pm + kPlusMinus.size()));
  for (const auto& [field, text] : {std::pair{"avg_ts", average}, std::pair{"stddev_ts", spread}}) {
    if (text.empty()) continue;
    char* end = nullptr;
    std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size())
      throw ImportError(line, "t/s", fmt::format("'{}' is not a rate like 123.45 \u00b1 1.23", cell));
    fields[field] = text;
  }
  if (average.empty()) throw ImportError(line, "t/s", "empty");
}

}  // namespace

std::vector<TableRow> read_llama_bench_markdown(const std::string& text, std::int64_t test_time_ms) {
  std::vector<TableRow> rows;
  std::vector<std::string> headers;
  std::string build_commit, build_number;
  std::size_t line_number = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    const std::string content = trimmed(line);
    if (content.rfind("build:", 0) == 0) {  // "build: 5a7c2f1 (6120)"
      std::istringstream words(content.substr(6));
      std::string number;
      words >> build_commit >> number;
      if (number.size() > 2 && number.front() == '(' && number.back() == ')') build_number = number.substr(1, number.size() - 2);
      continue;
    }
    const std::vector<std::string> cells = markdown_cells(content);
    if (cells.empty()) continue;
    if (headers.empty()) {
      headers = cells;
      for (const char* needed : {"model", "test", "t/s"}) {
        if (std::find(headers.begin(), headers.end(), needed) == headers.end())
          throw ImportError(line_number, needed, "the table has no such column (not llama-bench's markdown?)");
      }
      continue;
    }
    if (cells.front().find_first_not_of("-: ") == std::string::npos) continue;  // the separator row
    if (cells.size() != headers.size())
      throw ImportError(line_number, "", fmt::format("{} cells, the header has {}", cells.size(), headers.size()));
    TableRow row;
    row.line = line_number;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (headers[i] == "test") read_test_name(cells[i], line_number, row.fields);
      else if (headers[i] == "t/s") read_rate(cells[i], line_number, row.fields);
      else row.fields[field_of_header(headers[i])] = cells[i];
    }
    row.fields["test_time"] = format_test_time(test_time_ms);
    rows.push_back(std::move(row));
  }
  if (headers.empty()) throw ImportError(1, "", "no markdown table (a line like | model | ... | t/s |)");
  if (build_commit.empty())
    throw ImportError(line_number, "build", "no 'build: <commit> (<number>)' line after the table");
  for (TableRow& row : rows) {
    row.fields["build_commit"] = build_commit;
    if (!build_number.empty()) row.fields["build_number"] = build_number;
  }
  return rows;
}

std::vector<ExternalRun> llama_bench_runs(const std::vector<TableRow>& rows) {
  std::vector<ExternalRun> runs;
  runs.reserve(rows.size());
  for (const auto& row : rows) runs.push_back(run_of(row));
  return runs;
}

}  // namespace qgate::interop
