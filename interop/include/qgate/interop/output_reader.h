// Reading what a program printed: its tok/s figure and the output a command job compares across
// arms. Four ways in (v1::OutputFormat): an RFC 6901 JSON pointer into stdout, an ECMAScript regex
// (its first capture group, else the whole match; ^ and $ match at line ends), and llama-bench's `-o json` / `-o jsonl` (the
// first test's field: avg_ts for the figure, "tokens" for the output, unless the expression names
// another field).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "qgate/v1/worker.pb.h"

namespace qgate::interop {

/// What was missing or malformed; the message names the reader and shows a bit of the text.
class OutputReadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An output to compare: a list of token ids (a JSON array of integers), else text.
struct ProgramOutput {
  bool is_tokens = false;
  std::vector<int64_t> tokens;
  std::string text;
};

/// "" when the reader can be used; otherwise why not (no format, a regex that does not compile, a
/// JSON pointer that does not start with '/').
std::string check_reader(const v1::OutputReader& reader);

/// The figure the reader points at: a JSON number, or a string or capture that is one. Throws
/// OutputReadError when it is not there or not a finite, positive number.
double read_figure(const v1::OutputReader& reader, std::string_view printed);

/// The output the reader points at. Throws OutputReadError when it is not there.
ProgramOutput read_output(const v1::OutputReader& reader, std::string_view printed);

/// "json-pointer /results/0/tps"-style description for messages.
std::string describe_reader(const v1::OutputReader& reader);

}  // namespace qgate::interop
