// The schema migrations compiled into the store (generated from db/migrations/*.sql at build time).
#pragma once

#include <span>
#include <string_view>

namespace qgate::db::detail {

struct Migration {
  int version;              // the PRAGMA user_version the database has after this migration
  std::string_view name;    // file name without .sql, e.g. "0001_initial"
  std::string_view sql;     // the whole file; may hold several statements
};

/// All migrations in order: element i has version i + 1.
std::span<const Migration> embedded_migrations();

}  // namespace qgate::db::detail
