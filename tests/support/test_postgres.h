// Test helper: a throwaway PostgreSQL server that hands each test a fresh, empty database.
//
// Two modes. Shared: when $QGATE_TEST_POSTGRES_FILE names a file (written by the ctest fixture
// `postgres.start`, see postgres_fixture.h), every test binary uses the server it names. Private:
// otherwise the process starts a server of its own on first use (initdb in a fresh /tmp directory,
// Unix socket only, no TCP) and stops it and removes its directory at exit, so a test binary run by
// hand works too. As root (PostgreSQL refuses to run as root) initdb and pg_ctl run as `nobody`;
// the test process still connects as the database superuser `qgate` over the socket (trust auth).
//
// When no PostgreSQL server binaries are found, available() is false and why_unavailable() says
// why: a test skips with that reason rather than passing.
//   auto& postgres = qgate::test_support::TestPostgres::for_process();
//   if (!postgres.available()) GTEST_SKIP() << postgres.why_unavailable();
//   const auto db = postgres.fresh_database();  // dropped when `db` goes away
//   PGconn* conn = PQconnectdb(db.conninfo().c_str());
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qgate::test_support {

/// The environment variable that names the shared server's conninfo file.
inline constexpr const char* kTestPostgresFileEnv = "QGATE_TEST_POSTGRES_FILE";
/// The environment variable that names the directory holding initdb and pg_ctl, when set.
inline constexpr const char* kPostgresBindirEnv = "QGATE_PG_BINDIR";
/// A conninfo file that starts with this holds, instead of a connection string, the reason the
/// fixture found no server to start (the tests then skip with it).
inline constexpr std::string_view kUnavailablePrefix = "unavailable: ";

/// The directory holding initdb and pg_ctl: $QGATE_PG_BINDIR when set, else `pg_config --bindir`,
/// else the highest /usr/lib/postgresql/<version>/bin. nullopt when none holds both, with the reason
/// in `why_not`.
std::optional<std::filesystem::path> find_postgres_bindir(std::string& why_not);

/// One database made by TestPostgres::fresh_database(). Dropped (best effort, errors ignored) when
/// the handle goes away; move-only.
class TestDatabase {
 public:
  TestDatabase(TestDatabase&& other) noexcept;
  TestDatabase& operator=(TestDatabase&& other) noexcept;
  TestDatabase(const TestDatabase&) = delete;
  TestDatabase& operator=(const TestDatabase&) = delete;
  ~TestDatabase();

  /// The database's name: qgate_test_<pid>_<counter>_<microseconds since the epoch>.
  const std::string& name() const { return name_; }
  /// Its libpq connection string: "host=<socket dir> port=<port> user=<user> dbname=<name>".
  const std::string& conninfo() const { return conninfo_; }
  /// Its address as qgated's --store takes it: "postgresql://<user>@/<name>?host=<socket dir>&port=<port>".
  const std::string& store_address() const { return store_address_; }
  /// Every row of `sql`, read through a connection of its own, past whatever else uses the
  /// database (NULL reads ""). Throws std::runtime_error when it cannot connect or the query fails.
  std::vector<std::vector<std::string>> query(const std::string& sql) const;
  /// The first value of the first row of `sql`; "" when there is none.
  std::string query_value(const std::string& sql) const;

 private:
  friend class TestPostgres;
  TestDatabase(std::string name, std::string conninfo, std::string store_address, std::string maintenance_conninfo);
  void drop() noexcept;

  std::string name_;
  std::string conninfo_;
  std::string store_address_;
  std::string maintenance_conninfo_;  // where DROP DATABASE runs; empty once dropped or moved from
};

/// A PostgreSQL server for tests: the shared one or a private one (see the top of this file).
/// Errors (initdb fails, the server does not start in time, a database cannot be made) throw
/// std::runtime_error with the command's output and the tail of the server's log.
class TestPostgres {
 public:
  /// The process's server: the shared one when $QGATE_TEST_POSTGRES_FILE is set, else a private
  /// one started on the first call and stopped at exit. Throws when the shared file is missing or
  /// the private server fails to start (a later call tries again).
  static TestPostgres& for_process();

  /// A private server of its own, started now, stopped and removed by the destructor. Not
  /// available() (nothing started) when no server binaries are found.
  static std::unique_ptr<TestPostgres> start_private();

  /// The server that `conninfo_file` names (the format the ctest fixture writes: one connection
  /// string to its maintenance database, or kUnavailablePrefix and a reason).
  static std::unique_ptr<TestPostgres> connect_shared(const std::filesystem::path& conninfo_file);

  /// Stops and removes a private server left running by release(), given its directory; does
  /// nothing when the directory is gone. Throws when pg_ctl fails on a server that is running.
  static void stop_released(const std::filesystem::path& server_dir);

  TestPostgres(const TestPostgres&) = delete;
  TestPostgres& operator=(const TestPostgres&) = delete;
  ~TestPostgres();

  bool available() const { return why_unavailable_.empty(); }
  /// Empty when available().
  const std::string& why_unavailable() const { return why_unavailable_; }
  /// True for a server this object started (and so may stop and start).
  bool is_private() const { return private_; }

  /// A new, empty database (CREATE DATABASE ... TEMPLATE template0) with a unique name.
  TestDatabase fresh_database();

  /// The connection string for `dbname` on this server.
  std::string conninfo(std::string_view dbname = "postgres") const;

  // For private servers only (std::logic_error on the shared one): stop the server and start it
  // again on the same data directory and socket, to play the database going away and coming back.
  // Connections fail while it is stopped; databases made before stop() are still there after
  // start(). release() leaves the server running past this object (the ctest fixture) and returns
  // its directory, for stop_released().

  enum class StopMode {
    /// pg_ctl stop -m fast: open connections are ended, every committed transaction is kept.
    kFast,
    /// pg_ctl stop -m immediate: the server dies at once, as if it crashed. The server runs with
    /// synchronous_commit=off, so the last fraction of a second's commits may be lost.
    kImmediate,
  };
  /// Stops the server; no-op when already stopped.
  void stop(StopMode mode = StopMode::kFast);
  /// pg_ctl start on the same data directory and socket; returns once it accepts connections.
  /// No-op when running.
  void start();
  /// Whether stop() has been called without start() since.
  bool running() const { return running_; }
  /// The directory holding the data directory ("data"), the socket and the log ("log").
  const std::filesystem::path& server_dir() const;
  std::filesystem::path release();

 private:
  TestPostgres() = default;

  void require_private(const char* what) const;

  std::string why_unavailable_;
  bool private_ = false;
  bool running_ = false;
  std::string host_;  // the socket directory
  std::string port_;
  std::string user_;
  std::string maintenance_db_;
  // Private servers only.
  std::filesystem::path bindir_;
  std::filesystem::path server_dir_;
  std::optional<std::pair<uid_t, gid_t>> run_as_;  // who runs initdb and pg_ctl, when not this process
  pid_t owner_pid_ = 0;                             // a forked child never stops its parent's server
};

}  // namespace qgate::test_support
