// The SQLite engine behind the store: a connection on one file (created 0600, WAL, foreign keys on).
#pragma once

#include <memory>

#include "qgate/db/sqlite_store.h"
#include "sql_connection.h"

namespace qgate::db::detail {

/// Opens (creating when missing, unless read-only) the file and configures the connection.
/// Throws SqlEngineError.
std::unique_ptr<SqlConnection> open_sqlite_connection(const SqliteOptions& options);

}  // namespace qgate::db::detail
