// qgate-prefill's result in llama-bench's output shapes: `-o json` (an array with one object per
// test) and `-o jsonl` (one object per line), with llama-bench's field names, plus two of
// qgate-prefill's own: "mmq" (the path the context resolved to) and "tokens" (the greedy tokens).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qgate::prefill {

/// One llama-bench test (here always a prompt-processing test: n_gen = 0).
struct BenchRecord {
  std::string build_commit;
  int64_t build_number = 0;
  std::string cpu_info, gpu_info, backends;
  std::string model_filename, model_type;
  uint64_t model_size = 0, model_n_params = 0;
  int64_t n_batch = 0, n_ubatch = 0, n_threads = 0;
  int64_t n_gpu_layers = 0, main_gpu = 0;
  int64_t n_prompt = 0, n_gen = 0, n_depth = 0;
  int64_t test_time_unix_s = 0;
  std::vector<uint64_t> samples_ns;  ///< one per timed repetition
  bool mmq = false;
  std::vector<int32_t> tokens;
};

/// Mean and sample standard deviation of the samples, and the same of n_prompt + n_gen tokens per
/// second of each sample, as llama-bench computes them.
struct BenchStats {
  uint64_t avg_ns = 0, stddev_ns = 0;
  double avg_ts = 0, stddev_ts = 0;
  std::vector<double> samples_ts;
};
BenchStats bench_stats(const BenchRecord& r);

/// The record as one JSON object, fields in llama-bench's order.
std::string bench_json_object(const BenchRecord& r, int indent = -1);
/// llama-bench -o json: "[\n  {...}\n]\n".
std::string bench_json(const std::vector<BenchRecord>& records);
/// llama-bench -o jsonl: one object per line.
std::string bench_jsonl(const std::vector<BenchRecord>& records);

}  // namespace qgate::prefill
