// Tests of the CLI's argument rules: --since, the server address and the job kind.
#include "qgate/client/options.h"

#include <gtest/gtest.h>

#include "qgate/common/default_paths.h"

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

TEST(BuildName, OnlySafeCharacters) {
  EXPECT_NO_THROW(check_build_name("mmq-tile64_v2.1"));
  EXPECT_THROW(check_build_name(""), UsageError);
  EXPECT_THROW(check_build_name("../etc"), UsageError);
  EXPECT_THROW(check_build_name("a b"), UsageError);
  EXPECT_THROW(check_build_name(".."), UsageError);
}

}  // namespace
}  // namespace qgate::client
