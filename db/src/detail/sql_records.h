// The SQL side of the record declarations (record_declarations.h), for every engine: the SQL of an
// insert, upsert or select made from a declaration, binding a row's columns, and reading a row back
// by the declaration's columns rather than by hand-counted positions.
#pragma once

#include <string>

#include <fmt/format.h>

#include "../record_declarations.h"
#include "qgate/db/store_error.h"
#include "sql_connection.h"

namespace qgate::db::detail {

/// "INSERT INTO table (columns but a generated key) VALUES (?, ...)".
template <class Row>
std::string insert_values_sql(const RecordDeclaration<Row>& record) {
  std::string names, marks;
  for (const auto* column : record.inserted()) {
    names += fmt::format("{}{}", names.empty() ? "" : ", ", column->name);
    marks += marks.empty() ? "?" : ", ?";
  }
  return fmt::format("INSERT INTO {} ({}) VALUES ({})", record.table, names, marks);
}

/// insert_values_sql, and "RETURNING key" when the engine generates the key: step() the statement
/// once to read the new row's key.
template <class Row>
std::string insert_sql(const RecordDeclaration<Row>& record) {
  return insert_values_sql(record) + (record.generated_key ? fmt::format(" RETURNING {}", record.key) : "");
}

/// insert_values_sql, and on a conflict on the key every other column replaced (spelled the same in
/// PostgreSQL).
template <class Row>
std::string upsert_sql(const RecordDeclaration<Row>& record) {
  std::string updates;
  for (const auto* column : record.inserted()) {
    if (column->name == record.key) continue;
    updates += fmt::format("{}{} = excluded.{}", updates.empty() ? "" : ", ", column->name, column->name);
  }
  return fmt::format("{} ON CONFLICT ({}) DO UPDATE SET {}", insert_values_sql(record), record.key, updates);
}

/// Binds the inserted columns of `row` from parameter 1 on, in insert_sql's order.
template <class Row>
void bind_record(SqlStatement& statement, const RecordDeclaration<Row>& record, const Row& row) {
  int index = 1;
  for (const auto* column : record.inserted()) statement.bind(index++, column->store(row));
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
void bind_child(SqlStatement& statement, const RecordDeclaration<Row>& record, std::int64_t parent,
                std::int64_t position, const Row& row) {
  int index = 1;
  statement.bind(index++, parent);
  if (record.positioned) statement.bind(index++, position);
  for (const auto& column : record.columns) statement.bind(index++, column.store(row));
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
Row read_record(const RecordDeclaration<Row>& record, const SqlStatement& statement, int first = 0) {
  // The row's key, for an error: its own key column, or a child's parent key, the column before its
  // own (child_select_sql). Read only when a value does not load.
  auto key_of_row = [&]() -> std::string {
    for (int i = 0; i < record.count(); ++i) {
      if (record.columns[static_cast<size_t>(i)].name == record.key) return statement.text(first + i);
    }
    return first > 0 ? statement.text(first - 1) : "?";
  };
  Row row;
  for (int i = 0; i < record.count(); ++i) {
    const auto& column = record.columns[static_cast<size_t>(i)];
    try {
      column.load(row, statement.value(first + i));
    } catch (const StoreError& error) {
      throw StoreError(error.kind(), fmt::format("{} {}: {}", record.row_name, key_of_row(), error.what()));
    }
  }
  return row;
}

}  // namespace qgate::db::detail
