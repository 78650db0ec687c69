// The llama-bench SQL writer: the table shape llama-bench's sql printer uses, from ExternalRuns.
#include "qgate/interop/llama_bench_export.h"

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "qgate/interop/llama_bench.h"

namespace qgate::interop {

namespace {

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char ch : text) {
    out += ch;
    if (ch == '\'') out += '\'';
  }
  return out + "'";
}

// Mean and sample standard deviation of the run's tokens_per_s samples (its figure alone: sd 0).
std::pair<double, double> mean_sd(const ExternalRun& run) {
  std::vector<double> values;
  for (const auto& s : run.samples)
    if (s.metric == "tokens_per_s") values.push_back(s.value);
  if (values.size() < 2) return {run.tokens_per_s, 0.0};
  double sum = 0;
  for (double v : values) sum += v;
  const double mean = sum / static_cast<double>(values.size());
  double ss = 0;
  for (double v : values) ss += (v - mean) * (v - mean);
  return {run.tokens_per_s, std::sqrt(ss / static_cast<double>(values.size() - 1))};
}

}  // namespace

std::string write_llama_bench_sql(const std::vector<ExternalRun>& runs) {
  const auto& columns = llama_bench_columns();
  std::string names;
  std::string out = "CREATE TABLE IF NOT EXISTS test (\n";
  for (std::size_t i = 0; i < columns.size(); ++i) {
    out += fmt::format("  {} {}{}\n", columns[i].name, sql_type_name(columns[i].type), i + 1 < columns.size() ? "," : "");
    names += fmt::format("{}{}", i ? ", " : "", columns[i].name);
  }
  out += ");\n\n";
  for (const auto& run : runs) {
    const auto [avg_ts, stddev_ts] = mean_sd(run);
    const double avg_ns = static_cast<double>(run.tokens) / avg_ts * 1e9;
    const double stddev_ns = avg_ts > 0 ? avg_ns * stddev_ts / avg_ts : 0.0;
    std::map<std::string_view, std::string> values = {
        {"build_commit", quoted(run.build_commit)},
        {"gpu_info", quoted(run.gpu_name)},
        {"backends", quoted(run.backend)},
        {"model_type", quoted(run.profile)},
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
    out += fmt::format("INSERT INTO test ({}) VALUES ({});\n", names, row);
  }
  return out;
}

}  // namespace qgate::interop
