// Test helper: runs the real qgate-worker binary and reads back what it wrote.
#pragma once

#include <string>
#include <vector>

#include "process_run.h"
#include "qgate/v1/worker.pb.h"

namespace qgate::worker::testing {

using ProcessResult = ::qgate::test_support::ProcessResult;

/// Paths of the worker binary and the reference build: the environment variables
/// QGATE_WORKER_BINARY / QGATE_REF_LIBRARY when set (a bundle on a GPU host), else the build tree's.
std::string worker_binary();
std::string ref_library();

/// Runs `qgate-worker <args>` with `env` prepended (e.g. "MINFER_MMQ=1"), capturing both streams.
ProcessResult run_worker(const std::string& args, const std::string& env = "");
/// The same with `input` on its stdin (length-delimited requests for `serve`).
ProcessResult run_worker_with_input(const std::string& args, const std::string& input, const std::string& env = "");
/// Length-delimited requests, as `qgate-worker serve` reads them from stdin.
std::string serialize_requests(const std::vector<v1::WorkerRequest>& requests);
/// Splits a length-delimited stream of WorkerRecords; fails the test on a malformed stream.
std::vector<v1::WorkerRecord> parse_records(const std::string& bytes);

}  // namespace qgate::worker::testing
