// test-backend-ops' perf results (-o MUL_MAT --output sql) as ExternalRuns: one per MUL_MAT perf
// row, tok/s = n / time; and its correctness mode's cases as typed checks. Mapping: docs/interop.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "qgate/interop/external_run.h"
#include "qgate/interop/table_rows.h"

namespace qgate::interop {

struct TestBackendOpsRuns {
  std::vector<ExternalRun> runs;
  std::size_t skipped = 0;  // rows of other ops or modes, and unsupported ones
};

/// `preamble` is the whole file: the tool's "Device N: NAME, ..." lines name the GPU when a row's
/// device_description is empty.
TestBackendOpsRuns test_backend_ops_runs(const std::vector<TableRow>& rows, const std::string& preamble);

/// One case of test-backend-ops' correctness mode (`test-backend-ops test`, the default): an op with
/// its parameters, run on a backend and compared with the CPU backend. docs/interop.md lists the
/// formats read.
struct BackendOpsCheck {
  enum class Outcome { Passed, Failed, NotSupported };

  std::string op;                            // "MUL_MAT"
  std::string params;                        // as printed: "type_a=q4_0,type_b=f32,m=16,n=1,k=256,..."
  std::map<std::string, std::string> types;  // the params named type*: {type_a: q4_0, type_b: f32}
  std::string backend;                       // "CUDA0"
  Outcome outcome = Outcome::Passed;
  std::optional<double> nmse;         // the error the tool printed (NMSE, or ERR in newer builds); failures only
  std::optional<double> error_bound;  // the case's bound printed beside it
  std::string failure;                // what the tool said of a failure: "NaN at index 3 (...)", "compare failed", ...
  std::string build_commit;           // SQL only; "" elsewhere
  std::optional<std::int64_t> test_time_ms;  // SQL only
  std::size_t line = 0;               // where the case is in the file (1-based)
};

struct BackendOpsChecks {
  std::string format;  // "console" | "sql" | "csv"
  std::vector<BackendOpsCheck> checks;
  std::size_t skipped = 0;  // rows of another mode (perf, support, grad)
};

/// A bad correctness file: the message is "<file>: line N, field F: what".
class BackendOpsFileError : public std::runtime_error {
 public:
  BackendOpsFileError(const std::string& file, std::size_t line, const std::string& field, const std::string& what);
  const std::string& file() const { return file_; }
  std::size_t line() const { return line_; }
  const std::string& field() const { return field_; }

 private:
  std::string file_;
  std::size_t line_;
  std::string field_;
};

/// test-backend-ops' correctness output as typed rows: its console output (`Backend i/n: NAME`
/// sections, `  OP(params): OK|FAIL|not supported [...]` lines, with `[OP] NMSE = x > bound` or
/// `[OP] ERR = x > bound` before or after the case's name), or `--output sql` (table test_backend_ops)
/// or `--output csv` rows of test_mode "test". `file_name` names the file in errors. Throws
/// BackendOpsFileError for anything it cannot read, naming the line and field.
BackendOpsChecks read_test_backend_ops_checks(const std::string& text, const std::string& file_name);

}  // namespace qgate::interop
