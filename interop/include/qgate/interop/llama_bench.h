// llama-bench's results (tools/llama-bench, -o md|sql|json|jsonl|csv) as ExternalRuns, and the column
// set both the importer and `qgate export --format llama-bench-sql` use. Mapping: docs/interop.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "qgate/interop/external_run.h"
#include "qgate/interop/table_rows.h"

namespace qgate::interop {

enum class SqlType { Text, Integer, Real };

struct LlamaBenchColumn {
  std::string_view name;
  SqlType type;
};

/// The columns `qgate export --format llama-bench-sql` writes, in order, with their SQL types:
/// today's llama-bench sql printer's (load_mode, devices, no_host, fit_*, ...) plus use_mmap, which
/// compare-llama-bench.py still keys on (docs/interop.md). The importer reads columns by name, so
/// files with other column sets load too (the JSON forms add samples_ns and samples_ts arrays).
const std::vector<LlamaBenchColumn>& llama_bench_columns();
std::string_view sql_type_name(SqlType type);

/// One run per row. Needs build_commit, model_type, n_prompt, n_gen, test_time and avg_ts; throws
/// ImportError naming the row's line and the field otherwise.
std::vector<ExternalRun> llama_bench_runs(const std::vector<TableRow>& rows);

/// llama-bench's default output, a markdown table (`-o md`), as rows named like the other formats'
/// fields: its short headers (ngl, fa, sm, lm, ...) become the long names (n_gpu_layers, flash_attn,
/// split_mode, load_mode, ...); `test` (pp512, tg128, pp512+tg128, "pp512 @ d4096") becomes n_prompt,
/// n_gen and n_depth; `t/s` ("123.45 ± 1.23") becomes avg_ts and stddev_ts; the closing
/// `build: <commit> (<number>)` line gives every row its build_commit and build_number. The table
/// has no times: every row gets `test_time_ms`. Lines before the table (a tool's preamble) are skipped.
/// Throws ImportError naming the line and column of a cell it cannot read.
std::vector<TableRow> read_llama_bench_markdown(const std::string& text, std::int64_t test_time_ms);

/// "2026-11-30T01:22:59Z" as Unix milliseconds; throws ImportError for any other shape.
std::int64_t parse_test_time(const std::string& text, std::size_t line, const std::string& field);
/// The inverse, for the exporter.
std::string format_test_time(std::int64_t unix_ms);

}  // namespace qgate::interop
