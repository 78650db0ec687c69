// Output readers: JSON pointer, regex and llama-bench JSON/JSONL over a program's stdout.
#include "qgate/interop/output_reader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <regex>

#include "qgate/v1/record_words.h"

namespace qgate::interop {
namespace {

using nlohmann::json;

std::string excerpt(std::string_view text) {
  constexpr size_t kMax = 160;
  std::string out(text.substr(0, kMax));
  for (char& c : out)
    if (c == '\n' || c == '\r') c = ' ';
  if (text.size() > kMax) out += "...";
  return out.empty() ? "(nothing)" : "\"" + out + "\"";
}

[[noreturn]] void fail(const v1::OutputReader& reader, const std::string& why, std::string_view printed) {
  throw OutputReadError(describe_reader(reader) + ": " + why + "; stdout was " + excerpt(printed));
}

/// stdout as one JSON document; programs that log lines before their JSON are read from the first
/// line that starts with '{' or '[' and parses to the end ("[info] loading" lines are passed over).
json parse_document(const v1::OutputReader& reader, std::string_view printed) {
  json doc = json::parse(printed.begin(), printed.end(), nullptr, false);
  if (!doc.is_discarded()) return doc;
  for (size_t line = 0; line < printed.size();) {
    const size_t start = printed.find_first_not_of(" \t", line);
    if (start != std::string_view::npos && (printed[start] == '{' || printed[start] == '[')) {
      doc = json::parse(printed.begin() + long(start), printed.end(), nullptr, false);
      if (!doc.is_discarded()) return doc;
    }
    const size_t next = printed.find('\n', line);
    if (next == std::string_view::npos) break;
    line = next + 1;
  }
  fail(reader, "stdout is not a JSON document", printed);
}

/// llama-bench's first test: the first element of the -o json array, or the first JSON line.
json first_test(const v1::OutputReader& reader, std::string_view printed) {
  if (reader.format() == v1::OUTPUT_FORMAT_LLAMA_BENCH_JSON) {
    json doc = parse_document(reader, printed);
    if (!doc.is_array() || doc.empty() || !doc.front().is_object())
      fail(reader, "expected llama-bench's JSON array of tests", printed);
    return doc.front();
  }
  size_t pos = 0;
  while (pos < printed.size()) {
    size_t end = printed.find('\n', pos);
    if (end == std::string_view::npos) end = printed.size();
    std::string_view line = printed.substr(pos, end - pos);
    pos = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    json doc = json::parse(line.begin(), line.end(), nullptr, false);
    if (doc.is_object()) return doc;
  }
  fail(reader, "expected llama-bench's JSON lines (one test object per line)", printed);
}

/// The JSON value the reader points at (pointer and llama-bench formats).
json pointed_value(const v1::OutputReader& reader, std::string_view printed, const char* default_field) {
  if (reader.format() == v1::OUTPUT_FORMAT_JSON_POINTER) {
    const json doc = parse_document(reader, printed);
    const json::json_pointer pointer(reader.expression());
    if (!doc.contains(pointer)) fail(reader, "the pointer names nothing in the document", printed);
    return doc.at(pointer);
  }
  const json test = first_test(reader, printed);
  const std::string field = reader.expression().empty() ? default_field : reader.expression();
  if (!test.contains(field)) fail(reader, "the first test has no field \"" + field + "\"", printed);
  return test.at(field);
}

/// The regex's first capture group, else its whole match.
std::string matched_text(const v1::OutputReader& reader, std::string_view printed) {
  const std::regex re(reader.expression(), std::regex::ECMAScript | std::regex::multiline);
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_search(printed.begin(), printed.end(), m, re)) fail(reader, "no match", printed);
  return m.size() > 1 && m[1].matched ? m[1].str() : m[0].str();
}

double to_figure(const v1::OutputReader& reader, const std::string& text, std::string_view printed) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    fail(reader, "\"" + text + "\" is not a number", printed);
  }
  if (used != text.size() && text.find_first_not_of(" \t", used) != std::string::npos)
    fail(reader, "\"" + text + "\" is not a number", printed);
  return value;
}

}  // namespace

std::string describe_reader(const v1::OutputReader& reader) {
  std::string out(words::word(reader.format()));
  if (!reader.expression().empty()) out += " " + reader.expression();
  return out;
}

std::string check_reader(const v1::OutputReader& reader) {
  switch (reader.format()) {
    case v1::OUTPUT_FORMAT_JSON_POINTER:
      try {
        json::json_pointer pointer(reader.expression());
      } catch (const json::exception& e) {
        return "bad JSON pointer \"" + reader.expression() + "\" (it starts with '/', e.g. /results/0/tps)";
      }
      return "";
    case v1::OUTPUT_FORMAT_REGEX:
      if (reader.expression().empty()) return "a regex reader needs an expression";
      try {
        std::regex re(reader.expression(), std::regex::ECMAScript | std::regex::multiline);
      } catch (const std::regex_error& e) {
        return "bad regex \"" + reader.expression() + "\": " + e.what();
      }
      return "";
    case v1::OUTPUT_FORMAT_LLAMA_BENCH_JSON:
    case v1::OUTPUT_FORMAT_LLAMA_BENCH_JSONL:
      return "";
    default:
      return "no output format given (json-pointer, regex, llama-bench-json or llama-bench-jsonl)";
  }
}

double read_figure(const v1::OutputReader& reader, std::string_view printed) {
  if (const std::string bad = check_reader(reader); !bad.empty()) throw OutputReadError(bad);
  double value = 0;
  if (reader.format() == v1::OUTPUT_FORMAT_REGEX) {
    value = to_figure(reader, matched_text(reader, printed), printed);
  } else {
    const json v = pointed_value(reader, printed, "avg_ts");
    if (v.is_number()) value = v.get<double>();
    else if (v.is_string()) value = to_figure(reader, v.get<std::string>(), printed);
    else fail(reader, "the value " + v.dump() + " is not a number", printed);
  }
  if (!std::isfinite(value) || value <= 0) fail(reader, "the figure " + std::to_string(value) + " is not positive", printed);
  return value;
}

ProgramOutput read_output(const v1::OutputReader& reader, std::string_view printed) {
  if (const std::string bad = check_reader(reader); !bad.empty()) throw OutputReadError(bad);
  ProgramOutput out;
  if (reader.format() == v1::OUTPUT_FORMAT_REGEX) {
    out.text = matched_text(reader, printed);
    return out;
  }
  const json v = pointed_value(reader, printed, "tokens");
  if (v.is_array() && std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_number_integer(); })) {
    out.is_tokens = true;
    for (const auto& e : v) out.tokens.push_back(e.get<int64_t>());
  } else if (v.is_string()) {
    out.text = v.get<std::string>();
  } else {
    out.text = v.dump();
  }
  return out;
}

}  // namespace qgate::interop
