// Runs the built qgate binary (QGATE_CLI_PATH) and checks what a script sees: the exit code and the
// single "qgate: ..." line on stderr, for an absent daemon and for mistakes caught before any call.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("qgate_cli_test." + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `env` is prepended as VAR=value words; QGATE_SERVER and the data dir are pinned so the
  // caller's environment cannot point the binary at a live daemon.
  Result run(const std::string& args, const std::string& env = "") {
    const fs::path out = dir_ / "stdout";
    const fs::path err = dir_ / "stderr";
    const std::string command = "env -u QGATE_SERVER QGATE_DATA_DIR=" + (dir_ / "data").string() +
                                " " + env + " " + QGATE_CLI_PATH + " " + args + " >" +
                                out.string() + " 2>" + err.string() + " </dev/null";
    const int status = std::system(command.c_str());
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  fs::path write_file(const std::string& name, const std::string& bytes) {
    const fs::path path = dir_ / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  static bool one_line(const std::string& text) {
    return !text.empty() && text.back() == '\n' && text.find('\n') == text.size() - 1;
  }

  fs::path dir_;
};

// Under --json a script reads stdout: an error is a document there too, and still a line on stderr.
TEST_F(CliTest, UnderJsonAnErrorIsAJsonDocumentOnStdout) {
  const Result r = run("--server unix:///nonexistent/sock --json jobs");
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(r.err.rfind("qgate: cannot reach qgated at unix:///nonexistent/sock: ", 0), 0u) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["schema_version"], 1) << r.out;
  EXPECT_EQ(doc["error"]["exit_code"], 3) << r.out;
  EXPECT_EQ(doc["error"]["message"].get<std::string>().rfind("cannot reach qgated at unix:///nonexistent/sock: ", 0), 0u)
      << r.out;
}

TEST_F(CliTest, VersionNamesTheJsonSchema) {
  const Result r = run("--version");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("qgate ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find(", --json schema 1\n"), std::string::npos) << r.out;
}

TEST_F(CliTest, NoDaemonIsOneClearLineAndExit3) {
  const Result r = run("--server unix:///nonexistent/sock jobs");
  EXPECT_EQ(r.code, 3);
  EXPECT_TRUE(one_line(r.err)) << r.err;
  EXPECT_EQ(r.err.rfind("qgate: cannot reach qgated at unix:///nonexistent/sock: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find("(is it running? start it with qgated)\n"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(CliTest, GlobalOptionsMayFollowTheCommand) {
  const Result r = run("device --json --server /nonexistent/other.sock --timeout 5");
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(r.err.rfind("qgate: cannot reach qgated at unix:///nonexistent/other.sock: ", 0), 0u)
      << r.err;
}

TEST_F(CliTest, ServerComesFromTheEnvironmentWhenNotGiven) {
  const Result r = run("builds", "QGATE_SERVER=/nonexistent/env.sock");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("cannot reach qgated at unix:///nonexistent/env.sock"), std::string::npos)
      << r.err;
}

TEST_F(CliTest, MissingBuildFileIsReportedBeforeAnyCall) {
  // The server address is unreachable too: the message proves the file was checked first.
  const Result r = run("--server unix:///nonexistent/sock submit --build /nonexistent.so --name x");
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(r.err, "qgate: build file /nonexistent.so does not exist\n");
}

TEST_F(CliTest, EmptyBuildFileIsRefused) {
  const fs::path empty = write_file("empty.so", "");
  const Result r = run("--server unix:///nonexistent/sock submit --build " + empty.string() +
                       " --name x");
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(r.err, "qgate: build file " + empty.string() + " is empty\n");
}

TEST_F(CliTest, GateWithoutBaselineIsAUsageError) {
  const fs::path so = write_file("k.so", "ELF");
  const Result r = run("--server unix:///nonexistent/sock submit --build " + so.string() +
                       " --name x --kind gate");
  EXPECT_EQ(r.code, 3);
  EXPECT_TRUE(one_line(r.err)) << r.err;
  EXPECT_NE(r.err.find("--kind gate needs --baseline"), std::string::npos) << r.err;
}

TEST_F(CliTest, ParserErrorsAreOneLineAndExit3) {
  for (const char* args : {"", "jobs --state bogus", "trend --profile p --since 3x",
                           "submit --name x", "frobnicate", "show notanumber"}) {
    const Result r = run(std::string("--server unix:///nonexistent/sock ") + args);
    EXPECT_EQ(r.code, 3) << args;
    EXPECT_TRUE(one_line(r.err)) << args << ": " << r.err;
    EXPECT_EQ(r.err.rfind("qgate: ", 0), 0u) << args << ": " << r.err;
    EXPECT_EQ(r.err.find("cannot reach"), std::string::npos) << args << ": " << r.err;
  }
}

TEST_F(CliTest, BadWordsAreNamedInTheMessage) {
  EXPECT_EQ(run("frobnicate").err, "qgate: unknown command 'frobnicate' (see qgate --help)\n");
  EXPECT_EQ(run("show notanumber").err,
            "qgate: job: 'notanumber' is not a positive whole number (see qgate --help)\n");
  EXPECT_EQ(run("--timeout 0 jobs").err,
            "qgate: --timeout: '0' is not a number of seconds above 0 (see qgate --help)\n");
}

TEST_F(CliTest, AFlagTypoNamesTheFlagItWasMostLikelyMeantToBe) {
  const Result r = run("--server unix:///nonexistent/sock jobs --stat done");
  EXPECT_EQ(r.code, 3);
  EXPECT_TRUE(one_line(r.err)) << r.err;
  EXPECT_NE(r.err.find("(did you mean --state?)"), std::string::npos) << r.err;
  EXPECT_NE(run("--server unix:///nonexistent/sock trend --profle x").err.find("(did you mean --profile?)"),
            std::string::npos);
  // Nothing near: no guess.
  EXPECT_EQ(run("--server unix:///nonexistent/sock jobs --frobnicate").err.find("did you mean"), std::string::npos);
  // Under --json the parse error is a JSON document on stdout too, with the same message.
  const Result j = run("--json --server unix:///nonexistent/sock jobs --stat done");
  EXPECT_EQ(j.code, 3);
  EXPECT_NE(j.out.find("\"error\""), std::string::npos) << j.out;
  EXPECT_NE(j.out.find("did you mean --state?"), std::string::npos) << j.out;
}

TEST_F(CliTest, ANonFiniteThresholdIsRefusedNotDefaulted) {
  const fs::path so = write_file("k.so", "ELF");
  for (const char* bad : {"nan", "inf", "-0.1", "1.5"}) {
    const Result r = run("--server unix:///nonexistent/sock submit --build " + so.string() + " --name x --threshold " +
                         bad);
    EXPECT_EQ(r.code, 3) << bad;
    EXPECT_NE(r.err.find("is not a fraction in [0, 0.99]"), std::string::npos) << bad << ": " << r.err;
    EXPECT_EQ(r.err.find("cannot reach"), std::string::npos) << "refused before any call: " << r.err;
  }
}

TEST_F(CliTest, ABadGpuModelUuidOrLabelIsAUsageErrorNamingTheFlagBeforeAnyCall) {
  const fs::path so = write_file("k.so", "ELF");
  const std::string submit = "--server unix:///nonexistent/sock submit --build " + so.string() + " --name x ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {submit + "--gpu-model '!!'", "qgate: --gpu-model: '!!': a GPU model needs a letter or digit, e.g. H200"},
      {submit + "--gpu-model ''", "qgate: --gpu-model: '': a GPU model is 1 to 64 characters"},
      {submit + "--gpu-uuid 'GPU 1'", "qgate: --gpu-uuid: 'GPU 1' is not a GPU uuid"},
      {submit + "--label sm90 --label 'rack 2'", "qgate: --label: label 'rack 2' must be 1 to 64 of letters"},
      {submit + "--label sm90,,rack2", "qgate: --label: 'sm90,,rack2' holds an empty label"},
      {"--server unix:///nonexistent/sock ab --build " + so.string() + " --name x --label _x",
       "qgate: --label: label '_x' must be"},
      {"--server unix:///nonexistent/sock command --name x --run true --gpu-model '*'",
       "qgate: --gpu-model: '*': a GPU model needs a letter or digit"},
  };
  for (const auto& [args, message] : cases) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 3) << args;
    EXPECT_TRUE(one_line(r.err)) << args << ": " << r.err;
    EXPECT_EQ(r.err.rfind(message, 0), 0u) << args << ": " << r.err;
    EXPECT_NE(r.err.find("(see qgate --help)\n"), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(r.err.find("cannot reach"), std::string::npos) << "refused before any call: " << r.err;
  }
  // A bad label is reported before a missing build file: the flags are checked first.
  EXPECT_EQ(run("submit --build /nonexistent.so --name x --label '-x'").err.rfind("qgate: --label: ", 0), 0u);
}

TEST_F(CliTest, HostFiltersAndRoutingFlagsAreInTheHelp) {
  for (const char* command : {"jobs", "trend", "regressions", "compare", "device", "export"}) {
    const Result r = run(std::string(command) + " --help");
    EXPECT_EQ(r.code, 0) << command;
    EXPECT_NE(r.out.find("--host"), std::string::npos) << command << ": " << r.out;
  }
  for (const char* command : {"submit", "ab", "command"}) {
    const Result r = run(std::string(command) + " --help");
    for (const char* flag : {"--gpu-model", "--gpu-uuid", "--label"})
      EXPECT_NE(r.out.find(flag), std::string::npos) << command << " " << flag;
  }
}

TEST_F(CliTest, HelpListsTheCommandsAndExits0) {
  const Result r = run("--help");
  EXPECT_EQ(r.code, 0);
  for (const char* command : {"submit", "ab", "jobs", "show", "watch", "cancel", "builds",
                              "device", "trend", "regressions", "compare", "export", "import"})
    EXPECT_NE(r.out.find(command), std::string::npos) << command;
}

}  // namespace
