// Readers for the tabular shapes llama.cpp's tools write: SQL INSERT statements, CSV, a JSON array
// and JSON lines. Each yields TableRows with the line they start on, so a bad value is reported
// where it is.
#include "qgate/interop/table_rows.h"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "qgate/interop/external_run.h"

namespace qgate::interop {

ImportError::ImportError(std::size_t line, std::string field, const std::string& what)
    : std::runtime_error(field.empty() ? fmt::format("line {}: {}", line, what)
                                       : fmt::format("line {}, field {}: {}", line, field, what)),
      line_(line),
      field_(std::move(field)) {}

const std::string& TableRow::text(const std::string& field) const {
  const auto it = fields.find(field);
  if (it == fields.end()) throw ImportError(line, field, "missing");
  if (!it->second) throw ImportError(line, field, "is null");
  return *it->second;
}

std::string TableRow::text_or(const std::string& field, const std::string& fallback) const {
  const auto it = fields.find(field);
  return it == fields.end() || !it->second ? fallback : *it->second;
}

std::int64_t TableRow::integer(const std::string& field) const {
  const std::string& s = text(field);
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size())
    throw ImportError(line, field, fmt::format("'{}' is not an integer", s));
  return value;
}

double TableRow::real(const std::string& field) const {
  const std::string& s = text(field);
  char* end = nullptr;
  errno = 0;
  const double value = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE)
    throw ImportError(line, field, fmt::format("'{}' is not a number", s));
  return value;
}

namespace {

// A cursor over the whole text that knows its line.
class Cursor {
 public:
  explicit Cursor(const std::string& text) : text_(text) {}
  bool done() const { return pos_ >= text_.size(); }
  char peek() const { return done() ? '\0' : text_[pos_]; }
  char take() {
    const char c = text_[pos_++];
    if (c == '\n') ++line_;
    return c;
  }
  void skip_space() {
    while (!done() && std::isspace(static_cast<unsigned char>(peek()))) take();
  }
  bool starts_with(std::string_view word) const {
    if (text_.size() - pos_ < word.size()) return false;
    for (std::size_t i = 0; i < word.size(); ++i)
      if (std::toupper(static_cast<unsigned char>(text_[pos_ + i])) != word[i]) return false;
    return true;
  }
  void skip_line() {
    while (!done() && peek() != '\n') take();
    if (!done()) take();
  }
  std::size_t line() const { return line_; }

 private:
  const std::string& text_;
  std::size_t pos_ = 0;
  std::size_t line_ = 1;
};

std::string sql_identifier(Cursor& c) {
  c.skip_space();
  std::string out;
  if (c.peek() == '"' || c.peek() == '`') {
    const char quote = c.take();
    while (!c.done() && c.peek() != quote) out += c.take();
    if (c.done()) throw ImportError(c.line(), "", "unterminated quoted name");
    c.take();
    return out;
  }
  while (!c.done() && (std::isalnum(static_cast<unsigned char>(c.peek())) || c.peek() == '_')) out += c.take();
  if (out.empty()) throw ImportError(c.line(), "", fmt::format("expected a name, found '{}'", c.peek()));
  return out;
}

void expect(Cursor& c, char wanted) {
  c.skip_space();
  if (c.peek() != wanted)
    throw ImportError(c.line(), "", fmt::format("expected '{}', found '{}'", wanted, c.done() ? "end of file" : std::string(1, c.peek())));
  c.take();
}

// 'text' with '' for a quote, a bare number, or NULL.
std::optional<std::string> sql_value(Cursor& c, const std::string& column) {
  c.skip_space();
  if (c.peek() == '\'') {
    c.take();
    std::string out;
    for (;;) {
      if (c.done()) throw ImportError(c.line(), column, "unterminated string");
      const char ch = c.take();
      if (ch == '\'') {
        if (c.peek() != '\'') return out;
        c.take();
      }
      out += ch;
    }
  }
  std::string out;
  while (!c.done() && c.peek() != ',' && c.peek() != ')' && !std::isspace(static_cast<unsigned char>(c.peek())))
    out += c.take();
  if (out.empty()) throw ImportError(c.line(), column, "missing value");
  if (out == "NULL" || out == "null") return std::nullopt;
  return out;
}

TableRow sql_insert(Cursor& c) {
  TableRow row;
  row.line = c.line();
  for (int i = 0; i < 6; ++i) c.take();  // INSERT
  c.skip_space();
  if (!c.starts_with("INTO")) throw ImportError(c.line(), "", "expected INTO after INSERT");
  for (int i = 0; i < 4; ++i) c.take();
  row.table = sql_identifier(c);
  std::vector<std::string> columns;
  expect(c, '(');
  for (;;) {
    columns.push_back(sql_identifier(c));
    c.skip_space();
    if (c.peek() == ')') break;
    expect(c, ',');
  }
  c.take();
  c.skip_space();
  if (!c.starts_with("VALUES")) throw ImportError(c.line(), "", "expected VALUES");
  for (int i = 0; i < 6; ++i) c.take();
  expect(c, '(');
  for (std::size_t i = 0;; ++i) {
    if (i >= columns.size()) throw ImportError(c.line(), "", fmt::format("more values than the {} columns", columns.size()));
    row.fields[columns[i]] = sql_value(c, columns[i]);
    c.skip_space();
    if (c.peek() == ')') {
      if (i + 1 != columns.size())
        throw ImportError(c.line(), columns[i + 1], fmt::format("{} values for {} columns", i + 1, columns.size()));
      break;
    }
    expect(c, ',');
  }
  c.take();
  expect(c, ';');
  return row;
}

// Skips a statement other than INSERT up to its terminating ';' outside quotes.
void skip_statement(Cursor& c) {
  bool quoted = false;
  while (!c.done()) {
    const char ch = c.take();
    if (ch == '\'') quoted = !quoted;
    if (ch == ';' && !quoted) return;
  }
}

std::vector<std::string> csv_fields(const std::string& line, std::size_t line_no) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          out.back() += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        out.back() += ch;
      }
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      out.emplace_back();
    } else if (ch != '\r') {
      out.back() += ch;
    }
  }
  if (quoted) throw ImportError(line_no, "", "unterminated quoted field");
  return out;
}

TableRow json_row(const nlohmann::json& object, std::size_t line) {
  if (!object.is_object()) throw ImportError(line, "", "expected a JSON object");
  TableRow row;
  row.line = line;
  for (const auto& [key, value] : object.items()) {
    if (value.is_null()) row.fields[key] = std::nullopt;
    else if (value.is_string()) row.fields[key] = value.get<std::string>();
    else if (value.is_boolean()) row.fields[key] = value.get<bool>() ? "1" : "0";
    else if (value.is_number_integer()) row.fields[key] = std::to_string(value.get<std::int64_t>());
    else if (value.is_number()) row.fields[key] = fmt::format("{}", value.get<double>());
    else row.fields[key] = value.dump();
  }
  return row;
}

}  // namespace

std::vector<TableRow> read_sql_inserts(const std::string& text) {
  std::vector<TableRow> rows;
  Cursor c(text);
  for (;;) {
    c.skip_space();
    if (c.done()) break;
    if (c.starts_with("INSERT")) rows.push_back(sql_insert(c));
    else if (c.starts_with("CREATE") || c.starts_with("BEGIN") || c.starts_with("COMMIT")) skip_statement(c);
    else c.skip_line();  // a tool's preamble, a comment
  }
  return rows;
}

std::vector<TableRow> read_csv(const std::string& text) {
  std::vector<TableRow> rows;
  std::vector<std::string> header;
  std::size_t line_no = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line.empty() || line == "\r") continue;
    auto fields = csv_fields(line, line_no);
    if (header.empty()) {
      header = std::move(fields);
      continue;
    }
    if (fields.size() != header.size())
      throw ImportError(line_no, "", fmt::format("{} fields, the header has {}", fields.size(), header.size()));
    TableRow row;
    row.line = line_no;
    for (std::size_t i = 0; i < header.size(); ++i) row.fields[header[i]] = std::move(fields[i]);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<TableRow> read_json_array(const std::string& text) {
  // The line each top-level element starts on, found by a scan that respects strings.
  std::vector<std::size_t> starts;
  std::size_t line = 1;
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (ch == '\n') ++line;
    if (in_string) {
      if (ch == '\\') ++i;
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') in_string = true;
    else if (ch == '[' || ch == '{') {
      if (depth == 1) starts.push_back(line);
      ++depth;
    } else if (ch == ']' || ch == '}') --depth;
  }
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw ImportError(1, "", fmt::format("not valid JSON: {}", e.what()));
  }
  if (!doc.is_array()) throw ImportError(1, "", "expected a JSON array of results");
  std::vector<TableRow> rows;
  for (std::size_t i = 0; i < doc.size(); ++i) rows.push_back(json_row(doc[i], i < starts.size() ? starts[i] : 1));
  return rows;
}

std::vector<TableRow> read_json_lines(const std::string& text) {
  std::vector<TableRow> rows;
  std::size_t line_no = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json object;
    try {
      object = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      throw ImportError(line_no, "", fmt::format("not valid JSON: {}", e.what()));
    }
    rows.push_back(json_row(object, line_no));
  }
  return rows;
}

}  // namespace qgate::interop
