// OutputIdentityCheck on hand-made runs: unchecked without outputs, identical token and text outputs,
// the first differing token or byte (the earliest over all runs), prefixes, a run without output and
// a tokens-vs-text mismatch, with the detail naming the arm, the run and the values.
#include "qgate/server/output_identity.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace qgate::server {
namespace {

v1::ProfileRun tokens_run(const std::vector<int64_t>& tokens) {
  v1::ProfileRun run;
  for (int64_t t : tokens) run.add_output_tokens(t);
  run.set_has_output(true);
  return run;
}

v1::ProfileRun text_run(const std::string& text) {
  v1::ProfileRun run;
  run.set_output_text(text);
  run.set_has_output(true);
  return run;
}

v1::ProfileRun no_output_run() { return v1::ProfileRun(); }

std::vector<int64_t> greedy_tokens(int n) {
  std::vector<int64_t> tokens;
  for (int i = 0; i < n; ++i) tokens.push_back(1000 + 37 * i);
  return tokens;
}

/// ABBA order over `cycles` cycles: A0 B0 B1 A1 A2 B2 B3 A3 ... with `run_of(arm, index)`.
template <typename RunOf>
void add_abba(OutputIdentityCheck& check, int cycles, RunOf run_of) {
  int a = 0, b = 0;
  for (int c = 0; c < cycles; ++c) {
    const bool a_first = c % 2 == 0;
    for (int k = 0; k < 2; ++k) {
      if ((k == 0) == a_first) {
        check.add("A", a, run_of("A", a));
        ++a;
      } else {
        check.add("B", b, run_of("B", b));
        ++b;
      }
    }
  }
}

TEST(OutputIdentity, NoRunsIsUnchecked) {
  const v1::OutputIdentity identity = OutputIdentityCheck().result();
  EXPECT_FALSE(identity.checked());
  EXPECT_FALSE(identity.identical());
  EXPECT_EQ(identity.first_difference(), -1);
  EXPECT_EQ(identity.detail(), "");
}

TEST(OutputIdentity, RunsWithoutOutputAreUnchecked) {
  OutputIdentityCheck check;
  add_abba(check, 4, [](const std::string&, int) { return no_output_run(); });
  const v1::OutputIdentity identity = check.result();
  EXPECT_FALSE(identity.checked());
  EXPECT_FALSE(identity.identical());
  EXPECT_EQ(identity.first_difference(), -1);
  EXPECT_EQ(identity.compared_runs(), 0);
  EXPECT_EQ(identity.detail(), "");
}

TEST(OutputIdentity, IdenticalTokensOverManyRuns) {
  OutputIdentityCheck check;
  add_abba(check, 6, [](const std::string&, int) { return tokens_run(greedy_tokens(64)); });
  const v1::OutputIdentity identity = check.result();
  EXPECT_TRUE(identity.checked());
  EXPECT_TRUE(identity.identical());
  EXPECT_EQ(identity.unit(), "token");
  EXPECT_EQ(identity.length(), 64);
  EXPECT_EQ(identity.compared_runs(), 12);
  EXPECT_EQ(identity.first_difference(), -1);
  EXPECT_EQ(identity.detail(), "all 12 runs produced the same 64 tokens");
}

TEST(OutputIdentity, OneTokenIsSingular) {
  OutputIdentityCheck check;
  check.add("A", 0, tokens_run({42}));
  check.add("B", 0, tokens_run({42}));
  const v1::OutputIdentity identity = check.result();
  EXPECT_TRUE(identity.identical());
  EXPECT_EQ(identity.detail(), "all 2 runs produced the same 1 token");
}

TEST(OutputIdentity, DifferenceInOneRunOfArmB) {
  constexpr int kAt = 17;
  OutputIdentityCheck check;
  add_abba(check, 4, [](const std::string& arm, int index) {
    std::vector<int64_t> tokens = greedy_tokens(32);
    if (arm == "B" && index == 2) tokens[kAt] = 999;
    return tokens_run(tokens);
  });
  const v1::OutputIdentity identity = check.result();
  EXPECT_TRUE(identity.checked());
  EXPECT_FALSE(identity.identical());
  EXPECT_EQ(identity.unit(), "token");
  EXPECT_EQ(identity.length(), 32);
  EXPECT_EQ(identity.compared_runs(), 8);
  EXPECT_EQ(identity.first_difference(), kAt);
  EXPECT_EQ(identity.detail(), "arm B run 3 differs from arm A run 1 at token 17: " +
                                   std::to_string(greedy_tokens(32)[kAt]) + " vs 999 (lengths 32 and 32) (1 of 7 runs differ)");
}

TEST(OutputIdentity, TheEarliestOfSeveralDifferencesWins) {
  OutputIdentityCheck check;
  add_abba(check, 4, [](const std::string& arm, int index) {
    std::vector<int64_t> tokens = greedy_tokens(32);
    if (arm == "B" && index == 0) tokens[20] = -5;  // added first
    if (arm == "A" && index == 2) tokens[9] = -6;   // the earliest position
    if (arm == "B" && index == 3) tokens[15] = -7;  // added last
    if (arm == "A" && index == 3) tokens[9] = -8;   // as early, but later in the job
    return tokens_run(tokens);
  });
  const v1::OutputIdentity identity = check.result();
  EXPECT_FALSE(identity.identical());
  EXPECT_EQ(identity.first_difference(), 9);
  EXPECT_EQ(identity.detail(), "arm A run 3 differs from arm A run 1 at token 9: " + std::to_string(greedy_tokens(32)[9]) +
                                   " vs -6 (lengths 32 and 32) (4 of 7 runs differ)");
}

TEST(OutputIdentity, AShorterOutputDiffersAtItsLength) {
  OutputIdentityCheck check;
  check.add("A", 0, tokens_run({1, 2, 3, 4}));
  check.add("B", 0, tokens_run({1, 2, 3}));
  check.add("B", 1, tokens_run({1, 2, 3, 4}));
  check.add("A", 1, tokens_run({1, 2, 3, 4}));
  v1::OutputIdentity identity = check.result();
  EXPECT_FALSE(identity.identical());
  EXPECT_EQ(identity.length(), 4);
  EXPECT_EQ(identity.first_difference(), 3);
  EXPECT_EQ(identity.detail(), "arm B run 1 differs from arm A run 1 at token 3: 4 vs (end) (lengths 4 and 3) (1 of 3 runs differ)");

  OutputIdentityCheck longer;
  longer.add("A", 0, tokens_run({1, 2}));
  longer.add("B", 0, tokens_run({1, 2, 3}));
  identity = longer.result();
  EXPECT_FALSE(identity.identical());
  EXPECT_EQ(identity.length(), 2);
  EXPECT_EQ(identity.first_difference(), 2);
  EXPECT_EQ(identity.detail(), "arm B run 1 differs from arm A run 1 at token 2: (end) vs 3 (lengths 2 and 3) (1 of 1 runs differ)");
}

TEST(OutputIdentity, TextIsComparedByteForByte) {
  OutputIdentityCheck same;
  add_abba(same, 2, [](const std::string&, int) { return text_run("Paris is the capital.\n"); });
  v1::OutputIdentity identity = same.result();
  EXPECT_TRUE(identity.checked());
  EXPECT_TRUE(identity.identical());
  EXPECT_EQ(identity.unit(), "byte");
  EXPECT_EQ(identity.length(), 22);
  EXPECT_EQ(identity.detail(), "all 4 runs produced the same 22 bytes");

  OutputIdentityCheck differ;
  differ.add("A", 0, text_run("hello world\nbye"));
  differ.add("B", 0, text_run("hello there\nbye"));
  differ.add("B", 1, text_run("hello world\nbye"));
  identity = differ.result();
  EXPECT_TRUE(identity.checked());
  EXPECT_FALSE(identity.identical());
  EXPECT_EQ(identity.unit(), "byte");
  EXPECT_EQ(identity.length(), 15);
  EXPECT_EQ(identity.first_difference(), 6);
  EXPECT_EQ(identity.detail(),
            "arm B run 1 differs from arm A run 1 at byte 6: \"world\\nbye\" vs \"there\\nbye\" (lengths 15 and 15) "
            "(1 of 2 runs differ)");

  // A single differing byte (case), and a text prefix.
  OutputIdentityCheck one_byte;
  one_byte.add("A", 0, text_run("abc"));
  one_byte.add("B", 0, text_run("aBc"));
  one_byte.add("A", 1, text_run("ab"));
  identity = one_byte.result();
  EXPECT_EQ(identity.first_difference(), 1);
  EXPECT_EQ(identity.detail(), "arm B run 1 differs from arm A run 1 at byte 1: \"bc\" vs \"Bc\" (lengths 3 and 3) (2 of 2 runs differ)");
}

TEST(OutputIdentity, ARunWithoutOutputDiffersAtZero) {
  OutputIdentityCheck check;
  check.add("A", 0, tokens_run({5, 6, 7}));
  check.add("B", 0, tokens_run({5, 6, 7}));
  check.add("B", 1, no_output_run());
  check.add("A", 1, tokens_run({5, 6, 7}));
  const v1::OutputIdentity identity = check.result();
  EXPECT_TRUE(identity.checked());
  EXPECT_FALSE(identity.identical());
  EXPECT_EQ(identity.compared_runs(), 4);
  EXPECT_EQ(identity.first_difference(), 0);
  EXPECT_EQ(identity.detail(), "arm B run 2 differs from arm A run 1 at token 0: it produced no output (1 of 3 runs differ)");
}

TEST(OutputIdentity, TheFirstRunWithOutputIsTheReference) {
  // Arm A's first run printed nothing: the comparison is against the first run that has an output,
  // and the empty run is still a difference.
  OutputIdentityCheck check;
  check.add("A", 0, no_output_run());
  check.add("B", 0, tokens_run({5, 6}));
  check.add("B", 1, tokens_run({5, 6}));
  const v1::OutputIdentity identity = check.result();
  EXPECT_TRUE(identity.checked());
  EXPECT_FALSE(identity.identical());
  EXPECT_EQ(identity.length(), 2);
  EXPECT_EQ(identity.first_difference(), 0);
  EXPECT_EQ(identity.detail(), "arm A run 1 differs from arm B run 1 at token 0: it produced no output (1 of 2 runs differ)");
}

TEST(OutputIdentity, TokensAgainstTextIsADifference) {
  OutputIdentityCheck check;
  check.add("A", 0, tokens_run({1, 2}));
  check.add("B", 0, text_run("1 2"));
  v1::OutputIdentity identity = check.result();
  EXPECT_FALSE(identity.identical());
  EXPECT_EQ(identity.unit(), "token");
  EXPECT_EQ(identity.first_difference(), 0);
  EXPECT_EQ(identity.detail(), "arm B run 1 differs from arm A run 1 at token 0: one is tokens, the other text (1 of 1 runs differ)");

  OutputIdentityCheck reversed;
  reversed.add("A", 0, text_run("1 2"));
  reversed.add("B", 0, tokens_run({1, 2}));
  identity = reversed.result();
  EXPECT_FALSE(identity.identical());
  EXPECT_EQ(identity.unit(), "byte");
  EXPECT_EQ(identity.first_difference(), 0);
  EXPECT_EQ(identity.detail(), "arm B run 1 differs from arm A run 1 at byte 0: one is text, the other tokens (1 of 1 runs differ)");
}

}  // namespace
}  // namespace qgate::server
