// qgate's prefill runs written as today's llama-bench -o sql output (table `llama_bench`, the columns
// of llama_bench_columns()), keyed so that llama.cpp's scripts/compare-llama-bench.py keeps builds,
// paths and weight types apart. The key, the columns and the upstream commit they follow:
// docs/interop.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace qgate::interop {

/// One qgate run as the export needs it: the build it ran (name, content hash, commit when the build
/// recorded one) and the series it belongs to.
struct LlamaBenchExportRun {
  std::string build_name;
  std::string build_sha256;  // the build's content hash (hex)
  std::string commit;        // the build's source commit as submitted; "" when unknown
  std::string backend;
  std::string gpu_name;
  std::string profile;
  std::string path;          // "mmq" | "f16"
  std::string weight_type;   // "" when the run has none
  std::int64_t tokens = 0;
  double tokens_per_s = 0.0;
  std::vector<double> tokens_per_s_samples;  // for stddev_ts; empty: one figure, sd 0
  std::int64_t started_ms = 0;
};

/// The properties compare-llama-bench.py joins and groups rows on (its LLAMA_BENCH_KEY_PROPERTIES at
/// the commit docs/interop.md names, with the fit_* pair later versions add), then the fields it
/// requires besides: build_commit, test_time, avg_ts. Every one is a column of the export.
const std::vector<std::string_view>& compare_llama_bench_key_properties();
const std::vector<std::string_view>& compare_llama_bench_required_fields();

/// The build_commit each build gets, keyed by the build's identity (its sha256, or its name when it has
/// none): the build's own commit when it is hex of 7 or more digits and no other build of the export
/// shares it, else a prefix of its content hash; all cut to one length (8, or more where two builds
/// would otherwise share a prefix), since the script cuts every build_commit to the shortest.
std::map<std::string, std::string> llama_bench_build_commits(const std::vector<LlamaBenchExportRun>& runs);

/// model_type, which the script always shows and keys on: "<profile> <weight type> <path>", e.g.
/// "llama-7b-q4_K_M q4_K mmq" (an empty weight type left out).
std::string llama_bench_model_type(const LlamaBenchExportRun& run);

/// CREATE TABLE IF NOT EXISTS llama_bench (...); then one INSERT per run: build_commit as above,
/// gpu_info, backends, model_type, n_prompt (tokens), n_gen = 0, test_time, avg_ts, stddev_ts and
/// avg_ns/stddev_ns; columns qgate has no value for are 0 or ''.
std::string write_llama_bench_sql(const std::vector<LlamaBenchExportRun>& runs);

}  // namespace qgate::interop
