// test-backend-ops rows to ExternalRuns. A MUL_MAT of m x k weights (type_a) by n columns is n
// tokens through one GEMM, so its tok/s is n / time_us; the profile names the weight shape.
#include "qgate/interop/test_backend_ops.h"

#include <map>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "qgate/interop/llama_bench.h"

namespace qgate::interop {

namespace {

// "type_a=q4_0,m=4096,bs=[1,1]" -> {type_a: q4_0, m: 4096, bs: [1,1]}; commas inside [] stay.
std::map<std::string, std::string> op_params(const TableRow& row) {
  const std::string& text = row.text("op_params");
  std::map<std::string, std::string> out;
  std::string item;
  int depth = 0;
  auto flush = [&] {
    if (item.empty()) return;
    const auto eq = item.find('=');
    if (eq == std::string::npos) throw ImportError(row.line, "op_params", fmt::format("'{}' is not name=value", item));
    out[item.substr(0, eq)] = item.substr(eq + 1);
    item.clear();
  };
  for (char ch : text) {
    if (ch == '[') ++depth;
    if (ch == ']') --depth;
    if (ch == ',' && depth == 0) flush();
    else item += ch;
  }
  flush();
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
