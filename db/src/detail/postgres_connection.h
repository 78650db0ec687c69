// The PostgreSQL engine behind the store: a libpq connection to a database several daemons share.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "qgate/db/postgres_store.h"
#include "sql_connection.h"

namespace qgate::db::detail {

/// Connects (PG* environment variables fill in what the address leaves out) through libpq.so.5,
/// which the first call loads (detail/libpq_library.h). Throws SqlEngineError: CannotOpen when libpq
/// cannot be loaded or the server cannot be reached.
std::unique_ptr<SqlConnection> open_postgres_connection(const PostgresOptions& options);

/// The same through `libpq_library` (a dlopen name or path), loaded for this connection: for tests.
std::unique_ptr<SqlConnection> open_postgres_connection(const PostgresOptions& options,
                                                        const std::string& libpq_library);

/// The value of libpq's option `keyword` on `connection` (a PostgreSQL one), as the connection was
/// made with it; nullopt when libpq has no such option.
std::optional<std::string> postgres_connection_option(SqlConnection& connection, const std::string& keyword);

}  // namespace qgate::db::detail
