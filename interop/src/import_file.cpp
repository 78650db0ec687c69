// Format detection and dispatch for `qgate import`.
#include "qgate/interop/import_file.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "qgate/interop/llama_bench.h"
#include "qgate/interop/table_rows.h"
#include "qgate/interop/test_backend_ops.h"

namespace qgate::interop {

const std::vector<std::string>& import_formats() {
  static const std::vector<std::string> formats = {"auto", "llama-bench-sql", "llama-bench-json",
                                                   "llama-bench-jsonl", "llama-bench-csv",
                                                   "llama-bench-md", "test-backend-ops-sql"};
  return formats;
}

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string detect(const std::string& text, const std::string& file_name) {
  if (text.find("INSERT INTO test_backend_ops") != std::string::npos ||
      text.find("CREATE TABLE IF NOT EXISTS test_backend_ops") != std::string::npos)
    return "test-backend-ops-sql";
  // llama-bench's table is `llama_bench` since llama.cpp's PR #15003 (2025-08); before that it was `test`.
  for (const char* table : {"llama_bench", "test"}) {
    if (text.find(fmt::format("INSERT INTO {} ", table)) != std::string::npos ||
        text.find(fmt::format("CREATE TABLE IF NOT EXISTS {} ", table)) != std::string::npos)
      return "llama-bench-sql";
  }
  if (ends_with(file_name, ".md")) return "llama-bench-md";
  if (ends_with(file_name, ".jsonl")) return "llama-bench-jsonl";
  if (ends_with(file_name, ".json")) return "llama-bench-json";
  if (ends_with(file_name, ".csv")) return "llama-bench-csv";
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') return "llama-bench-json";
  if (first != std::string::npos && text[first] == '{') return "llama-bench-jsonl";
  if (text.find("| model") != std::string::npos && text.find("t/s") != std::string::npos) return "llama-bench-md";
  if (text.find("build_commit") != std::string::npos) return "llama-bench-csv";
  throw ImportError(1, "", "cannot tell the format; name it with --format");
}

}  // namespace

ParsedImport parse_import(const std::string& text, const std::string& format, const std::string& file_name,
                          std::int64_t file_time_ms) {
  const auto& known = import_formats();
  if (std::find(known.begin(), known.end(), format) == known.end())
    throw std::invalid_argument(fmt::format("unknown format '{}'", format));
  ParsedImport out;
  out.format = format == "auto" ? detect(text, file_name) : format;
  if (out.format == "test-backend-ops-sql") {
    auto parsed = test_backend_ops_runs(read_sql_inserts(text), text);
    out.runs = std::move(parsed.runs);
    out.skipped = parsed.skipped;
    return out;
  }
  std::vector<TableRow> rows;
  if (out.format == "llama-bench-sql") rows = read_sql_inserts(text);
  else if (out.format == "llama-bench-md") {
    if (file_time_ms <= 0) throw ImportError(1, "", "llama-bench's markdown has no test times and no file time was given");
    rows = read_llama_bench_markdown(text, file_time_ms);
  }
  else if (out.format == "llama-bench-json") rows = read_json_array(text);
  else if (out.format == "llama-bench-jsonl") rows = read_json_lines(text);
  else rows = read_csv(text);
  out.runs = llama_bench_runs(rows);
  return out;
}

}  // namespace qgate::interop
