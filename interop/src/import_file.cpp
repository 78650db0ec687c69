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
                                                   "llama-bench-md", "test-backend-ops-sql",
                                                   "test-backend-ops-csv", "test-backend-ops-console"};
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
  // test-backend-ops' own CSV names op_name and test_mode; its console output has backend sections.
  if (text.find("\"op_name\"") != std::string::npos && text.find("\"test_mode\"") != std::string::npos)
    return "test-backend-ops-csv";
  if (text.find("\nBackend ") != std::string::npos && text.find("Testing ") != std::string::npos)
    return "test-backend-ops-console";
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

/// test-backend-ops' correctness cases, a bad one an ImportError naming its line and field.
BackendOpsChecks correctness_checks(const std::string& text, const std::string& file_name) {
  try {
    return read_test_backend_ops_checks(text, file_name);
  } catch (const BackendOpsFileError& e) {
    const std::string what = e.what();
    const std::string after = fmt::format("field {}: ", e.field());
    const auto at = what.find(after);
    throw ImportError(e.line(), e.field(), at == std::string::npos ? what : what.substr(at + after.size()));
  }
}

}  // namespace

ParsedImport parse_import(const std::string& text, const std::string& format, const std::string& file_name,
                          std::int64_t file_time_ms) {
  const auto& known = import_formats();
  if (std::find(known.begin(), known.end(), format) == known.end())
    throw std::invalid_argument(fmt::format("unknown format '{}'", format));
  ParsedImport out;
  out.format = format == "auto" ? detect(text, file_name) : format;
  if (out.format.rfind("test-backend-ops-", 0) == 0) {
    // Performance rows (perf mode, SQL only) become runs; correctness rows (test mode) checks.
    BackendOpsChecks checks = correctness_checks(text, file_name);
    out.checks = std::move(checks.checks);
    out.skipped = checks.skipped;
    if (out.format == "test-backend-ops-sql") {
      auto parsed = test_backend_ops_runs(read_sql_inserts(text), text);
      out.runs = std::move(parsed.runs);
      // The perf reader skipped the test rows, which are the checks.
      out.skipped = parsed.skipped - std::min(parsed.skipped, out.checks.size());
    }
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
