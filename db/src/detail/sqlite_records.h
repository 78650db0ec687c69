// The SQLite side of the record declarations (record_declarations.h): the SQL of an insert, upsert or
// select made from a declaration, binding a row's columns, and reading a row back by the
// declaration's columns rather than by hand-counted positions.
#pragma once

#include <sqlite3.h>

#include <string>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include "../record_declarations.h"
#include "qgate/db/store_error.h"

namespace qgate::db::detail {

inline void bind_stored(SQLite::Statement& statement, int index, const StoredValue& value) {
  if (const auto* i = std::get_if<std::int64_t>(&value)) statement.bind(index, *i);
  else if (const auto* d = std::get_if<double>(&value)) statement.bind(index, *d);
  else if (const auto* s = std::get_if<std::string>(&value)) statement.bind(index, *s);
  else statement.bind(index);  // NULL
}

inline StoredValue read_stored(const SQLite::Column& column) {
  switch (column.getType()) {
    case SQLITE_INTEGER: return column.getInt64();
    case SQLITE_FLOAT: return column.getDouble();
    case SQLITE_NULL: return std::monostate{};
    default: return column.getString();
  }
}

/// "INSERT INTO table (columns but a generated key) VALUES (?, ...)".
template <class Row>
std::string insert_sql(const RecordDeclaration<Row>& record) {
  std::string names, marks;
  for (const auto* column : record.inserted()) {
    names += fmt::format("{}{}", names.empty() ? "" : ", ", column->name);
    marks += marks.empty() ? "?" : ", ?";
  }
  return fmt::format("INSERT INTO {} ({}) VALUES ({})", record.table, names, marks);
}

/// insert_sql, and on a conflict on the key every other column replaced (spelled the same in
/// PostgreSQL).
template <class Row>
std::string upsert_sql(const RecordDeclaration<Row>& record) {
  std::string updates;
  for (const auto* column : record.inserted()) {
    if (column->name == record.key) continue;
    updates += fmt::format("{}{} = excluded.{}", updates.empty() ? "" : ", ", column->name, column->name);
  }
  return fmt::format("{} ON CONFLICT ({}) DO UPDATE SET {}", insert_sql(record), record.key, updates);
}

/// Binds the inserted columns of `row` from parameter 1 on, in insert_sql's order.
template <class Row>
void bind_record(SQLite::Statement& statement, const RecordDeclaration<Row>& record, const Row& row) {
  int index = 1;
  for (const auto* column : record.inserted()) bind_stored(statement, index++, column->store(row));
}

/// A child record's insert: its parent's key, its position when it is positioned, then its columns.
template <class Row>
std::string child_insert_sql(const RecordDeclaration<Row>& record) {
  std::string names(record.key), marks = "?";
  if (record.positioned) names += ", position", marks += ", ?";
  for (const auto& column : record.columns) names += fmt::format(", {}", column.name), marks += ", ?";
  return fmt::format("INSERT INTO {} ({}) VALUES ({})", record.table, names, marks);
}

/// Binds a child row under `parent` (and at `position` when the record is positioned).
template <class Row>
void bind_child(SQLite::Statement& statement, const RecordDeclaration<Row>& record, std::int64_t parent,
                std::int64_t position, const Row& row) {
  int index = 1;
  statement.bind(index++, parent);
  if (record.positioned) statement.bind(index++, position);
  for (const auto& column : record.columns) bind_stored(statement, index++, column.store(row));
}

/// "SELECT parent_key, columns FROM table WHERE parent_key <condition> ORDER BY parent_key[, position]":
/// read each row with read_record(record, statement, 1) after column 0, the parent's key.
template <class Row>
std::string child_select_sql(const RecordDeclaration<Row>& record, std::string_view condition,
                             std::string_view then_by = "id") {
  return fmt::format("SELECT {0}, {1} FROM {2} WHERE {0} {3} ORDER BY {0}, {4}", record.key, record.column_list(),
                     record.table, condition, record.positioned ? "position" : then_by);
}

/// Reads a row whose columns first, first + 1, ... are record.column_list()'s, so joined queries
/// can read one record after another. A stored value a member cannot take is StoreError naming the
/// row ("job 7: ...").
template <class Row>
Row read_record(const RecordDeclaration<Row>& record, SQLite::Statement& statement, int first = 0) {
  // The row's key, for an error: its own key column, or a child's parent key, the column before its
  // own (child_select_sql). Read only when a value does not load.
  auto key_of_row = [&]() -> std::string {
    for (int i = 0; i < record.count(); ++i) {
      if (record.columns[static_cast<size_t>(i)].name == record.key) return statement.getColumn(first + i).getString();
    }
    return first > 0 ? statement.getColumn(first - 1).getString() : "?";
  };
  Row row;
  for (int i = 0; i < record.count(); ++i) {
    const auto& column = record.columns[static_cast<size_t>(i)];
    try {
      column.load(row, read_stored(statement.getColumn(first + i)));
    } catch (const StoreError& error) {
      throw StoreError(error.kind(), fmt::format("{} {}: {}", record.row_name, key_of_row(), error.what()));
    }
  }
  return row;
}

}  // namespace qgate::db::detail
