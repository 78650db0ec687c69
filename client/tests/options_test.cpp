// Tests of the CLI's argument rules: --since, the server address and the job kind; a command job's
// command line split into words, its output readers and its VAR=a|b toggle; a job's fleet routing
// (--gpu-model, --gpu-uuid, --label).
#include "qgate/client/options.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "qgate/common/default_paths.h"
#include "qgate/v1/state_words.h"

namespace qgate::client {
namespace {

constexpr std::int64_t kNow = 1'764'468'000'000;

TEST(ParseSince, EveryUnit) {
  EXPECT_EQ(parse_since("45s", kNow), kNow - 45'000);
  EXPECT_EQ(parse_since("90m", kNow), kNow - 90 * 60'000);
  EXPECT_EQ(parse_since("12h", kNow), kNow - 12 * 3'600'000LL);
  EXPECT_EQ(parse_since("30d", kNow), kNow - 30 * 86'400'000LL);
  EXPECT_EQ(parse_since("2w", kNow), kNow - 14 * 86'400'000LL);
}

TEST(ParseSince, RejectsWhatIsNotNUnit) {
  for (const char* bad : {"", "d", "30", "30x", "-3d", "+3d", "3.5d", " 3d", "3 d", "0d", "3D",
                          "99999999999999999999d", "999999999w"}) {
    EXPECT_THROW(parse_since(bad, kNow), UsageError) << "'" << bad << "'";
  }
}

TEST(ParseSince, MessageNamesTheTextAndTheUnits) {
  try {
    parse_since("3x", kNow);
    FAIL() << "no throw";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--since: '3x' is not a duration like 30d (units: s, m, h, d, w)");
  }
}

TEST(ResolveKind, BaselineImpliesGate) {
  EXPECT_EQ(resolve_kind("", "ref"), v1::JOB_KIND_GATE);
  EXPECT_EQ(resolve_kind("gate", "ref"), v1::JOB_KIND_GATE);
}

TEST(ResolveKind, DefaultsToAbWithoutBaseline) {
  EXPECT_EQ(resolve_kind("", ""), v1::JOB_KIND_AB);
  EXPECT_EQ(resolve_kind("ab", ""), v1::JOB_KIND_AB);
  EXPECT_EQ(resolve_kind("parity", ""), v1::JOB_KIND_PARITY);
}

TEST(ResolveKind, ContradictionsAreUsageErrors) {
  EXPECT_THROW(resolve_kind("gate", ""), UsageError);
  EXPECT_THROW(resolve_kind("ab", "ref"), UsageError);
  EXPECT_THROW(resolve_kind("parity", "ref"), UsageError);
  EXPECT_THROW(resolve_kind("perf", ""), UsageError);
}

TEST(ServerAddress, FlagThenEnvironmentThenDefault) {
  EXPECT_EQ(resolve_server_address(std::string("h:1"), "unix:///env"), "h:1");
  EXPECT_EQ(resolve_server_address(std::nullopt, "unix:///env"), "unix:///env");
  EXPECT_EQ(resolve_server_address(std::nullopt, ""), paths::default_server_address());
  EXPECT_EQ(resolve_server_address(std::nullopt, nullptr), paths::default_server_address());
}

TEST(ServerAddress, NormalizedToGrpcTargets) {
  EXPECT_EQ(normalize_address("/run/q.sock"), "unix:///run/q.sock");
  EXPECT_EQ(normalize_address("unix:///run/q.sock"), "unix:///run/q.sock");
  EXPECT_EQ(normalize_address("gpu-host:7443"), "gpu-host:7443");
  EXPECT_THROW(normalize_address(""), UsageError);
  EXPECT_THROW(normalize_address("unix://"), UsageError);
}

TEST(ParseState, NamesAndAll) {
  EXPECT_EQ(parse_state(""), v1::JOB_STATE_UNSPECIFIED);
  EXPECT_EQ(parse_state("running"), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(parse_state("cancelled"), v1::JOB_STATE_CANCELLED);
  EXPECT_THROW(parse_state("canceled"), UsageError);
}

TEST(ParseState, EveryWordNamesTheStateThatPrintsAsIt) {
  // The domain's six states and the API's waiting-quiet, each read and printed as one word.
  ASSERT_EQ(words::job_state_words().size(), 7u);
  for (const std::string& word : words::job_state_words()) {
    EXPECT_EQ(words::state_word(parse_state(word)), word);
  }
  EXPECT_EQ(parse_state("waiting-quiet"), v1::JOB_STATE_WAITING_QUIET);
  EXPECT_EQ(words::from_proto(v1::JOB_STATE_WAITING_QUIET), qgate::JobState::Queued);
  try {
    parse_state("paused");
    FAIL() << "an unknown state was accepted";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("queued, waiting-quiet, running"), std::string::npos) << error.what();
  }
}

TEST(NearestWord, OneOrTwoEditsAwayIsAGuessFurtherIsNot) {
  const std::vector<std::string> flags{"--state", "--since", "--profile", "--limit"};
  EXPECT_EQ(nearest_word("--stat", flags), "--state");
  EXPECT_EQ(nearest_word("--profle", flags), "--profile");
  EXPECT_EQ(nearest_word("--sicne", flags), "--since") << "two neighbours swapped are one edit";
  EXPECT_EQ(nearest_word("--limt", flags), "--limit");
  EXPECT_EQ(nearest_word("--frobnicate", flags), std::nullopt);
  EXPECT_EQ(nearest_word("-x", {"-y"}), std::nullopt) << "one edit of two characters is not a typo";
  EXPECT_EQ(nearest_word("--state", {}), std::nullopt);
}

TEST(BuildName, OnlySafeCharacters) {
  EXPECT_NO_THROW(check_build_name("mmq-tile64_v2.1"));
  EXPECT_THROW(check_build_name(""), UsageError);
  EXPECT_THROW(check_build_name("../etc"), UsageError);
  EXPECT_THROW(check_build_name("a b"), UsageError);
  EXPECT_THROW(check_build_name(".."), UsageError);
}


using Words = std::vector<std::string>;

std::string usage_error_of(void (*call)(const std::string&), const std::string& text) {
  try {
    call(text);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

std::string split_error(const std::string& text) {
  return usage_error_of([](const std::string& t) { split_command_line(t); }, text);
}

std::string reader_error(const std::string& text) {
  return usage_error_of([](const std::string& t) { parse_output_reader(t); }, text);
}

std::string toggle_error(const std::string& text) {
  return usage_error_of([](const std::string& t) {
    v1::CommandSpec command;
    parse_env_toggle(t, &command);
  }, text);
}

TEST(SplitCommandLine, PlainWords) {
  EXPECT_EQ(split_command_line("llama-bench -m model.gguf -p 512"), (Words{"llama-bench", "-m", "model.gguf", "-p", "512"}));
  EXPECT_EQ(split_command_line("prog"), (Words{"prog"}));
}

TEST(SplitCommandLine, RunsOfBlanksSeparateOnce) {
  EXPECT_EQ(split_command_line("  a   b\t\tc \n d  "), (Words{"a", "b", "c", "d"}));
}

TEST(SplitCommandLine, SingleQuotesAreLiteral) {
  EXPECT_EQ(split_command_line("echo 'a  b' c"), (Words{"echo", "a  b", "c"}));
  // A backslash inside single quotes is kept, and so are double quotes and $.
  EXPECT_EQ(split_command_line(R"(echo 'C:\dir\n "x" $HOME')"), (Words{"echo", R"(C:\dir\n "x" $HOME)"}));
}

TEST(SplitCommandLine, DoubleQuotesWithEscapes) {
  EXPECT_EQ(split_command_line(R"(say "he said \"hi\"")"), (Words{"say", R"(he said "hi")"}));
  EXPECT_EQ(split_command_line(R"(say "a\\b")"), (Words{"say", R"(a\b)"}));
  EXPECT_EQ(split_command_line(R"(say "\$x \`y\`")"), (Words{"say", "$x `y`"}));
  // Any other backslash in double quotes stays, as in a POSIX shell.
  EXPECT_EQ(split_command_line(R"(say "a\nb\'c")"), (Words{"say", R"(a\nb\'c)"}));
  EXPECT_EQ(split_command_line(R"(say "two  blanks 'and' quotes")"), (Words{"say", "two  blanks 'and' quotes"}));
}

TEST(SplitCommandLine, BackslashOutsideQuotesEscapesTheNextCharacter) {
  EXPECT_EQ(split_command_line(R"(ls a\ b c\'d \"e\" f\\g)"), (Words{"ls", "a b", "c'd", "\"e\"", R"(f\g)"}));
}

TEST(SplitCommandLine, QuotedPiecesJoinTheirWord) {
  EXPECT_EQ(split_command_line(R"(--prompt="The capital"' of France' x)"),
            (Words{"--prompt=The capital of France", "x"}));
}

TEST(SplitCommandLine, EmptyQuotedWordIsKept) {
  EXPECT_EQ(split_command_line(R"(prog "" x)"), (Words{"prog", "", "x"}));
  EXPECT_EQ(split_command_line("prog '' x"), (Words{"prog", "", "x"}));
  EXPECT_EQ(split_command_line(R"(prog "")"), (Words{"prog", ""}));
  EXPECT_EQ(split_command_line(R"("")"), (Words{""}));
}

TEST(SplitCommandLine, UnclosedQuotesAndTrailingBackslashAreUsageErrors) {
  EXPECT_EQ(split_error("echo 'abc"), "the command has an unclosed ' quote");
  EXPECT_EQ(split_error("echo \"abc"), "the command has an unclosed \" quote");
  EXPECT_EQ(split_error(R"(echo "abc\")"), "the command has an unclosed \" quote");
  EXPECT_EQ(split_error(R"(echo "abc\)"), "the command has an unclosed \" quote");
  EXPECT_EQ(split_error(R"(echo abc\)"), "the command ends in a backslash");
  EXPECT_EQ(split_error("\\"), "the command ends in a backslash");
}

TEST(SplitCommandLine, EmptyTextIsAUsageError) {
  EXPECT_EQ(split_error(""), "the command is empty");
  EXPECT_EQ(split_error(" \t\n "), "the command is empty");
}

TEST(ParseOutputReader, LlamaBenchFormats) {
  v1::OutputReader reader = parse_output_reader("llama-bench-json");
  EXPECT_EQ(reader.format(), v1::OUTPUT_FORMAT_LLAMA_BENCH_JSON);
  EXPECT_EQ(reader.expression(), "");
  reader = parse_output_reader("llama-bench-jsonl:avg_ts");
  EXPECT_EQ(reader.format(), v1::OUTPUT_FORMAT_LLAMA_BENCH_JSONL);
  EXPECT_EQ(reader.expression(), "avg_ts");
  reader = parse_output_reader("llama-bench-jsonl");
  EXPECT_EQ(reader.format(), v1::OUTPUT_FORMAT_LLAMA_BENCH_JSONL);
  EXPECT_EQ(reader.expression(), "");
}

TEST(ParseOutputReader, JsonPointer) {
  const v1::OutputReader reader = parse_output_reader("json-pointer:/a/0");
  EXPECT_EQ(reader.format(), v1::OUTPUT_FORMAT_JSON_POINTER);
  EXPECT_EQ(reader.expression(), "/a/0");
}

TEST(ParseOutputReader, RegexKeepsEverythingAfterTheFirstColon) {
  v1::OutputReader reader = parse_output_reader("regex:([0-9.]+) t/s");
  EXPECT_EQ(reader.format(), v1::OUTPUT_FORMAT_REGEX);
  EXPECT_EQ(reader.expression(), "([0-9.]+) t/s");
  reader = parse_output_reader("regex:eval: ([0-9.]+)");
  EXPECT_EQ(reader.expression(), "eval: ([0-9.]+)");
}

TEST(ParseOutputReader, BadReadersAreUsageErrors) {
  const std::string forms = "is not an output reader: llama-bench-json[:FIELD], llama-bench-jsonl[:FIELD], "
                            "json-pointer:/PATH or regex:EXPR";
  EXPECT_EQ(reader_error("csv"), "'csv' " + forms);
  EXPECT_EQ(reader_error("csv:/a"), "'csv:/a' " + forms);
  EXPECT_EQ(reader_error(""), "'' " + forms);
  EXPECT_EQ(reader_error("JSON-POINTER:/a"), "'JSON-POINTER:/a' " + forms);
  EXPECT_EQ(reader_error(":/a"), "':/a' " + forms);
  const std::string regex = reader_error("regex:([");
  EXPECT_EQ(regex.rfind("bad regex \"([\": ", 0), 0u) << regex;
  EXPECT_EQ(reader_error("regex"), "a regex reader needs an expression");
  EXPECT_EQ(reader_error("regex:"), "a regex reader needs an expression");
  EXPECT_EQ(reader_error("json-pointer:a"), "bad JSON pointer \"a\" (it starts with '/', e.g. /results/0/tps)");
}

TEST(ParseEnvToggle, VariableAndTwoValues) {
  v1::CommandSpec command;
  parse_env_toggle("MINFER_MMQ=1|0", &command);
  EXPECT_EQ(command.toggle(), v1::COMMAND_TOGGLE_ENV);
  EXPECT_EQ(command.variable(), "MINFER_MMQ");
  EXPECT_EQ(command.value_a(), "1");
  EXPECT_EQ(command.value_b(), "0");

  v1::CommandSpec other;
  parse_env_toggle("X=a|b", &other);
  EXPECT_EQ(other.toggle(), v1::COMMAND_TOGGLE_ENV);
  EXPECT_EQ(other.variable(), "X");
  EXPECT_EQ(other.value_a(), "a");
  EXPECT_EQ(other.value_b(), "b");
}

TEST(ParseEnvToggle, MalformedTogglesAreUsageErrors) {
  for (const char* bad : {"X=1", "=1|0", "X", "", "X|1=0", "X1|0", "|="}) {
    EXPECT_EQ(toggle_error(bad), std::string("--toggle: '") + bad + "' is not VAR=a|b (e.g. MINFER_MMQ=1|0)") << bad;
  }
  EXPECT_EQ(toggle_error("X=1|1"), "--toggle: the two values are the same");
  EXPECT_EQ(toggle_error("X=|"), "--toggle: the two values are the same");
}

TEST(ParseGpuChoice, OneGpuOrASplitPair) {
  EXPECT_EQ(parse_gpu_choice("1", false), (std::vector<int>{1}));
  EXPECT_EQ(parse_gpu_choice("0,1", true), (std::vector<int>{0, 1}));
  EXPECT_EQ(parse_gpu_choice("3,2", true), (std::vector<int>{3, 2}));
}

TEST(ParseGpuChoice, AnythingElseIsAUsageError) {
  for (const char* bad : {"", "a", "-1", "0,", ",1", "1.5", "0;1", "99999"})
    EXPECT_THROW(parse_gpu_choice(bad, false), UsageError) << bad;
  EXPECT_THROW(parse_gpu_choice("0,1", false), UsageError);  // a pair is for --split-gpus
  EXPECT_THROW(parse_gpu_choice("0", true), UsageError);     // a split names two
  EXPECT_THROW(parse_gpu_choice("1,1", true), UsageError);
  EXPECT_THROW(parse_gpu_choice("0,1,2", true), UsageError);
}

std::string usage_error(const std::function<void()>& call) {
  try {
    call();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(GpuRouting, ModelUuidAndLabelsGoIntoTheSpec) {
  v1::JobSpec spec;
  set_gpu_routing(&spec, std::string("RTX 4090"), std::string("GPU-5a8e1c2d-0000"), {"sm90", "rack2,sm90", "a.b_c-1"});
  EXPECT_EQ(spec.gpu_model(), "RTX 4090");
  EXPECT_EQ(spec.gpu_uuid(), "GPU-5a8e1c2d-0000");
  // Comma-separated and repeated, then sorted without repeats: the form the daemon keeps.
  EXPECT_EQ(std::vector<std::string>(spec.labels().begin(), spec.labels().end()),
            (std::vector<std::string>{"a.b_c-1", "rack2", "sm90"}));
}

TEST(GpuRouting, NothingGivenLeavesTheJobToAnyDaemon) {
  v1::JobSpec spec;
  set_gpu_routing(&spec, std::nullopt, std::nullopt, {});
  EXPECT_EQ(spec.gpu_model(), "");
  EXPECT_EQ(spec.gpu_uuid(), "");
  EXPECT_EQ(spec.labels_size(), 0);
}

TEST(GpuRouting, ABadModelNamesTheFlagAndTheRule) {
  EXPECT_EQ(check_gpu_model("H200"), "H200");
  EXPECT_EQ(usage_error([] { check_gpu_model("--"); }),
            "--gpu-model: '--': a GPU model needs a letter or digit, e.g. H200");
  EXPECT_EQ(usage_error([] { check_gpu_model(std::string(65, 'A')); }).rfind("--gpu-model: '", 0), 0u);
  // Given but empty is a mistake (an unset shell variable), not "any GPU".
  EXPECT_EQ(usage_error([] { v1::JobSpec s; set_gpu_routing(&s, std::string(""), std::nullopt, {}); }),
            "--gpu-model: '': a GPU model is 1 to 64 characters, e.g. H200 or \"RTX 4090\"");
}

TEST(GpuRouting, ABadUuidNamesTheFlag) {
  EXPECT_EQ(check_gpu_uuid("MIG-GPU-5a8e/1/0"), "MIG-GPU-5a8e/1/0");
  for (const std::string bad : {std::string(""), std::string("GPU 1"), std::string("GPU-\t"), std::string(129, 'a')})
    EXPECT_EQ(usage_error([&] { check_gpu_uuid(bad); }).rfind("--gpu-uuid: '", 0), 0u) << bad;
}

TEST(GpuRouting, ABadLabelNamesTheFlagAndTheLabel) {
  EXPECT_EQ(usage_error([] { parse_labels({"rack 2"}); }),
            "--label: label 'rack 2' must be 1 to 64 of letters, digits, '.', '_' and '-', starting with a "
            "letter or digit");
  EXPECT_EQ(usage_error([] { parse_labels({"ok", "-x"}); }).rfind("--label: label '-x' must be", 0), 0u);
  for (const char* empty : {"", "a,,b", "a,", ",a"})
    EXPECT_EQ(usage_error([&] { parse_labels({empty}); }),
              std::string("--label: '") + empty + "' holds an empty label (labels are comma-separated)")
        << empty;
}

}  // namespace
}  // namespace qgate::client
