// The ctest fixture `postgres`: one PostgreSQL server that the tests registered with
// qgate_add_gtest(... POSTGRES) share. `qgate-test-postgres start DIR` starts it (test
// postgres.start) and `qgate-test-postgres stop DIR` stops it (postgres.stop). DIR, in the build
// tree, holds two files: `conninfo`, which $QGATE_TEST_POSTGRES_FILE names (see test_postgres.h),
// and `server_dir`, the server's own directory under /tmp (its data, socket and log).
#pragma once

#include <filesystem>

namespace qgate::test_support {

/// Exit code of a fixture start that found no PostgreSQL server binaries: ctest shows it skipped
/// (QGATE_SKIP_RETURN_CODE), and the tests then skip with the reason written to `conninfo`.
inline constexpr int kFixtureSkipExitCode = 77;

/// Stops a server an earlier start left behind in `state_dir`, starts a new one and writes its
/// files there; the server keeps running after this process exits. Returns 0, or
/// kFixtureSkipExitCode when there are no server binaries. Throws when the server fails to start.
int start_fixture_server(const std::filesystem::path& state_dir);

/// Stops the server that `state_dir` records and removes its directory and the files; returns 0,
/// also when there is nothing to stop.
int stop_fixture_server(const std::filesystem::path& state_dir);

}  // namespace qgate::test_support
