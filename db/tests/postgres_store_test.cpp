// Tests of what only the PostgreSQL engine does: the migrations reach the same tables and columns as
// SQLite's, a database migrated by a newer qgate is refused, a read-only store refuses writes, a
// server that cannot be reached is a clear CannotOpen error, the connection comes back after the
// server went away between two calls, and a submitted job's commit is synced on a server that runs
// with synchronous_commit off.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "engine_fixtures.h"

namespace qgate::db {
namespace {

using testing::make_build;

class PostgresStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& server = test_support::TestPostgres::for_process();
    if (!server.available()) GTEST_SKIP() << "no PostgreSQL server: " << server.why_unavailable();
    database_.emplace(server.fresh_database());
  }
  PostgresOptions options() const {
    PostgresOptions options;
    options.address = database_->conninfo();
    return options;
  }

  std::optional<test_support::TestDatabase> database_;
};

/// Every table's columns, by name, read from the engine's catalogue.
std::map<std::string, std::set<std::string>> columns_of(detail::SqlConnection& raw, const std::string& sql) {
  std::map<std::string, std::set<std::string>> tables;
  detail::ScopedStatement select(raw.prepared(sql));
  while (select->step()) tables[select->text(0)].insert(select->text(1));
  return tables;
}

TEST_F(PostgresStoreTest, MigrationsMakeTheSameTablesAndColumnsAsSqlite) {
  open_postgres_store(options());
  testing::TempDir dir;
  testing::open_store(dir.file("qgate.db"));

  SqliteOptions lite_options;
  lite_options.path = dir.file("qgate.db");
  auto lite = detail::open_sqlite_connection(lite_options);
  auto pg = detail::open_postgres_connection(options());
  const auto sqlite_columns = columns_of(
      *lite, "SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p WHERE m.type = 'table'");
  auto postgres_columns = columns_of(*pg,
                                     "SELECT table_name, column_name FROM information_schema.columns "
                                     "WHERE table_schema = current_schema()");
  ASSERT_EQ(postgres_columns.erase("schema_migrations"), 1u);  // PostgreSQL's home of the version
  EXPECT_EQ(postgres_columns, sqlite_columns);
  EXPECT_GE(sqlite_columns.size(), 10u);
}

TEST_F(PostgresStoreTest, ADatabaseOfANewerSchemaIsRefusedWithAClearMessage) {
  open_postgres_store(options());
  const int newer = schema_version_known() + 1;
  detail::open_postgres_connection(options())->execute_script(
      "INSERT INTO schema_migrations (version, applied_ms) VALUES (" + std::to_string(newer) + ", 0)");
  try {
    open_postgres_store(options());
    FAIL() << "a database of a newer schema was opened";
  } catch (const StoreError& error) {
    EXPECT_EQ(error.kind(), StoreErrorKind::SchemaTooNew) << error.what();
    const std::string message = error.what();
    EXPECT_NE(message.find("schema version " + std::to_string(newer)), std::string::npos) << message;
    EXPECT_NE(message.find("refusing to open it"), std::string::npos) << message;
    EXPECT_NE(message.find("dbname=" + database_->name()), std::string::npos) << message;  // where
  }
}

TEST_F(PostgresStoreTest, AReadOnlyStoreReadsAndRefusesWrites) {
  open_postgres_store(options())->insert_build(make_build("k", "sha-1"));
  PostgresOptions read_only = options();
  read_only.read_only = true;
  auto store = open_postgres_store(read_only);
  ASSERT_TRUE(store->find_build_by_sha256("sha-1").has_value());
  try {
    store->insert_build(make_build("k", "sha-2"));
    FAIL() << "a read-only store wrote";
  } catch (const StoreError& error) {
    EXPECT_EQ(error.kind(), StoreErrorKind::ReadOnly) << error.what();
    EXPECT_NE(std::string(error.what()).find("insert_build"), std::string::npos) << error.what();
  }
  EXPECT_FALSE(open_postgres_store(options())->find_build_by_sha256("sha-2").has_value());
}

TEST_F(PostgresStoreTest, AnUnreachableServerIsCannotOpenNamingWhereAndNotThePassword) {
  PostgresOptions nowhere;
  nowhere.address = "postgresql://qgate:secret-word@/qgate?host=/nonexistent-socket-dir&port=5999";
  nowhere.connect_timeout_s = 2;
  try {
    open_postgres_store(nowhere);
    FAIL() << "a store opened on no server";
  } catch (const StoreError& error) {
    EXPECT_EQ(error.kind(), StoreErrorKind::CannotOpen) << error.what();
    const std::string message = error.what();
    EXPECT_NE(message.find("cannot connect"), std::string::npos) << message;
    EXPECT_NE(message.find("/nonexistent-socket-dir"), std::string::npos) << message;
    EXPECT_EQ(message.find("secret-word"), std::string::npos) << message;
  }
}

TEST_F(PostgresStoreTest, TheStoreConnectsAgainAfterItsConnectionWasEnded) {
  auto store = open_postgres_store(options());
  store->insert_build(make_build("k", "sha-1"));
  // The server ends every other connection to this database (an administrator, a failover).
  detail::open_postgres_connection(options())->execute_script(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
      "WHERE datname = current_database() AND pid <> pg_backend_pid()");
  // The first call may see the connection gone; one after it works on a new connection.
  try {
    store->find_build_by_sha256("sha-1");
  } catch (const StoreError& error) {
    EXPECT_EQ(error.kind(), StoreErrorKind::CannotOpen) << error.what();
  }
  EXPECT_TRUE(store->find_build_by_sha256("sha-1").has_value());
  EXPECT_FALSE(store->insert_build(make_build("k", "sha-1")).inserted);
}

/// The value of libpq's option `keyword` on `connection`.
std::string connection_option(detail::SqlConnection& connection, const std::string& keyword) {
  return detail::postgres_connection_option(connection, keyword).value_or("(no such option)");
}

TEST_F(PostgresStoreTest, AConnectionProbesItsPeerSoThatASilentCutEndsCallsAndTheAddressMayTuneIt) {
  auto plain = detail::open_postgres_connection(options());
  EXPECT_EQ(connection_option(*plain, "keepalives"), "1");
  EXPECT_EQ(connection_option(*plain, "keepalives_idle"), "30");
  EXPECT_EQ(connection_option(*plain, "keepalives_interval"), "10");
  EXPECT_EQ(connection_option(*plain, "keepalives_count"), "3");
  EXPECT_EQ(connection_option(*plain, "tcp_user_timeout"), "60000");
  PostgresOptions tuned = options();
  tuned.address += " keepalives_idle=5 tcp_user_timeout=15000";
  auto own = detail::open_postgres_connection(tuned);
  EXPECT_EQ(connection_option(*own, "keepalives_idle"), "5");
  EXPECT_EQ(connection_option(*own, "tcp_user_timeout"), "15000");
  EXPECT_EQ(connection_option(*own, "keepalives_count"), "3");
}

TEST_F(PostgresStoreTest, ASubmittedJobIsCommittedSynchronouslyWhereTheServerRunsWithoutIt) {
  const RowId build = open_postgres_store(options())->insert_build(make_build("k", "sha-1")).id;
  // The database acknowledges commits before their WAL is flushed, and a trigger notes the
  // setting each insert of a job or a build ran under.
  detail::open_postgres_connection(options())->execute_script(
      "ALTER DATABASE " + database_->name() + " SET synchronous_commit = off;"
      "CREATE TABLE commit_modes (id BIGSERIAL PRIMARY KEY, what TEXT NOT NULL, mode TEXT NOT NULL);"
      "CREATE FUNCTION note_commit_mode() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "INSERT INTO commit_modes (what, mode) VALUES (TG_TABLE_NAME, current_setting('synchronous_commit')); "
      "RETURN NEW; END $$;"
      "CREATE TRIGGER jobs_commit_mode AFTER INSERT ON jobs FOR EACH ROW EXECUTE FUNCTION note_commit_mode();"
      "CREATE TRIGGER builds_commit_mode AFTER INSERT ON builds FOR EACH ROW EXECUTE FUNCTION note_commit_mode();");
  auto store = open_postgres_store(options());  // a new session: it runs with the database's setting
  store->insert_build(make_build("k", "sha-2"));
  store->create_job(testing::make_job(build, 1000));
  store->insert_build(make_build("k", "sha-3"));
  store->create_job(testing::make_job(build, 2000));
  const auto modes = detail::open_postgres_connection(options());
  detail::ScopedStatement select(modes->prepared("SELECT what, mode FROM commit_modes ORDER BY id"));
  std::vector<std::string> seen;
  while (select->step()) seen.push_back(select->text(0) + ":" + select->text(1));
  // Only the submits are made synchronous; the store's other writes keep the server's setting.
  EXPECT_EQ(seen, (std::vector<std::string>{"builds:off", "jobs:on", "builds:off", "jobs:on"}));
}

}  // namespace
}  // namespace qgate::db
