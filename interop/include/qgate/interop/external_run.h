// What an imported result file holds, in qgate's terms: one ExternalRun per measured row, with the
// tool that produced it and every field that places it in a build and a series. Host-only data; the
// CLI turns these into ImportResults messages and the daemon into builds and runs.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace qgate::interop {

/// A bad input: the message names the line (1-based) and, when known, the field.
class ImportError : public std::runtime_error {
 public:
  ImportError(std::size_t line, std::string field, const std::string& what);
  std::size_t line() const { return line_; }
  const std::string& field() const { return field_; }

 private:
  std::size_t line_;
  std::string field_;
};

struct ExternalSample {
  std::string metric;  // "tokens_per_s", "time_us", ...
  std::string unit;
  double value = 0.0;
};

struct ExternalRun {
  std::string tool;          // "llama-bench" | "test-backend-ops"
  std::string build_commit;  // the tool's build_commit ("unknown" when the file says so)
  std::string backend;       // llama-bench's backends, test-backend-ops' backend_name
  std::string gpu_name;      // llama-bench's gpu_info, test-backend-ops' device description
  std::string profile;       // the series' profile (see docs/interop.md)
  std::string path;          // "pp" | "tg" | "pp+tg" (llama-bench), the weight type (MUL_MAT)
  std::optional<std::string> weight_type;
  std::string settings;      // the tool's own series settings, "name=value; ..." (llama_bench.h)
  std::int64_t tokens = 0;
  double tokens_per_s = 0.0;
  std::optional<double> gemm_ms;
  std::int64_t started_ms = 0;    // the row's test_time
  std::string options_json = "{}";  // every other field of the row, as it was
  std::vector<ExternalSample> samples;
  std::size_t line = 0;  // where the row is in the file
};

}  // namespace qgate::interop
