// Rows of a tabular result file as column -> text, each with the line it came from: the one shape
// the SQL, CSV and JSON readers hand to the per-tool mappers (llama_bench.h, test_backend_ops.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace qgate::interop {

struct TableRow {
  std::size_t line = 0;  // 1-based line of the row in the file
  std::string table;     // the SQL table name; "" for CSV and JSON
  std::map<std::string, std::optional<std::string>> fields;  // none = SQL NULL / JSON null

  /// The field's text; throws ImportError naming the line and field when it is missing or null.
  const std::string& text(const std::string& field) const;
  /// The field's text, or `fallback` when missing or null.
  std::string text_or(const std::string& field, const std::string& fallback) const;
  std::int64_t integer(const std::string& field) const;
  double real(const std::string& field) const;
};

/// INSERT INTO t (c1, c2) VALUES ('a', 1.5); statements, one row each. CREATE TABLE and other
/// statements are skipped, and so are lines before the first statement (tools print a preamble).
std::vector<TableRow> read_sql_inserts(const std::string& text);
/// A header line, then one row a line; fields may be "quoted" with "" for a quote.
std::vector<TableRow> read_csv(const std::string& text);
/// A JSON array of flat objects. Arrays and objects inside a row are kept as their JSON text.
std::vector<TableRow> read_json_array(const std::string& text);
/// One flat JSON object a line; blank lines are skipped.
std::vector<TableRow> read_json_lines(const std::string& text);

}  // namespace qgate::interop
