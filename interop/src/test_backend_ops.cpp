// test-backend-ops rows to ExternalRuns. A MUL_MAT of m x k weights (type_a) by n columns is n
// tokens through one GEMM, so its tok/s is n / time_us; the profile names the weight shape. Its
// correctness mode's cases to BackendOpsChecks (at the end).
#include "qgate/interop/test_backend_ops.h"

#include <cstdlib>
#include <map>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "qgate/interop/llama_bench.h"

namespace qgate::interop {

namespace {

// "type_a=q4_0,m=4096,bs=[1,1]" -> "type_a=q4_0", "m=4096", "bs=[1,1]": commas inside [] stay, empty
// items are left out.
std::vector<std::string> param_items(const std::string& params) {
  std::vector<std::string> out;
  std::string item;
  int depth = 0;
  auto flush = [&] {
    if (!item.empty()) out.push_back(item);
    item.clear();
  };
  for (char ch : params) {
    if (ch == '[') ++depth;
    if (ch == ']') --depth;
    if (ch == ',' && depth == 0) flush();
    else item += ch;
  }
  flush();
  return out;
}

// "type_a=q4_0,m=4096,bs=[1,1]" -> {type_a: q4_0, m: 4096, bs: [1,1]}.
std::map<std::string, std::string> op_params(const TableRow& row) {
  std::map<std::string, std::string> out;
  for (const std::string& item : param_items(row.text("op_params"))) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) throw ImportError(row.line, "op_params", fmt::format("'{}' is not name=value", item));
    out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return out;
}

std::int64_t param_integer(const TableRow& row, const std::map<std::string, std::string>& params,
                           const std::string& name) {
  const auto it = params.find(name);
  if (it == params.end()) throw ImportError(row.line, "op_params", fmt::format("no {}", name));
  try {
    std::size_t used = 0;
    const long long v = std::stoll(it->second, &used);
    if (used != it->second.size() || v <= 0) throw std::invalid_argument(name);
    return v;
  } catch (const std::exception&) {
    throw ImportError(row.line, "op_params", fmt::format("{}='{}' is not a positive integer", name, it->second));
  }
}

// "Device 0: NVIDIA H200, compute capability 9.0" lines of the tool's own output.
std::map<int, std::string> devices_in(const std::string& text) {
  std::map<int, std::string> out;
  static const std::regex device(R"(Device (\d+): ([^,\n]+))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), device); it != std::sregex_iterator(); ++it)
    out.emplace(std::stoi((*it)[1].str()), (*it)[2].str());
  return out;
}

std::string gpu_for(const TableRow& row, const std::string& backend, const std::map<int, std::string>& devices) {
  const std::string description = row.text_or("device_description", "");
  if (!description.empty()) return description;
  const auto digits = backend.find_last_not_of("0123456789");
  if (digits == std::string::npos || digits + 1 == backend.size()) return "";
  const auto it = devices.find(std::stoi(backend.substr(digits + 1)));
  return it == devices.end() ? "" : it->second;
}

}  // namespace

TestBackendOpsRuns test_backend_ops_runs(const std::vector<TableRow>& rows, const std::string& preamble) {
  const auto devices = devices_in(preamble);
  TestBackendOpsRuns out;
  for (const auto& row : rows) {
    if (row.text("op_name") != "MUL_MAT" || row.text("test_mode") != "perf" ||
        row.text_or("supported", "1") == "0") {
      ++out.skipped;
      continue;
    }
    const auto params = op_params(row);
    const auto type_a = params.find("type_a");
    if (type_a == params.end() || type_a->second.empty()) throw ImportError(row.line, "op_params", "no type_a");
    const std::int64_t m = param_integer(row, params, "m");
    const std::int64_t n = param_integer(row, params, "n");
    const std::int64_t k = param_integer(row, params, "k");
    const double time_us = row.real("time_us");
    if (!(time_us > 0)) throw ImportError(row.line, "time_us", "must be positive");

    ExternalRun run;
    run.tool = "test-backend-ops";
    run.line = row.line;
    run.build_commit = row.text("build_commit");
    run.backend = row.text("backend_name");
    run.gpu_name = gpu_for(row, run.backend, devices);
    run.profile = fmt::format("mul_mat-m{}-k{}", m, k);
    const auto type_b = params.find("type_b");
    if (type_b != params.end() && type_b->second != "f32") run.profile += "-" + type_b->second;
    run.path = type_a->second;
    run.weight_type = type_a->second;
    run.tokens = n;
    run.tokens_per_s = static_cast<double>(n) / (time_us * 1e-6);
    run.gemm_ms = time_us / 1000.0;
    run.started_ms = parse_test_time(row.text("test_time"), row.line, "test_time");
    run.samples.push_back({"gemm_us", "us", time_us});
    if (row.text_or("flops", "") != "") run.samples.push_back({"flops", "FLOP/s", row.real("flops")});
    nlohmann::json options = {{"op_params", row.text("op_params")}};
    for (const char* field : {"n_runs", "memory_kb", "bandwidth_gb_s", "backend_reg_name"})
      if (auto v = row.text_or(field, ""); !v.empty()) options[field] = v;
    run.options_json = options.dump();
    out.runs.push_back(std::move(run));
  }
  return out;
}

}  // namespace qgate::interop

// test-backend-ops' correctness mode: its console lines, or its sql and csv rows of test_mode "test",
// as BackendOpsChecks. The forms read are listed in docs/interop.md.
namespace qgate::interop {

BackendOpsFileError::BackendOpsFileError(const std::string& file, std::size_t line, const std::string& field,
                                         const std::string& what)
    : std::runtime_error(field.empty() ? fmt::format("{}: line {}: {}", file, line, what)
                                       : fmt::format("{}: line {}, field {}: {}", file, line, field, what)),
      file_(file),
      line_(line),
      field_(field) {}

namespace {

std::string without_colour(const std::string& line) {
  static const std::regex colour("\x1b\\[[0-9;]*m");
  return std::regex_replace(line, colour, "");
}

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() && text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// The params named type* ("type_a=q4_0,...,bs=[1,1]" -> {type_a: q4_0}).
std::map<std::string, std::string> types_in(const std::string& params) {
  std::map<std::string, std::string> out;
  for (const std::string& item : param_items(params)) {
    const auto eq = item.find('=');
    if (eq != std::string::npos && item.rfind("type", 0) == 0) out[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return out;
}

double number_in(const std::string& text, const std::string& file, std::size_t line, const std::string& field) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    throw BackendOpsFileError(file, line, field, fmt::format("'{}' is not a number", text));
  return value;
}

BackendOpsChecks read_console(const std::string& text, const std::string& file) {
  static const std::regex backend_header(R"(^Backend \d+/\d+: (\S+)\s*$)");
  static const std::regex case_line(R"((?:^|\s)([A-Z][A-Z0-9_]*)\((.*)\):(?: (.*))?$)");
  static const std::regex error_detail(R"(\[[A-Za-z0-9_]+\] (NMSE|ERR) = (\S+) > (\S+))");
  BackendOpsChecks out;
  out.format = "console";
  std::string backend;
  std::istringstream lines(text);
  std::string raw;
  for (std::size_t number = 1; std::getline(lines, raw); ++number) {
    const std::string line = without_colour(raw);
    std::smatch m;
    if (std::regex_match(line, m, backend_header)) {
      backend = m[1].str();
      continue;
    }
    if (!std::regex_search(line, m, case_line)) continue;
    const std::string status = trimmed(m[3].str());
    // Other modes' lines: perf figures, support answers, grad's skips.
    if (status.find(" runs - ") != std::string::npos || ends_with(status, "SUPPORTED") ||
        status == "skipping large tensors for speed") {
      ++out.skipped;
      continue;
    }
    BackendOpsCheck check;
    check.line = number;
    check.op = m[1].str();
    check.params = m[2].str();
    check.types = types_in(check.params);
    std::string detail = trimmed(m.prefix().str());
    if (status.rfind("not supported", 0) == 0) {
      check.outcome = BackendOpsCheck::Outcome::NotSupported;
      check.failure = status;
    } else if (ends_with(status, "OK")) {
      check.outcome = BackendOpsCheck::Outcome::Passed;
      detail = trimmed(detail + " " + status.substr(0, status.size() - 2));
    } else if (ends_with(status, "FAIL")) {
      check.outcome = BackendOpsCheck::Outcome::Failed;
      detail = trimmed(detail + " " + status.substr(0, status.size() - 4));
    } else {
      throw BackendOpsFileError(file, number, "status",
                                fmt::format("'{}' is not OK, FAIL or not supported", status));
    }
    if (backend.empty())
      throw BackendOpsFileError(file, number, "backend", "a case before any 'Backend i/n: NAME' line");
    check.backend = backend;
    if (std::smatch e; std::regex_search(detail, e, error_detail)) {
      check.nmse = number_in(e[2].str(), file, number, "nmse");
      check.error_bound = number_in(e[3].str(), file, number, "error_bound");
    }
    if (check.outcome == BackendOpsCheck::Outcome::Failed) check.failure = detail;
    out.checks.push_back(std::move(check));
  }
  return out;
}

bool flag(const TableRow& row, const std::string& field) {
  const std::string& v = row.text(field);
  if (v == "1" || v == "true") return true;
  if (v == "0" || v == "false") return false;
  throw ImportError(row.line, field, fmt::format("'{}' is not 0 or 1", v));
}

BackendOpsChecks checks_of_rows(const std::vector<TableRow>& rows, const std::string& format, std::size_t line_offset) {
  BackendOpsChecks out;
  out.format = format;
  for (const auto& row : rows) {
    if ((format == "sql" && row.table != "test_backend_ops") || row.text("test_mode") != "test") {
      ++out.skipped;
      continue;
    }
    BackendOpsCheck check;
    check.line = row.line + line_offset;
    check.op = row.text("op_name");
    if (check.op.empty()) throw ImportError(row.line, "op_name", "is empty");
    check.params = row.text("op_params");
    check.types = types_in(check.params);
    check.backend = row.text("backend_name");
    if (check.backend.empty()) throw ImportError(row.line, "backend_name", "is empty");
    const std::string message = row.text_or("error_message", "");
    // The csv printer has no `passed` column: a supported case passed when it reports no error.
    const bool supported = flag(row, "supported");
    const bool passed = format == "sql" ? flag(row, "passed") : message.empty();
    check.outcome = !supported ? BackendOpsCheck::Outcome::NotSupported
                    : passed   ? BackendOpsCheck::Outcome::Passed
                               : BackendOpsCheck::Outcome::Failed;
    if (!passed || !supported) check.failure = message;
    check.build_commit = row.text_or("build_commit", "");
    if (const std::string time = row.text_or("test_time", ""); !time.empty())
      check.test_time_ms = parse_test_time(time, row.line, "test_time");
    out.checks.push_back(std::move(check));
  }
  return out;
}

// ImportError's message without its "line N[, field F]: " head.
std::string reason_of(const ImportError& e) {
  const std::string what = e.what();
  const auto colon = what.find(": ");
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

}  // namespace

BackendOpsChecks read_test_backend_ops_checks(const std::string& text, const std::string& file_name) {
  if (text.find("INSERT INTO test_backend_ops") != std::string::npos ||
      text.find("CREATE TABLE IF NOT EXISTS test_backend_ops") != std::string::npos) {
    try {
      return checks_of_rows(read_sql_inserts(text), "sql", 0);
    } catch (const ImportError& e) {
      throw BackendOpsFileError(file_name, e.line(), e.field(), reason_of(e));
    }
  }
  // CSV: a header naming op_name and test_mode; lines before it (a preamble) are not part of the table.
  std::size_t header_start = 0;
  std::size_t header_line = 1;
  while (header_start < text.size()) {
    const auto end = text.find('\n', header_start);
    const std::string line = text.substr(header_start, end == std::string::npos ? std::string::npos : end - header_start);
    if (line.find("\"op_name\"") != std::string::npos && line.find("\"test_mode\"") != std::string::npos) {
      try {
        return checks_of_rows(read_csv(text.substr(header_start)), "csv", header_line - 1);
      } catch (const ImportError& e) {
        throw BackendOpsFileError(file_name, e.line() + header_line - 1, e.field(), reason_of(e));
      }
    }
    if (end == std::string::npos) break;
    header_start = end + 1;
    ++header_line;
  }
  return read_console(text, file_name);
}

}  // namespace qgate::interop
