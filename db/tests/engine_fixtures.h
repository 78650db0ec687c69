// The store tests' fixtures: a store on a fresh database of either engine (SQLite in a fresh
// directory, PostgreSQL in a fresh database of the tests' server, tests/support/test_postgres.h),
// the same with two builds, and a connection past the store to read its tables. A suite of such
// tests runs every case on both engines: INSTANTIATE_FOR_BOTH_ENGINES(Suite).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "detail/postgres_connection.h"
#include "detail/sqlite_connection.h"
#include "qgate/db/postgres_store.h"
#include "store_test_support.h"
#include "test_postgres.h"

namespace qgate::db::testing {

enum class Engine { Sqlite, Postgresql };

inline std::string engine_name(const ::testing::TestParamInfo<Engine>& info) {
  return info.param == Engine::Sqlite ? "sqlite" : "postgresql";
}

/// A store on a fresh database of the test's engine.
class StoreFixture : public ::testing::TestWithParam<Engine> {
 protected:
  void SetUp() override {
    path_ = dir_.file("qgate.db");
    if (GetParam() == Engine::Postgresql) {
      auto& server = test_support::TestPostgres::for_process();
      if (!server.available()) GTEST_SKIP() << "no PostgreSQL server: " << server.why_unavailable();
      database_.emplace(server.fresh_database());
    }
    store_ = reopen();
  }
  void TearDown() override { store_.reset(); }

  /// Another store on the same database (a second daemon, or the same one after a restart).
  std::unique_ptr<Store> reopen() {
    if (!database_) return open_store(path_);
    PostgresOptions options;
    options.address = database_->conninfo();
    return open_postgres_store(options);
  }
  /// A connection of its own to the same database, past the store.
  std::unique_ptr<detail::SqlConnection> raw() {
    if (!database_) {
      SqliteOptions options;
      options.path = path_;
      return detail::open_sqlite_connection(options);
    }
    PostgresOptions options;
    options.address = database_->conninfo();
    return detail::open_postgres_connection(options);
  }
  /// Rows in `table`, read through raw().
  std::int64_t raw_count(const std::string& table) {
    auto connection = raw();
    detail::SqlStatement& count = connection->prepared("SELECT COUNT(*) FROM " + table);
    count.step();
    const std::int64_t rows = count.int64(0);
    count.reset();
    return rows;
  }

  TempDir dir_;
  std::filesystem::path path_;  // the SQLite file (unused on PostgreSQL)
  std::optional<test_support::TestDatabase> database_;  // the PostgreSQL database
  std::unique_ptr<Store> store_;
};

#define INSTANTIATE_FOR_BOTH_ENGINES(Suite)                                                             \
  INSTANTIATE_TEST_SUITE_P(Engines, Suite,                                                             \
                           ::testing::Values(::qgate::db::testing::Engine::Sqlite,                     \
                                             ::qgate::db::testing::Engine::Postgresql),                \
                           ::qgate::db::testing::engine_name)

/// The store with two builds of one kernel's history: mmq-a (sha-a, created at 10) and mmq-b
/// (sha-b, at 20).
class TwoBuildsFixture : public StoreFixture {
 protected:
  void SetUp() override {
    StoreFixture::SetUp();
    if (IsSkipped()) return;
    mmq_a_ = store_->insert_build(make_build("mmq-a", "sha-a", 10)).id;
    mmq_b_ = store_->insert_build(make_build("mmq-b", "sha-b", 20)).id;
  }

  RowId mmq_a_ = 0, mmq_b_ = 0;
};

}  // namespace qgate::db::testing
