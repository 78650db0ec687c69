// Opening the PostgreSQL implementation of qgate::db::Store: the same store, tables and migrations
// as SQLite's, on a database several daemons share (docs/fleet.md).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "qgate/db/store.h"

namespace qgate::db {

struct PostgresOptions {
  /// A libpq connection string or URI ("postgresql://user@host/db", "host=/run/pg dbname=qgate").
  /// What it leaves out comes from the PG* environment variables (PGHOST, PGDATABASE, PGPASSFILE...).
  std::string address;
  bool read_only = false;  // no migrations; every write fails with StoreError(ReadOnly)
  int connect_timeout_s = 10;
};

/// Connects and migrates the database. Throws StoreError: SchemaTooNew when a newer qgate migrated
/// it, CannotOpen when the server cannot be reached or refuses the connection.
std::unique_ptr<Store> open_postgres_store(const PostgresOptions& options);

/// True for a store address that names PostgreSQL: a URI (postgresql://... or postgres://...) or
/// libpq's keyword=value form whose first keyword is libpq's ("host=/run/postgresql dbname=qgate").
/// Anything else is a SQLite file.
bool is_postgres_address(std::string_view address);

}  // namespace qgate::db
