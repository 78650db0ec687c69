// The store's error boundary and binding helpers. An engine's connection throws SqlEngineError (its
// message, its own code and a backend-neutral kind); checked_sql turns it into StoreError carrying
// file:line, the store operation and where the data lives. Binding turns C++ values into
// StoredValues: optionals become NULL, bools 0/1, every integer a 64-bit one.
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "qgate/db/store_error.h"
#include "sql_connection.h"

namespace qgate::db::detail {

/// A failure an engine reported, before the store names the operation it failed.
class SqlEngineError : public std::runtime_error {
 public:
  SqlEngineError(StoreErrorKind kind, const std::string& message, std::string code)
      : std::runtime_error(message), kind_(kind), code_(std::move(code)) {}
  StoreErrorKind kind() const noexcept { return kind_; }
  /// The engine's own code: "sqlite 2067", "sqlstate 23505".
  const std::string& code() const noexcept { return code_; }

 private:
  StoreErrorKind kind_;
  std::string code_;
};

inline std::string_view base_name(std::string_view path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

/// Runs `body`; an engine failure becomes StoreError("file:line: operation: message (code) [where]").
/// StoreErrors thrown inside pass through unchanged.
template <class Body>
auto checked_sql(std::string_view operation, std::string_view where, Body&& body,
                 std::source_location location = std::source_location::current()) -> decltype(body()) {
  try {
    return body();
  } catch (const SqlEngineError& error) {
    throw StoreError(error.kind(), fmt::format("{}:{}: {}: {} ({}) [{}]", base_name(location.file_name()),
                                               location.line(), operation, error.what(), error.code(), where));
  } catch (const nlohmann::json::exception& error) {
    throw StoreError(StoreErrorKind::InvalidValue,
                     fmt::format("{}:{}: {}: bad JSON: {} [{}]", base_name(location.file_name()),
                                 location.line(), operation, error.what(), where));
  }
}

// --- Binding ---

inline StoredValue stored(std::nullopt_t) { return std::monostate{}; }
inline StoredValue stored(const StoredValue& value) { return value; }
template <std::integral Integer>
StoredValue stored(Integer value) {
  return static_cast<std::int64_t>(value);
}
template <std::floating_point Real>
StoredValue stored(Real value) {
  return static_cast<double>(value);
}
inline StoredValue stored(const std::string& value) { return value; }
inline StoredValue stored(std::string_view value) { return std::string(value); }
inline StoredValue stored(const char* value) { return std::string(value); }
template <class T>
StoredValue stored(const std::optional<T>& value) {
  return value ? stored(*value) : StoredValue{};
}

template <class Value>
void bind_value(SqlStatement& statement, int index, const Value& value) {
  statement.bind(index, stored(value));
}

/// Binds the arguments to parameters 1, 2, ... in order.
template <class... Values>
void bind_all(SqlStatement& statement, const Values&... values) {
  int index = 0;
  (bind_value(statement, ++index, values), ...);
}

/// Binds the arguments to parameters first, first + 1, ... in order.
template <class... Values>
void bind_all_from(SqlStatement& statement, int first, const Values&... values) {
  int index = first - 1;
  (bind_value(statement, ++index, values), ...);
}

}  // namespace qgate::db::detail
