// One entry point for `qgate import`: the file's text and a format (or auto) in, ExternalRuns and
// test-backend-ops' correctness checks out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "qgate/interop/external_run.h"
#include "qgate/interop/test_backend_ops.h"

namespace qgate::interop {

/// The formats `qgate import --format` accepts, "auto" first.
const std::vector<std::string>& import_formats();

struct ParsedImport {
  std::string format;  // the format read (auto resolved)
  std::vector<ExternalRun> runs;
  std::vector<BackendOpsCheck> checks;  // test-backend-ops' correctness cases (its test mode)
  std::size_t skipped = 0;  // rows read but not imported (test-backend-ops: other ops, unsupported, other modes)
};

/// `file_name` only helps `auto` (its extension). `file_time_ms` is the time of the rows of a format
/// that has none (llama-bench's markdown): the file's modification time; 0 refuses such a file.
/// Throws ImportError for a bad file (line, field) and std::invalid_argument for an unknown format.
ParsedImport parse_import(const std::string& text, const std::string& format, const std::string& file_name,
                          std::int64_t file_time_ms = 0);

}  // namespace qgate::interop
