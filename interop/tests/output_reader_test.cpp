// The output readers (check_reader, read_figure, read_output, describe_reader) on small stdout
// texts: JSON pointer, regex, llama-bench JSON and JSONL; the figures and outputs they give, and the
// messages for what is missing, malformed or not a positive number.
#include "qgate/interop/output_reader.h"

#include <gtest/gtest.h>

#include <string>

namespace qgate::interop {
namespace {

v1::OutputReader reader(v1::OutputFormat format, const std::string& expression = "") {
  v1::OutputReader r;
  r.set_format(format);
  r.set_expression(expression);
  return r;
}

v1::OutputReader pointer(const std::string& p) { return reader(v1::OUTPUT_FORMAT_JSON_POINTER, p); }
v1::OutputReader regex(const std::string& re) { return reader(v1::OUTPUT_FORMAT_REGEX, re); }

std::string figure_error(const v1::OutputReader& r, std::string_view printed) {
  try {
    const double value = read_figure(r, printed);
    return "no error (read " + std::to_string(value) + ")";
  } catch (const OutputReadError& e) {
    return e.what();
  }
}

std::string output_error(const v1::OutputReader& r, std::string_view printed) {
  try {
    read_output(r, printed);
    return "no error";
  } catch (const OutputReadError& e) {
    return e.what();
  }
}

// --- JSON pointer ---

TEST(ReadFigure, PointerToANumber) {
  EXPECT_DOUBLE_EQ(read_figure(pointer("/results/0/tps"), R"({"results":[{"tps":123.5},{"tps":9}]})"), 123.5);
  EXPECT_DOUBLE_EQ(read_figure(pointer("/results/1/tps"), R"({"results":[{"tps":123.5},{"tps":9}]})"), 9.0);
  EXPECT_DOUBLE_EQ(read_figure(pointer("/tps"), "{\"tps\": 42}\n"), 42.0);
}

TEST(ReadFigure, PointerToANumericString) {
  EXPECT_DOUBLE_EQ(read_figure(pointer("/tps"), R"({"tps":"42.25"})"), 42.25);
  EXPECT_DOUBLE_EQ(read_figure(pointer("/tps"), R"({"tps":" 7.5 "})"), 7.5);
  EXPECT_DOUBLE_EQ(read_figure(pointer("/tps"), R"({"tps":"1e3"})"), 1000.0);
}

TEST(ReadFigure, PointerThatNamesNothingIsNamedInTheError) {
  const std::string printed = R"({"results":[{"tps":123.5}]})";
  EXPECT_EQ(figure_error(pointer("/results/1/tps"), printed),
            "json-pointer /results/1/tps: the pointer names nothing in the document; stdout was \"" + printed + "\"");
  EXPECT_EQ(figure_error(pointer("/speed"), printed),
            "json-pointer /speed: the pointer names nothing in the document; stdout was \"" + printed + "\"");
  EXPECT_EQ(output_error(pointer("/out"), printed),
            "json-pointer /out: the pointer names nothing in the document; stdout was \"" + printed + "\"");
}

TEST(ReadFigure, LogLinesBeforeTheJsonAreSkipped) {
  EXPECT_DOUBLE_EQ(read_figure(pointer("/tps"), "loading model: done\nwarmup 3 runs\n{\"tps\": 7.5}\n"), 7.5);
  EXPECT_DOUBLE_EQ(read_figure(pointer("/0/tps"), "starting\n[{\"tps\": 11}]\n"), 11.0);
  // A log line with a bracket is passed over: the document is the first line that parses to the end.
  EXPECT_DOUBLE_EQ(read_figure(pointer("/tps"), "[info] loading {7 tensors}\n{\"tps\": 9}\n"), 9.0);
}

TEST(ReadFigure, StdoutThatIsNotJson) {
  EXPECT_EQ(figure_error(pointer("/tps"), "speed: 12 t/s\n"),
            "json-pointer /tps: stdout is not a JSON document; stdout was \"speed: 12 t/s \"");
  EXPECT_EQ(figure_error(pointer("/tps"), ""), "json-pointer /tps: stdout is not a JSON document; stdout was (nothing)");
  EXPECT_EQ(figure_error(pointer("/tps"), "{\"tps\": 12"),
            "json-pointer /tps: stdout is not a JSON document; stdout was \"{\"tps\": 12\"");
}

TEST(ReadFigure, LongStdoutIsShortenedInTheMessage) {
  const std::string printed(500, 'x');
  const std::string message = figure_error(pointer("/tps"), printed);
  EXPECT_EQ(message, "json-pointer /tps: stdout is not a JSON document; stdout was \"" + std::string(160, 'x') + "...\"");
}

// --- regex ---

TEST(ReadFigure, RegexCaptureGroupIsTheFigure) {
  // The whole match ("1234.5 t/s") is not a number, so this only passes when the group is used.
  EXPECT_DOUBLE_EQ(read_figure(regex("([0-9.]+) t/s"), "prompt: 512 tokens\neval: 1234.5 t/s\n"), 1234.5);
  // The first match in the text wins.
  EXPECT_DOUBLE_EQ(read_figure(regex("([0-9.]+) t/s"), "pp 10.5 t/s\ntg 20.5 t/s\n"), 10.5);
}

TEST(ReadFigure, RegexWithoutAGroupUsesTheWholeMatch) {
  EXPECT_DOUBLE_EQ(read_figure(regex("[0-9]+\\.[0-9]+"), "speed 88.25 tok/s"), 88.25);
  // A first group that did not take part in the match: the whole match.
  EXPECT_DOUBLE_EQ(read_figure(regex("(x)?[0-9]+"), "run 1: 64"), 1.0);
}

TEST(ReadFigure, RegexThatDoesNotMatch) {
  EXPECT_EQ(figure_error(regex("([0-9.]+) t/s"), "nothing measured\n"),
            "regex ([0-9.]+) t/s: no match; stdout was \"nothing measured \"");
  EXPECT_EQ(output_error(regex("tokens: (.*)"), "no tokens"), "regex tokens: (.*): no match; stdout was \"no tokens\"");
}

// --- figures that are not numbers or not positive ---

TEST(ReadFigure, NonNumericFigureIsRefused) {
  EXPECT_EQ(figure_error(pointer("/tps"), R"({"tps":"fast"})"),
            "json-pointer /tps: \"fast\" is not a number; stdout was \"{\"tps\":\"fast\"}\"");
  EXPECT_EQ(figure_error(pointer("/tps"), R"({"tps":"12 t/s"})"),
            "json-pointer /tps: \"12 t/s\" is not a number; stdout was \"{\"tps\":\"12 t/s\"}\"");
  EXPECT_EQ(figure_error(pointer("/tps"), R"({"tps":""})"),
            "json-pointer /tps: \"\" is not a number; stdout was \"{\"tps\":\"\"}\"");
  EXPECT_EQ(figure_error(pointer("/tps"), R"({"tps":true})"),
            "json-pointer /tps: the value true is not a number; stdout was \"{\"tps\":true}\"");
  EXPECT_EQ(figure_error(pointer("/tps"), R"({"tps":[1]})"),
            "json-pointer /tps: the value [1] is not a number; stdout was \"{\"tps\":[1]}\"");
  EXPECT_EQ(figure_error(pointer("/tps"), R"({"tps":null})"),
            "json-pointer /tps: the value null is not a number; stdout was \"{\"tps\":null}\"");
  EXPECT_EQ(figure_error(regex("speed (\\S+)"), "speed 12abc"),
            "regex speed (\\S+): \"12abc\" is not a number; stdout was \"speed 12abc\"");
}

TEST(ReadFigure, ZeroNegativeAndNonFiniteFiguresAreRefused) {
  EXPECT_EQ(figure_error(pointer("/tps"), R"({"tps":0})"),
            "json-pointer /tps: the figure 0.000000 is not positive; stdout was \"{\"tps\":0}\"");
  EXPECT_EQ(figure_error(pointer("/tps"), R"({"tps":-3.5})"),
            "json-pointer /tps: the figure -3.500000 is not positive; stdout was \"{\"tps\":-3.5}\"");
  EXPECT_EQ(figure_error(pointer("/tps"), R"({"tps":"nan"})"),
            "json-pointer /tps: the figure nan is not positive; stdout was \"{\"tps\":\"nan\"}\"");
  EXPECT_NE(figure_error(pointer("/tps"), R"({"tps":"inf"})").find("the figure inf is not positive"), std::string::npos);
  EXPECT_NE(figure_error(regex("speed (\\S+)"), "speed NaN").find("is not positive"), std::string::npos);
  EXPECT_NE(figure_error(regex("speed (\\S+)"), "speed -1").find("the figure -1.000000 is not positive"),
            std::string::npos);
}

// --- llama-bench ---

constexpr const char* kLlamaBenchJson = R"([
  {"model_type": "llama 7B Q4_K - Medium", "n_prompt": 512, "n_gen": 0, "avg_ns": 250000000,
   "avg_ts": 2048.5, "stddev_ts": 3.25, "tokens": [1, 15043, 29991]},
  {"model_type": "llama 7B Q4_K - Medium", "n_prompt": 0, "n_gen": 128, "avg_ns": 900000000,
   "avg_ts": 142.25, "stddev_ts": 0.5, "tokens": [2, 3]}
])";

TEST(ReadFigure, LlamaBenchJsonFirstTestsAvgTs) {
  EXPECT_DOUBLE_EQ(read_figure(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSON), kLlamaBenchJson), 2048.5);
}

TEST(ReadFigure, LlamaBenchJsonNamedField) {
  EXPECT_DOUBLE_EQ(read_figure(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSON, "stddev_ts"), kLlamaBenchJson), 3.25);
  EXPECT_DOUBLE_EQ(read_figure(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSON, "avg_ns"), kLlamaBenchJson), 250000000.0);
  const std::string missing = figure_error(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSON, "samples_ts"), kLlamaBenchJson);
  EXPECT_EQ(missing.rfind("llama-bench-json samples_ts: the first test has no field \"samples_ts\"; stdout was \"[", 0),
            0u)
      << missing;
}

TEST(ReadFigure, LlamaBenchJsonThatIsNotAnArrayOfTests) {
  EXPECT_EQ(figure_error(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSON), R"({"avg_ts": 5})"),
            "llama-bench-json: expected llama-bench's JSON array of tests; stdout was \"{\"avg_ts\": 5}\"");
  EXPECT_EQ(figure_error(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSON), "[]"),
            "llama-bench-json: expected llama-bench's JSON array of tests; stdout was \"[]\"");
  EXPECT_EQ(figure_error(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSON), "[5]"),
            "llama-bench-json: expected llama-bench's JSON array of tests; stdout was \"[5]\"");
}

TEST(ReadFigure, LlamaBenchJsonlSkipsBlankLinesAndTakesTheFirstTest) {
  const std::string printed = "\n   \n\t\r\n{\"avg_ts\": 512.5, \"tokens\": [7, 8]}\n{\"avg_ts\": 64.0, \"tokens\": [9]}\n";
  EXPECT_DOUBLE_EQ(read_figure(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSONL), printed), 512.5);
  const ProgramOutput out = read_output(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSONL), printed);
  EXPECT_TRUE(out.is_tokens);
  EXPECT_EQ(out.tokens, (std::vector<int64_t>{7, 8}));
  // Windows line ends and no final newline.
  EXPECT_DOUBLE_EQ(read_figure(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSONL), "\r\n{\"avg_ts\": 3.5}\r\n"), 3.5);
  EXPECT_DOUBLE_EQ(read_figure(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSONL, "n"), "{\"n\": 2}"), 2.0);
}

TEST(ReadFigure, LlamaBenchJsonlWithoutATestLine) {
  EXPECT_EQ(figure_error(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSONL), "\n\n"),
            "llama-bench-jsonl: expected llama-bench's JSON lines (one test object per line); stdout was \"  \"");
  EXPECT_EQ(figure_error(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSONL), "[1, 2]\nnot json\n"),
            "llama-bench-jsonl: expected llama-bench's JSON lines (one test object per line); stdout was "
            "\"[1, 2] not json \"");
}

// --- outputs ---

TEST(ReadOutput, IntegerArrayIsTokens) {
  const ProgramOutput out = read_output(pointer("/tokens"), R"({"tokens":[1, 15043, -1, 0]})");
  EXPECT_TRUE(out.is_tokens);
  EXPECT_EQ(out.tokens, (std::vector<int64_t>{1, 15043, -1, 0}));
  EXPECT_EQ(out.text, "");

  const ProgramOutput empty = read_output(pointer("/tokens"), R"({"tokens":[]})");
  EXPECT_TRUE(empty.is_tokens);
  EXPECT_TRUE(empty.tokens.empty());
}

TEST(ReadOutput, LlamaBenchDefaultFieldIsTokens) {
  const ProgramOutput out = read_output(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSON), kLlamaBenchJson);
  EXPECT_TRUE(out.is_tokens);
  EXPECT_EQ(out.tokens, (std::vector<int64_t>{1, 15043, 29991}));
  const ProgramOutput named = read_output(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSON, "model_type"), kLlamaBenchJson);
  EXPECT_FALSE(named.is_tokens);
  EXPECT_EQ(named.text, "llama 7B Q4_K - Medium");
  EXPECT_EQ(output_error(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSONL), "{\"avg_ts\": 5}\n"),
            "llama-bench-jsonl: the first test has no field \"tokens\"; stdout was \"{\"avg_ts\": 5} \"");
}

TEST(ReadOutput, StringIsText) {
  const ProgramOutput out = read_output(pointer("/text"), R"({"text":"The capital of France is Paris.\n"})");
  EXPECT_FALSE(out.is_tokens);
  EXPECT_TRUE(out.tokens.empty());
  EXPECT_EQ(out.text, "The capital of France is Paris.\n");
}

TEST(ReadOutput, OtherJsonIsItsDump) {
  const ProgramOutput object = read_output(pointer("/out"), R"({"out": {"b": 2, "a": [1.5, true]}})");
  EXPECT_FALSE(object.is_tokens);
  EXPECT_EQ(object.text, R"({"a":[1.5,true],"b":2})");
  const ProgramOutput number = read_output(pointer("/out"), R"({"out": 17})");
  EXPECT_FALSE(number.is_tokens);
  EXPECT_EQ(number.text, "17");
  const ProgramOutput floats = read_output(pointer("/out"), R"({"out": [1.0, 2.5]})");
  EXPECT_FALSE(floats.is_tokens);
  EXPECT_EQ(floats.text, "[1.0,2.5]");
}

TEST(ReadOutput, MixedArrayIsText) {
  const ProgramOutput out = read_output(pointer("/tokens"), R"({"tokens":[1, 2, "three", 4]})");
  EXPECT_FALSE(out.is_tokens);
  EXPECT_TRUE(out.tokens.empty());
  EXPECT_EQ(out.text, R"([1,2,"three",4])");
}

TEST(ReadOutput, RegexOutputIsTheCapturedText) {
  const ProgramOutput out = read_output(regex("output: (.*)"), "load 3 ms\noutput: 1 2 3\ndone\n");
  EXPECT_FALSE(out.is_tokens);
  EXPECT_EQ(out.text, "1 2 3");
  const ProgramOutput whole = read_output(regex("[a-z]+ [0-9]+"), "-- abc 12 --");
  EXPECT_EQ(whole.text, "abc 12");
}

// --- check_reader and describe_reader ---

TEST(CheckReader, GoodReadersPass) {
  EXPECT_EQ(check_reader(pointer("/results/0/tps")), "");
  EXPECT_EQ(check_reader(pointer("")), "");  // the whole document
  EXPECT_EQ(check_reader(regex("([0-9.]+) t/s")), "");
  EXPECT_EQ(check_reader(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSON)), "");
  EXPECT_EQ(check_reader(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSONL, "avg_ts")), "");
}

TEST(CheckReader, BadRegexIsRefusedWithItsText) {
  const std::string bad = check_reader(regex("(["));
  EXPECT_EQ(bad.rfind("bad regex \"([\": ", 0), 0u) << bad;
  EXPECT_GT(bad.size(), std::string("bad regex \"([\": ").size()) << "no reason from the regex library";
  EXPECT_EQ(check_reader(regex("")), "a regex reader needs an expression");
  // read_figure and read_output refuse it with the same message rather than throwing regex_error.
  EXPECT_EQ(figure_error(regex("(["), "12"), bad);
  EXPECT_EQ(output_error(regex("(["), "12"), bad);
}

TEST(CheckReader, BadPointerIsRefusedWithItsText) {
  EXPECT_EQ(check_reader(pointer("a")), "bad JSON pointer \"a\" (it starts with '/', e.g. /results/0/tps)");
  EXPECT_EQ(check_reader(pointer("results/0")),
            "bad JSON pointer \"results/0\" (it starts with '/', e.g. /results/0/tps)");
  EXPECT_EQ(figure_error(pointer("tps"), R"({"tps": 1})"),
            "bad JSON pointer \"tps\" (it starts with '/', e.g. /results/0/tps)");
  EXPECT_EQ(output_error(pointer("tps"), R"({"tps": 1})"),
            "bad JSON pointer \"tps\" (it starts with '/', e.g. /results/0/tps)");
}

TEST(CheckReader, UnspecifiedFormatIsRefused) {
  const std::string why = "no output format given (json-pointer, regex, llama-bench-json or llama-bench-jsonl)";
  EXPECT_EQ(check_reader(v1::OutputReader()), why);
  EXPECT_EQ(check_reader(reader(v1::OUTPUT_FORMAT_UNSPECIFIED, "/tps")), why);
  EXPECT_EQ(figure_error(v1::OutputReader(), R"({"tps": 1})"), why);
  EXPECT_EQ(output_error(v1::OutputReader(), R"({"tps": 1})"), why);
}

TEST(DescribeReader, FormatWordAndExpression) {
  EXPECT_EQ(describe_reader(pointer("/results/0/tps")), "json-pointer /results/0/tps");
  EXPECT_EQ(describe_reader(regex("([0-9.]+) t/s")), "regex ([0-9.]+) t/s");
  EXPECT_EQ(describe_reader(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSON)), "llama-bench-json");
  EXPECT_EQ(describe_reader(reader(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSONL, "avg_ts")), "llama-bench-jsonl avg_ts");
  EXPECT_EQ(describe_reader(v1::OutputReader()), "none");
}

}  // namespace
}  // namespace qgate::interop
