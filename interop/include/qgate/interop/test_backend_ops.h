// test-backend-ops' perf results (-o MUL_MAT --output sql) as ExternalRuns: one per MUL_MAT perf
// row, tok/s = n / time. Mapping: docs/interop.md.
#pragma once

#include <cstddef>
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

}  // namespace qgate::interop
