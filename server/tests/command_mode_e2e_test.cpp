// Command-mode jobs end to end: a real qgated started with --allow-commands and a token, driven by
// the real qgate CLI, running real programs (shell scripts written here, and qgate-prefill on a
// model with real quantized tensors) as the two arms. Covers the toggles, the readers, output
// identity, the dispositions of a crash, a hang and a missing figure, the clean environment and
// the job's own directory, and the refusals that keep commands off by default.
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "daemon_under_test.h"

namespace qgate::testing {
namespace {

/// An int64 of a --json document: protobuf's JSON writes int64 as a string, nlohmann as a number.
int64_t as_int(const json& value) {
  return value.is_string() ? std::stoll(value.get<std::string>()) : value.get<int64_t>();
}

class CommandModeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    token_ = d_.dir() + "/token";
    std::ofstream(token_) << "command-mode-test-token-0123456789\n";
    chmod(token_.c_str(), 0600);
  }

  void start_daemon(std::vector<std::string> extra = {}) {
    extra.insert(extra.end(), {"--allow-commands", "--auth-token-file", token_});
    // A variable of the daemon's own environment, which a command must not see.
    d_.in_child = [] { setenv("QGATE_DAEMON_SECRET", "do-not-leak", 1); };
    std::string why;
    ASSERT_TRUE(d_.try_start(extra, "", &why)) << why;
  }

  /// A shell script in the test's directory.
  std::string script(const std::string& name, const std::string& body) {
    const std::string path = d_.dir() + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body;
    chmod(path.c_str(), 0755);
    return path;
  }

  CliResult command(const std::string& args) {
    const std::string budget = args.find("--max-pairs") == std::string::npos ? " --max-pairs 4 " : " ";
    return d_.cli("--token-file " + token_ + " --json command --name eng" + budget + args);
  }

  json run_to_end(const std::string& args) {
    const CliResult r = command(args);
    EXPECT_EQ(r.code, 0) << r.err;
    if (r.code != 0) return json::object();
    const int64_t id = as_int(json_data(r, "submission")["job_id"]);
    const CliResult watched = d_.cli("watch " + std::to_string(id));
    (void)watched;
    return show(d_, id);
  }

  DaemonUnderTest d_;
  std::string token_;
};

// Prints a llama-bench JSON array: 200 tok/s with MINFER_MMQ=1, 100 without, and four tokens.
const char* kEngine =
    "if [ \"$MINFER_MMQ\" = 1 ]; then ts=200; else ts=100; fi\n"
    "echo \"[{\\\"avg_ts\\\": $ts.$$, \\\"n_prompt\\\": 512, \\\"tokens\\\": [7, 1, 8, 2]}]\"\n";

TEST_F(CommandModeTest, AToggledCommandIsGatedWithItsOutputsIdentical) {
  start_daemon();
  const json job = run_to_end("--run " + script("engine.sh", kEngine) + " --output llama-bench-json:tokens");
  ASSERT_EQ(state_of(job), "JOB_STATE_DONE") << job.dump(2);
  EXPECT_EQ(job.value("disposition", ""), "DISPOSITION_OK");
  const json& v = job["verdict"];
  EXPECT_EQ(v["arm_a"]["label"], "MINFER_MMQ=1");
  EXPECT_EQ(v["arm_b"]["label"], "MINFER_MMQ=0");
  EXPECT_NEAR(v["ratio"].get<double>(), 2.0, 0.05);
  EXPECT_NEAR(v["arm_a"]["tokens_per_s"].get<double>(), 200, 2);
  EXPECT_EQ(v["comparison"], "COMPARISON_DIFFERENT");
  ASSERT_TRUE(v.contains("identity")) << v.dump(2);
  EXPECT_TRUE(v["identity"].value("checked", false));
  EXPECT_TRUE(v["identity"].value("identical", false));
  EXPECT_EQ(v["identity"]["unit"], "token");
  EXPECT_EQ(as_int(v["identity"]["length"]), 4);
  // The runs are stored as any job's are: each arm's runs appear in the job's series.
  const CliResult trend = d_.cli("--json trend --profile command --since 1d");
  EXPECT_EQ(trend.code, 0) << trend.err;
  EXPECT_NE(trend.out.find("MINFER_MMQ=1"), std::string::npos) << trend.out;
  // One arm's series alone, by its path.
  const CliResult arm_b = d_.cli("trend --profile command --since 1d --path MINFER_MMQ=0");
  EXPECT_EQ(arm_b.code, 0) << arm_b.err;
  EXPECT_NE(arm_b.out.find("MINFER_MMQ=0"), std::string::npos) << arm_b.out;
  EXPECT_EQ(arm_b.out.find("MINFER_MMQ=1"), std::string::npos) << arm_b.out;
  // And the text report names the command, the arms and the identity.
  const CliResult text = d_.cli("show " + std::to_string(as_int(job["id"])));
  EXPECT_NE(text.out.find("identical: all 8 runs produced the same 4 tokens"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("MINFER_MMQ=1|0"), std::string::npos) << text.out;
}

TEST_F(CommandModeTest, OutputsThatDifferFailAtTheFirstDifferingToken) {
  start_daemon();
  const std::string engine = script("engine.sh",
                                    "if [ \"$MINFER_MMQ\" = 1 ]; then t=\"7, 1, 8, 2\"; else t=\"7, 1, 9, 2\"; fi\n"
                                    "echo \"{\\\"speed\\\": {\\\"tps\\\": 100.$$}, \\\"tokens\\\": [$t]}\"\n");
  const json job = run_to_end("--run " + engine + " --tok-s json-pointer:/speed/tps --output json-pointer:/tokens");
  ASSERT_EQ(state_of(job), "JOB_STATE_DONE") << job.dump(2);
  EXPECT_EQ(job["verdict"]["verdict"], "VERDICT_FAIL");
  EXPECT_EQ(job.value("disposition", ""), "DISPOSITION_INCORRECT");
  const json& identity = job["verdict"]["identity"];
  EXPECT_FALSE(identity.value("identical", true));
  EXPECT_EQ(as_int(identity["first_difference"]), 2);
  EXPECT_NE(identity["detail"].get<std::string>().find("8 vs 9"), std::string::npos) << identity.dump();
}

TEST_F(CommandModeTest, ASecondCommandPrintsTheOutputThatIsCompared) {
  start_daemon();
  // The timed command leaves its text in the job's directory; the output command prints it.
  const std::string engine = script("engine.sh",
                                    "if [ \"$MINFER_MMQ\" = 1 ]; then echo 'The quick brown fox' > out.txt;\n"
                                    "else echo 'The quick brown cat' > out.txt; fi\n"
                                    "echo \"[{\\\"avg_ts\\\": 50.$$}]\"\n");
  const json job = run_to_end("--run " + engine + " --output-run '/bin/cat out.txt' --output 'regex:^(.*)$'");
  ASSERT_EQ(state_of(job), "JOB_STATE_DONE") << job.dump(2);
  const json& identity = job["verdict"]["identity"];
  EXPECT_EQ(identity["unit"], "byte");
  EXPECT_EQ(as_int(identity["first_difference"]), 16) << identity.dump();
  EXPECT_EQ(job.value("disposition", ""), "DISPOSITION_INCORRECT");
}

TEST_F(CommandModeTest, TwoCommandsReadByRegexAreTheArms) {
  start_daemon();
  const std::string a = script("a.sh", "echo \"prompt eval: 150.$$ tokens per second\"\n");
  const std::string b = script("b.sh", "echo \"prompt eval: 100.$$ tokens per second\"\n");
  const json job = run_to_end("--run " + a + " --run-b " + b + " --tok-s 'regex:eval: ([0-9.]+) tokens'");
  ASSERT_EQ(state_of(job), "JOB_STATE_DONE") << job.dump(2);
  EXPECT_NEAR(job["verdict"]["ratio"].get<double>(), 1.5, 0.05);
  EXPECT_EQ(job["verdict"]["arm_b"]["label"], "command-b");
  EXPECT_FALSE(job["verdict"].contains("identity") && job["verdict"]["identity"].value("checked", false));
}

TEST_F(CommandModeTest, TwoBuildsAreSubstitutedIntoTheCommand) {
  start_daemon();
  // The baseline: a build stored by an earlier job.
  const int64_t first = submit_no_wait(d_, "--name base --kind parity --parity-shapes quick");
  d_.cli("watch " + std::to_string(first));
  const std::string engine = script("engine.sh",
                                    "case \"$1\" in *qgate_ref*) ts=100;; *) ts=0;; esac\n"
                                    "[ -f \"$1\" ] && echo \"[{\\\"avg_ts\\\": $ts.$$}]\"\n");
  const json job = run_to_end("--run '" + engine + " {build}' --build " + std::string(QGATE_REF_LIBRARY) +
                              " --baseline base");
  ASSERT_EQ(state_of(job), "JOB_STATE_DONE") << job.dump(2);
  EXPECT_NEAR(job["verdict"]["ratio"].get<double>(), 1.0, 0.01);
  EXPECT_EQ(job["verdict"]["arm_b"]["label"].get<std::string>().rfind("base@", 0), 0u);
}

TEST_F(CommandModeTest, TheCommandRunsInTheJobsDirectoryWithACleanEnvironment) {
  start_daemon();
  const std::string engine = script("engine.sh",
                                    "env > env-$MINFER_MMQ.txt; pwd > pwd.txt\n"
                                    "echo '[{\"avg_ts\": 10}]'\n");
  const json job = run_to_end("--run " + engine + " --env EXTRA_FLAG=on --max-pairs 2 --min-pairs 2");
  ASSERT_EQ(state_of(job), "JOB_STATE_DONE") << job.dump(2);
  const std::string workdir = d_.dir() + "/jobs/job-" + std::to_string(as_int(job["id"]));
  const std::string env_a = slurp(workdir + "/env-1.txt"), env_b = slurp(workdir + "/env-0.txt");
  EXPECT_NE(env_a.find("MINFER_MMQ=1"), std::string::npos) << env_a;
  EXPECT_NE(env_b.find("MINFER_MMQ=0"), std::string::npos) << env_b;
  EXPECT_NE(env_a.find("EXTRA_FLAG=on"), std::string::npos) << env_a;
  EXPECT_EQ(env_a.find("QGATE_DAEMON_SECRET"), std::string::npos) << env_a;
  EXPECT_EQ(slurp(workdir + "/pwd.txt"), workdir + "\n");
}

TEST_F(CommandModeTest, ACrashIsCrashedWithTheCommandsStderr) {
  start_daemon();
  const std::string engine = script("engine.sh", "echo 'engine: out of tiles' >&2\nkill -SEGV $$\n");
  const json job = run_to_end("--run " + engine);
  EXPECT_EQ(state_of(job), "JOB_STATE_FAILED") << job.dump(2);
  EXPECT_EQ(job.value("disposition", ""), "DISPOSITION_CRASHED");
  EXPECT_NE(job.value("disposition_detail", "").find("SIGSEGV"), std::string::npos) << job.dump(2);
  EXPECT_NE(job.value("error", "").find("engine: out of tiles"), std::string::npos) << job.dump(2);
}

TEST_F(CommandModeTest, AHangTimesOutAndNoFigureIsIncorrect) {
  start_daemon();
  const json hung = run_to_end("--run-timeout 2 --run " + script("hang.sh", "sleep 60\n"));
  EXPECT_EQ(state_of(hung), "JOB_STATE_FAILED") << hung.dump(2);
  EXPECT_EQ(hung.value("disposition", ""), "DISPOSITION_TIMEOUT") << hung.dump(2);
  const json mute = run_to_end("--run " + script("mute.sh", "echo 'all done'\n"));
  EXPECT_EQ(state_of(mute), "JOB_STATE_FAILED") << mute.dump(2);
  EXPECT_EQ(mute.value("disposition", ""), "DISPOSITION_INCORRECT");
  EXPECT_NE(mute.value("error", "").find("no tok/s figure"), std::string::npos) << mute.dump(2);
  const json missing = run_to_end("--run /nonexistent/engine");
  EXPECT_EQ(missing.value("disposition", ""), "DISPOSITION_REJECTED") << missing.dump(2);
  // The daemon goes on serving.
  EXPECT_EQ(d_.cli("jobs").code, 0);
}

TEST_F(CommandModeTest, CommandsAreRefusedUnlessAllowedAndTokenHeld) {
  // Off by default: a daemon without --allow-commands refuses, whatever the token.
  std::string why;
  ASSERT_TRUE(d_.try_start({"--auth-token-file", token_}, "", &why)) << why;
  CliResult r = command("--run /bin/true");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("--allow-commands"), std::string::npos) << r.err;
  d_.kill9();
  // Allowed, but the client holds no token: refused even on the unix socket.
  start_daemon();
  r = d_.cli("command --name eng --run /bin/true");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("token"), std::string::npos) << r.err;
  // A malformed reader or toggle is caught before anything runs.
  r = command("--run /bin/true --tok-s 'regex:(['");
  EXPECT_EQ(r.code, 3);
  EXPECT_NE(r.err.find("regex"), std::string::npos) << r.err;
  r = command("--run /bin/true --toggle \'MINFER_MMQ=1|1\'");
  EXPECT_EQ(r.code, 3);
  EXPECT_EQ(d_.cli("--json jobs").out.find("\"command\""), std::string::npos);
  d_.kill9();
  // --allow-commands without a token file: the daemon does not start.
  EXPECT_FALSE(d_.try_start({"--allow-commands"}, "", &why));
  EXPECT_NE(why.find("--auth-token-file"), std::string::npos) << why;
}

TEST_F(CommandModeTest, CompareAndRemeasureWorkOnCommandJobs) {
  // A quiet GPU, replayed, so a re-measure has a quiet window to start in.
  const std::string trace = d_.dir() + "/quiet.jsonl";
  {
    std::ofstream out(trace);
    for (int t = 0; t <= 1000; t += 100)
      out << R"({"t_ms":)" << t
          << R"(,"device_util":0,"sm_clock_mhz":1980,"max_sm_clock_mhz":1980,"clock_event_reasons":0,"foreign":[]})"
          << "\n";
  }
  start_daemon({"--replay-samples", trace, "--quiet-hold", "1"});
  const std::string v1 = script("v1.sh", "echo \"[{\\\"avg_ts\\\": 100.$$}]\"\n");
  const std::string v2 = script("v2.sh", "echo \"[{\\\"avg_ts\\\": 120.$$}]\"\n");
  const json first = run_to_end("--run " + v1 + " --commit c1");
  const CliResult r = d_.cli("--token-file " + token_ + " --json command --name eng --max-pairs 4 --commit c2 --run " + v2);
  ASSERT_EQ(r.code, 0) << r.err;
  const int64_t second = as_int(json_data(r, "submission")["job_id"]);
  d_.cli("watch " + std::to_string(second));
  ASSERT_EQ(state_of(first), "JOB_STATE_DONE") << first.dump(2);
  // Two command builds of one name compare like kernel builds: v2's MINFER_MMQ=1 arm is 1.2x v1's.
  const std::string b1 = std::to_string(as_int(first["build"]["id"]));
  const std::string b2 = std::to_string(as_int(show(d_, second)["build"]["id"]));
  const CliResult compared = d_.cli("--json compare " + b2 + " " + b1 + " --profile command");
  EXPECT_EQ(compared.code, 0) << compared.err << compared.out;
  const json rows = json_data(compared, "compare")["rows"];
  ASSERT_EQ(rows.size(), 2u) << compared.out;  // one series per arm: MINFER_MMQ=1 and MINFER_MMQ=0
  for (const json& row : rows) EXPECT_NEAR(row["ratio"].get<double>(), 1.2, 0.01) << row.dump();
  // A re-measure runs the same command again, in a quiet window.
  const CliResult again = d_.cli("--token-file " + token_ + " --json remeasure " + std::to_string(as_int(first["id"])) +
                                 " --deadline 60s");
  ASSERT_EQ(again.code, 0) << again.err;
  const int64_t redo = as_int(json_data(again, "remeasure")["jobs"][0]["id"]);
  d_.cli("watch " + std::to_string(redo));
  const json redone = show(d_, redo);
  EXPECT_EQ(state_of(redone), "JOB_STATE_DONE") << redone.dump(2);
  EXPECT_EQ(redone["spec"]["kind"], "JOB_KIND_COMMAND");
  EXPECT_NEAR(redone["verdict"]["arm_a"]["tokens_per_s"].get<double>(), 100, 1.5) << redone.dump(2);
}

TEST_F(CommandModeTest, QgatePrefillIsGatedMmqAgainstF16WithIdenticalTokens) {
  start_daemon();
  const std::string model = d_.dir() + "/tiny.gguf";
  const int written = std::system((std::string(QGATE_PREFILL_BINARY) + " write-model --shape tiny --out " + model +
                                   " 2>/dev/null").c_str());
  ASSERT_EQ(written, 0);
  const json job = run_to_end("--run '" + std::string(QGATE_PREFILL_BINARY) + " run --model " + model + " --build " +
                              QGATE_REF_LIBRARY + " --backend cpu --threads 1 --prompt 32 --repetitions 1'" +
                              " --output llama-bench-json:tokens --max-pairs 2 --min-pairs 2");
  ASSERT_EQ(state_of(job), "JOB_STATE_DONE") << job.dump(2);
  EXPECT_EQ(job.value("disposition", ""), "DISPOSITION_OK") << job.dump(2);
  const json& identity = job["verdict"]["identity"];
  EXPECT_TRUE(identity.value("identical", false)) << identity.dump();
  EXPECT_EQ(as_int(identity["length"]), 32);
  EXPECT_GT(job["verdict"]["arm_a"]["tokens_per_s"].get<double>(), 0);
}

/// The Landlock ABI of this kernel, 0 without Landlock.
long landlock_abi() {
  const long abi = syscall(444 /* landlock_create_ruleset */, nullptr, 0, 1u /* VERSION */);
  return abi > 0 ? abi : 0;
}

// A command runs in the sandbox: it names the daemon's database and token on its command line and
// still cannot read them, while its own folder and TMPDIR take its files. With the sandbox off
// (the control) the same command reads the database.
TEST_F(CommandModeTest, ACommandCannotReadTheDaemonsDatabaseOrTokenEvenWhenItNamesThem) {
  if (landlock_abi() < 1) GTEST_SKIP() << "this kernel has no Landlock";
  const std::string probe = script("probe.sh",
                                   "{ cat \"$1\" >/dev/null 2>&1 && echo 'db: read' || echo 'db: refused'\n"
                                   "  cat \"$2\" >/dev/null 2>&1 && echo 'token: read' || echo 'token: refused'\n"
                                   "  echo x > \"$TMPDIR/t\" && echo 'tmp: written' || echo 'tmp: refused'\n"
                                   "} > sandbox.txt 2>&1\n"
                                   "echo \"[{\\\"avg_ts\\\": 100.$$}]\"\n");
  const std::string words = " --run '" + probe + " " + d_.dir() + "/qgate.db " + token_ + "'";
  auto outcome = [&](const json& job) {
    return slurp(d_.dir() + "/jobs/job-" + std::to_string(as_int(job["id"])) + "/sandbox.txt");
  };
  start_daemon();
  const json job = run_to_end(words);
  ASSERT_EQ(state_of(job), "JOB_STATE_DONE") << job.dump(2);
  EXPECT_EQ(job.value("disposition", ""), "DISPOSITION_OK") << job.dump(2);
  EXPECT_EQ(outcome(job), "db: refused\ntoken: refused\ntmp: written\n");
  const std::string arm_log = slurp(d_.dir() + "/logs/job-" + std::to_string(as_int(job["id"])) + "-arm-A.log");
  EXPECT_NE(arm_log.find("command sandbox: landlock abi"), std::string::npos) << arm_log;

  ASSERT_TRUE(d_.terminate(std::chrono::seconds(20)));
  start_daemon({"--worker-sandbox", "off"});
  const json open = run_to_end(words);
  ASSERT_EQ(state_of(open), "JOB_STATE_DONE") << open.dump(2);
  EXPECT_EQ(outcome(open), "db: read\ntoken: read\ntmp: written\n");
}

}  // namespace
}  // namespace qgate::testing
