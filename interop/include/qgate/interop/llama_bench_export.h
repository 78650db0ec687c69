// qgate's prefill results written as llama-bench's -o sql output (table `test`, its columns and
// types from llama_bench_columns()), so they load beside llama-bench's own rows and back into qgate.
#pragma once

#include <string>
#include <vector>

#include "qgate/interop/external_run.h"

namespace qgate::interop {

/// CREATE TABLE IF NOT EXISTS test (...); then one INSERT per run: build_commit, gpu_info, backends,
/// model_type (the profile), n_prompt (tokens), n_gen = 0, test_time, avg_ts, stddev_ts and
/// avg_ns/stddev_ns from the run's tokens_per_s samples; columns qgate has no value for are
/// 0 or ''.
std::string write_llama_bench_sql(const std::vector<ExternalRun>& runs);

}  // namespace qgate::interop
