// llama-bench's JSON and JSON-lines output for qgate-prefill's runs (see bench_report.h).
#include "qgate/prefill/bench_report.h"

#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

namespace qgate::prefill {

namespace {

template <typename T>
std::pair<double, double> mean_sd(const std::vector<T>& v) {
  if (v.empty()) return {0, 0};
  double sum = 0;
  for (T x : v) sum += double(x);
  const double mean = sum / double(v.size());
  if (v.size() < 2) return {mean, 0};
  double ss = 0;
  for (T x : v) ss += (double(x) - mean) * (double(x) - mean);
  return {mean, std::sqrt(ss / double(v.size() - 1))};
}

std::string iso_time(int64_t unix_s) {
  const std::time_t t = std::time_t(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::ordered_json to_json(const BenchRecord& r) {
  const BenchStats s = bench_stats(r);
  nlohmann::ordered_json j;
  j["build_commit"] = r.build_commit;
  j["build_number"] = r.build_number;
  j["cpu_info"] = r.cpu_info;
  j["gpu_info"] = r.gpu_info;
  j["backends"] = r.backends;
  j["model_filename"] = r.model_filename;
  j["model_type"] = r.model_type;
  j["model_size"] = r.model_size;
  j["model_n_params"] = r.model_n_params;
  j["n_batch"] = r.n_batch;
  j["n_ubatch"] = r.n_ubatch;
  j["n_threads"] = r.n_threads;
  j["cpu_mask"] = "0x0";
  j["cpu_strict"] = false;
  j["poll"] = 50;
  j["type_k"] = "f16";
  j["type_v"] = "f16";
  j["n_gpu_layers"] = r.n_gpu_layers;
  j["split_mode"] = "layer";
  j["main_gpu"] = r.main_gpu;
  j["no_kv_offload"] = false;
  j["flash_attn"] = false;
  j["tensor_split"] = "0.00";
  j["tensor_buft_overrides"] = "none";
  j["use_mmap"] = false;
  j["embeddings"] = false;
  j["no_op_offload"] = 0;
  j["n_prompt"] = r.n_prompt;
  j["n_gen"] = r.n_gen;
  j["n_depth"] = r.n_depth;
  j["test_time"] = iso_time(r.test_time_unix_s);
  j["avg_ns"] = s.avg_ns;
  j["stddev_ns"] = s.stddev_ns;
  j["avg_ts"] = s.avg_ts;
  j["stddev_ts"] = s.stddev_ts;
  j["samples_ns"] = r.samples_ns;
  j["samples_ts"] = s.samples_ts;
  j["mmq"] = r.mmq;
  j["tokens"] = r.tokens;
  return j;
}

}  // namespace

BenchStats bench_stats(const BenchRecord& r) {
  BenchStats s;
  const double tokens = double(r.n_prompt + r.n_gen);
  for (uint64_t ns : r.samples_ns) s.samples_ts.push_back(ns > 0 ? 1e9 * tokens / double(ns) : 0.0);
  const auto [avg_ns, sd_ns] = mean_sd(r.samples_ns);
  const auto [avg_ts, sd_ts] = mean_sd(s.samples_ts);
  s.avg_ns = uint64_t(std::llround(avg_ns));
  s.stddev_ns = uint64_t(std::llround(sd_ns));
  s.avg_ts = avg_ts;
  s.stddev_ts = sd_ts;
  return s;
}

std::string bench_json_object(const BenchRecord& r, int indent) { return to_json(r).dump(indent); }

std::string bench_json(const std::vector<BenchRecord>& records) {
  nlohmann::ordered_json array = nlohmann::ordered_json::array();
  for (const auto& r : records) array.push_back(to_json(r));
  return array.dump(2) + "\n";
}

std::string bench_jsonl(const std::vector<BenchRecord>& records) {
  std::string out;
  for (const auto& r : records) out += bench_json_object(r) + "\n";
  return out;
}

}  // namespace qgate::prefill
