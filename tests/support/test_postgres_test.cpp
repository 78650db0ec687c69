// Tests of the throwaway PostgreSQL server (test_postgres.h): fresh databases are distinct and
// empty, their connection strings work with libpq, they are dropped with their handle, and a
// private server stops and starts again on the same data.
#include "test_postgres.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace qgate::test_support {
namespace {

using Connection = std::unique_ptr<PGconn, decltype(&PQfinish)>;

Connection connect(const std::string& conninfo) {
  return Connection(PQconnectdb((conninfo + " connect_timeout=10").c_str()), &PQfinish);
}

// The first column of the first row of `sql`, "" for NULL; nullopt (with a test failure) when the
// query fails.
std::optional<std::string> query_value(PGconn* conn, const std::string& sql) {
  PGresult* result = PQexec(conn, sql.c_str());
  std::optional<std::string> value;
  if (PQresultStatus(result) == PGRES_TUPLES_OK && PQntuples(result) > 0)
    value = PQgetisnull(result, 0, 0) ? "" : PQgetvalue(result, 0, 0);
  else
    ADD_FAILURE() << "`" << sql << "` failed: " << PQerrorMessage(conn);
  PQclear(result);
  return value;
}

void execute(PGconn* conn, const std::string& sql) {
  PGresult* result = PQexec(conn, sql.c_str());
  EXPECT_EQ(PQresultStatus(result), PGRES_COMMAND_OK) << sql << ": " << PQerrorMessage(conn);
  PQclear(result);
}

constexpr const char* kCountPublicTables =
    "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'";

#define SKIP_WITHOUT_POSTGRES(postgres) \
  if (!(postgres).available()) GTEST_SKIP() << (postgres).why_unavailable()

TEST(TestPostgres, FreshDatabasesAreDistinctAndEmpty) {
  auto& postgres = TestPostgres::for_process();
  SKIP_WITHOUT_POSTGRES(postgres);
  const TestDatabase first = postgres.fresh_database();
  const TestDatabase second = postgres.fresh_database();
  EXPECT_NE(first.name(), second.name());
  EXPECT_NE(first.conninfo(), second.conninfo());

  const Connection a = connect(first.conninfo());
  const Connection b = connect(second.conninfo());
  ASSERT_EQ(PQstatus(a.get()), CONNECTION_OK) << PQerrorMessage(a.get());
  ASSERT_EQ(PQstatus(b.get()), CONNECTION_OK) << PQerrorMessage(b.get());
  EXPECT_EQ(query_value(a.get(), kCountPublicTables), "0");
  EXPECT_EQ(query_value(b.get(), kCountPublicTables), "0");

  execute(a.get(), "CREATE TABLE only_in_first (id integer)");
  EXPECT_EQ(query_value(a.get(), "SELECT to_regclass('public.only_in_first') IS NOT NULL"), "t");
  EXPECT_EQ(query_value(b.get(), "SELECT to_regclass('public.only_in_first') IS NOT NULL"), "f");
  EXPECT_EQ(query_value(b.get(), kCountPublicTables), "0");
}

TEST(TestPostgres, ConnectionStringWorksWithLibpq) {
  auto& postgres = TestPostgres::for_process();
  SKIP_WITHOUT_POSTGRES(postgres);
  const TestDatabase db = postgres.fresh_database();
  EXPECT_NE(db.conninfo().find("host="), std::string::npos) << db.conninfo();
  EXPECT_NE(db.conninfo().find("dbname=" + db.name()), std::string::npos) << db.conninfo();
  const Connection conn = connect(db.conninfo());
  ASSERT_EQ(PQstatus(conn.get()), CONNECTION_OK) << PQerrorMessage(conn.get());
  EXPECT_EQ(query_value(conn.get(), "SELECT 1"), "1");
  EXPECT_EQ(query_value(conn.get(), "SELECT current_database()"), db.name());
  EXPECT_EQ(query_value(conn.get(), "SELECT pg_encoding_to_char(encoding) FROM pg_database WHERE datname = "
                                    "current_database()"),
            "UTF8");
}

TEST(TestPostgres, DatabaseIsDroppedWithItsHandle) {
  auto& postgres = TestPostgres::for_process();
  SKIP_WITHOUT_POSTGRES(postgres);
  const Connection admin = connect(postgres.conninfo());
  ASSERT_EQ(PQstatus(admin.get()), CONNECTION_OK) << PQerrorMessage(admin.get());
  std::string name;
  {
    TestDatabase db = postgres.fresh_database();
    name = db.name();
    // A connection left open does not keep it.
    const Connection left_open = connect(db.conninfo());
    ASSERT_EQ(PQstatus(left_open.get()), CONNECTION_OK) << PQerrorMessage(left_open.get());
    EXPECT_EQ(query_value(admin.get(), "SELECT count(*) FROM pg_database WHERE datname = '" + name + "'"), "1");
    // A handle moved into drops its own database first; the moved-from one drops nothing.
    TestDatabase moved = postgres.fresh_database();
    moved = std::move(db);
    EXPECT_EQ(moved.name(), name);
  }
  EXPECT_EQ(query_value(admin.get(), "SELECT count(*) FROM pg_database WHERE datname = '" + name + "'"), "0");
  EXPECT_EQ(query_value(admin.get(), "SELECT count(*) FROM pg_database WHERE datname LIKE 'qgate_test_" +
                                         std::to_string(getpid()) + "\\_%'"),
            "0");
}

TEST(TestPostgres, PrivateServerStopsAndStartsAgain) {
  const auto server = TestPostgres::start_private();
  SKIP_WITHOUT_POSTGRES(*server);
  ASSERT_TRUE(server->is_private());
  ASSERT_TRUE(server->running());
  const std::filesystem::path dir = server->server_dir();
  EXPECT_LT(dir.string().size() + std::string("/.s.PGSQL.5432").size(), 108u) << dir;
  const TestDatabase db = server->fresh_database();
  {
    const Connection conn = connect(db.conninfo());
    ASSERT_EQ(PQstatus(conn.get()), CONNECTION_OK) << PQerrorMessage(conn.get());
    execute(conn.get(), "CREATE TABLE survives_restart (id integer)");
    execute(conn.get(), "INSERT INTO survives_restart VALUES (42)");

    server->stop();
    EXPECT_FALSE(server->running());
    // The open connection is gone, and a new one is refused.
    PGresult* result = PQexec(conn.get(), "SELECT 1");
    EXPECT_NE(PQresultStatus(result), PGRES_TUPLES_OK);
    PQclear(result);
  }
  const Connection refused = connect(db.conninfo());
  EXPECT_NE(PQstatus(refused.get()), CONNECTION_OK);

  server->start();
  EXPECT_TRUE(server->running());
  const Connection again = connect(db.conninfo());
  ASSERT_EQ(PQstatus(again.get()), CONNECTION_OK) << PQerrorMessage(again.get());
  EXPECT_EQ(query_value(again.get(), "SELECT id FROM survives_restart"), "42");
}

TEST(TestPostgres, PrivateServerComesBackAfterAnImmediateStop) {
  const auto server = TestPostgres::start_private();
  SKIP_WITHOUT_POSTGRES(*server);
  const TestDatabase db = server->fresh_database();
  server->stop(TestPostgres::StopMode::kImmediate);
  EXPECT_FALSE(server->running());
  const Connection refused = connect(db.conninfo());
  EXPECT_NE(PQstatus(refused.get()), CONNECTION_OK);
  server->start();  // crash recovery
  const Connection again = connect(db.conninfo());
  ASSERT_EQ(PQstatus(again.get()), CONNECTION_OK) << PQerrorMessage(again.get());
  EXPECT_EQ(query_value(again.get(), "SELECT 1"), "1");
}

TEST(TestPostgres, PrivateServerIsRemovedWithItsObject) {
  auto server = TestPostgres::start_private();
  SKIP_WITHOUT_POSTGRES(*server);
  const std::filesystem::path dir = server->server_dir();
  const std::string conninfo = server->conninfo();
  ASSERT_TRUE(std::filesystem::exists(dir));
  server.reset();
  EXPECT_FALSE(std::filesystem::exists(dir));
  const Connection refused = connect(conninfo);
  EXPECT_NE(PQstatus(refused.get()), CONNECTION_OK);
}

TEST(TestPostgres, StoppingTheSharedServerIsRefused) {
  auto& postgres = TestPostgres::for_process();
  SKIP_WITHOUT_POSTGRES(postgres);
  if (postgres.is_private()) GTEST_SKIP() << "this process runs a private server (no " << kTestPostgresFileEnv << ")";
  EXPECT_THROW(postgres.stop(), std::logic_error);
  EXPECT_THROW(postgres.start(), std::logic_error);
}

}  // namespace
}  // namespace qgate::test_support
