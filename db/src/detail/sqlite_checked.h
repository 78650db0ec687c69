// The checked-call wrapper for SQLiteCpp (the one foreign API of this library): runs a body and turns
// SQLite::Exception into StoreError carrying file:line, the store operation, the SQLite message and
// a backend-neutral kind. Also binding helpers for optional values (rows are read through their
// declarations: sqlite_records.h).
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "qgate/db/store_error.h"

namespace qgate::db::detail {

StoreErrorKind kind_from_sqlite_code(int sqlite_code);

inline std::string_view base_name(std::string_view path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

/// Runs `body`; a SQLite failure becomes StoreError("file:line: operation: message (sqlite N) [db]").
/// StoreErrors thrown inside pass through unchanged.
template <class Body>
auto checked_sqlite(std::string_view operation, std::string_view database, Body&& body,
                    std::source_location where = std::source_location::current())
    -> decltype(body()) {
  try {
    return body();
  } catch (const SQLite::Exception& error) {
    throw StoreError(kind_from_sqlite_code(error.getErrorCode()),
                     fmt::format("{}:{}: {}: {} (sqlite {}) [{}]", base_name(where.file_name()),
                                 where.line(), operation, error.what(),
                                 error.getExtendedErrorCode(), database));
  } catch (const nlohmann::json::exception& error) {
    throw StoreError(StoreErrorKind::InvalidValue,
                     fmt::format("{}:{}: {}: bad JSON: {} [{}]", base_name(where.file_name()),
                                 where.line(), operation, error.what(), database));
  }
}

/// A cached prepared statement, reset on entry and on exit so it never holds a read snapshot
/// (an open snapshot in WAL mode stops checkpoints and lets the -wal file grow).
class ScopedStatement {
 public:
  explicit ScopedStatement(SQLite::Statement& statement) : statement_(statement) {
    statement_.tryReset();
    statement_.clearBindings();
  }
  ~ScopedStatement() { statement_.tryReset(); }
  ScopedStatement(const ScopedStatement&) = delete;
  ScopedStatement& operator=(const ScopedStatement&) = delete;

  SQLite::Statement* operator->() { return &statement_; }
  SQLite::Statement& operator*() { return statement_; }

 private:
  SQLite::Statement& statement_;
};

// --- Binding: optionals become NULL, bools 0/1, every integer INTEGER (64-bit) ---

inline void bind_value(SQLite::Statement& statement, int index, std::nullopt_t) {
  statement.bind(index);
}
template <std::integral Integer>
void bind_value(SQLite::Statement& statement, int index, Integer value) {
  statement.bind(index, static_cast<std::int64_t>(value));
}
template <std::floating_point Real>
void bind_value(SQLite::Statement& statement, int index, Real value) {
  statement.bind(index, static_cast<double>(value));
}
inline void bind_value(SQLite::Statement& statement, int index, const std::string& value) {
  statement.bind(index, value);  // copied by SQLite (SQLITE_TRANSIENT)
}
inline void bind_value(SQLite::Statement& statement, int index, std::string_view value) {
  statement.bind(index, std::string(value));
}
inline void bind_value(SQLite::Statement& statement, int index, const char* value) {
  statement.bind(index, value);
}
template <class T>
void bind_value(SQLite::Statement& statement, int index, const std::optional<T>& value) {
  if (value) {
    bind_value(statement, index, *value);
  } else {
    statement.bind(index);
  }
}

/// Binds the arguments to parameters 1, 2, ... in order.
template <class... Values>
void bind_all(SQLite::Statement& statement, const Values&... values) {
  int index = 0;
  (bind_value(statement, ++index, values), ...);
}

}  // namespace qgate::db::detail
