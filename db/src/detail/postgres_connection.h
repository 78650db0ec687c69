// The PostgreSQL engine behind the store: a libpq connection to a database several daemons share.
#pragma once

#include <memory>

#include "qgate/db/postgres_store.h"
#include "sql_connection.h"

namespace qgate::db::detail {

/// Connects (PG* environment variables fill in what the address leaves out). Throws SqlEngineError.
std::unique_ptr<SqlConnection> open_postgres_connection(const PostgresOptions& options);

}  // namespace qgate::db::detail
