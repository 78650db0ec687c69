// One declaration per stored record: the table, its key, and each column with the member of the row
// struct (records.h) it holds and how that member is stored. Every insert, upsert, select and row
// read of these tables is made from the declaration, so a column is named once and no column is read
// by its position. Engine neutral: a column's value is a StoredValue (NULL, integer, real or text),
// and each store engine binds and reads those (detail/sql_records.h, for both engines).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "qgate/db/records.h"

namespace qgate::db {

template <class Row>
struct ColumnDeclaration {
  std::string_view name;
  std::function<StoredValue(const Row&)> store;         // the member as stored
  std::function<void(Row&, const StoredValue&)> load;  // the stored value into the member; throws StoreError
  bool nullable = false;                                // the member is optional: NULL is none
};

template <class Row>
struct RecordDeclaration {
  std::string_view table;
  std::string_view row_name;   // how an error names a row, before its key: "job" (job 7), "verdict of job"
  std::string_view key;        // the column an upsert conflicts on, or the generated id
  bool generated_key = false;  // true: the engine assigns the key on insert (it is not inserted)
  std::vector<ColumnDeclaration<Row>> columns;
  // A child record (a verdict's type ratios, a run's samples) is stored under its parent's key
  // (`key`, not among `columns`) and, when positioned, its place in the parent's list (`position`).
  bool positioned = false;

  /// "a, b, c", or "t.a, t.b, t.c" with an alias.
  std::string column_list(std::string_view alias = {}) const;
  /// The columns an insert writes: all but a generated key.
  std::vector<const ColumnDeclaration<Row>*> inserted() const;
  int count() const { return static_cast<int>(columns.size()); }
};

/// How a series field enters a run's series key (make_series_key in records.h).
enum class SeriesKeyPart {
  fixed,              // one of the key's first fields, written out in make_series_key (frozen: v1)
  appended_when_set,  // appended after them when not empty, so runs without it keep their key
  apart,              // not hashed: the rollups and compare keep it beside the key (tokens, host)
};

/// One field of SeriesFields: its column (the same name in runs and build_rollups, and the name of the
/// API messages' field it fills) and its part in the series key.
struct SeriesDimension {
  ColumnDeclaration<SeriesFields> column;
  SeriesKeyPart key_part = SeriesKeyPart::fixed;
};

/// The series fields, once, in the order the rollups' key and the API list them.
const std::vector<SeriesDimension>& series_dimensions();
/// "profile, weight_type, ..." or "r.profile, r.weight_type, ..." with an alias.
std::string series_column_list(std::string_view alias = {});
/// The series fields as columns of a row that holds them (Run, TrendRow, TrendSummary, CompareRun),
/// named "alias.column" with an alias.
template <class Row>
std::vector<ColumnDeclaration<Row>> series_columns(std::string_view alias = {});

const RecordDeclaration<Build>& build_record();
const RecordDeclaration<Job>& job_record();
const RecordDeclaration<Run>& run_record();
const RecordDeclaration<ParityCaseRecord>& parity_case_record();
const RecordDeclaration<Verdict>& verdict_record();
const RecordDeclaration<CotenantSummary>& cotenant_record();

// Child records: rows stored under a parent's key, which the row struct does not hold.
const RecordDeclaration<TypeRatioRow>& type_ratio_record();              // under job_id, positioned
const RecordDeclaration<MemoryLeakRow>& leak_record();                   // under job_id, positioned
const RecordDeclaration<OutputIdentityRow>& output_identity_record();     // under job_id, one per job
const RecordDeclaration<Sample>& sample_record();                        // under run_id
const RecordDeclaration<CotenantSample>& cotenant_sample_record();       // under run_id

// Projections: what a query reads of joined tables, declared the same way. A column's name is the
// expression it selects ("r.id", "b.name"); they are never inserted.

/// A trend row: runs r joined with builds b and (for the timing) jobs j.
const RecordDeclaration<TrendRow>& trend_row_projection();
/// A trend point of build_rollups, its figures taken from one of the co-tenant sets its row keeps:
/// "quiet", "open" (quiet or unknown) or "all" (0006_build_rollups).
const RecordDeclaration<TrendSummary>& trend_summary_projection(std::string_view set);
/// A compare run: runs r with its job's timing through jobs j.
const RecordDeclaration<CompareRun>& compare_run_projection();

// --- How a member is stored (used by the declarations) ---

namespace stored {

std::int64_t as_int(const StoredValue& value, std::string_view column);
double as_real(const StoredValue& value, std::string_view column);
std::string as_text(const StoredValue& value, std::string_view column);

/// A member stored as itself: integers (and bool as 0/1) as integer, double as real, strings as
/// text, and std::optional of those as the same or NULL.
template <class Row, class T>
ColumnDeclaration<Row> column(std::string_view name, T Row::*member) {
  auto store = [member](const Row& row) -> StoredValue {
    const T& value = row.*member;
    if constexpr (std::is_same_v<T, std::string>) {
      return value;
    } else if constexpr (std::is_same_v<T, bool>) {
      return std::int64_t{value ? 1 : 0};
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<std::int64_t>(value);
    } else if constexpr (std::is_floating_point_v<T>) {
      return static_cast<double>(value);
    } else {  // std::optional<U>
      using U = typename T::value_type;
      if (!value) return std::monostate{};
      if constexpr (std::is_same_v<U, std::string>) return *value;
      else if constexpr (std::is_same_v<U, bool>) return std::int64_t{*value ? 1 : 0};
      else if constexpr (std::is_integral_v<U>) return static_cast<std::int64_t>(*value);
      else return static_cast<double>(*value);
    }
  };
  auto load = [member, name](Row& row, const StoredValue& value) {
    T& target = row.*member;
    if constexpr (std::is_same_v<T, std::string>) {
      target = as_text(value, name);
    } else if constexpr (std::is_same_v<T, bool>) {
      target = as_int(value, name) != 0;
    } else if constexpr (std::is_integral_v<T>) {
      target = static_cast<T>(as_int(value, name));
    } else if constexpr (std::is_floating_point_v<T>) {
      target = static_cast<T>(as_real(value, name));
    } else {
      using U = typename T::value_type;
      if (std::holds_alternative<std::monostate>(value)) {
        target.reset();
      } else if constexpr (std::is_same_v<U, std::string>) {
        target = as_text(value, name);
      } else if constexpr (std::is_same_v<U, bool>) {
        target = as_int(value, name) != 0;
      } else if constexpr (std::is_integral_v<U>) {
        target = static_cast<U>(as_int(value, name));
      } else {
        target = static_cast<U>(as_real(value, name));
      }
    }
  };
  constexpr bool nullable = !std::is_same_v<T, std::string> && !std::is_arithmetic_v<T>;
  return {name, store, load, nullable};
}

/// An enum member stored as its word (to_string / from_string of records.h).
template <class Row, class E>
ColumnDeclaration<Row> word(std::string_view name, E Row::*member, std::string_view (*to_word)(E),
                            E (*from_word)(std::string_view)) {
  return {name, [member, to_word](const Row& row) -> StoredValue { return std::string(to_word(row.*member)); },
          [member, from_word, name](Row& row, const StoredValue& value) {
            row.*member = from_word(as_text(value, name));
          }};
}

/// An optional enum member stored as its word, or as NULL or '' for none.
template <class Row, class E>
ColumnDeclaration<Row> optional_word(std::string_view name, std::optional<E> Row::*member,
                                     std::string_view (*to_word)(E), E (*from_word)(std::string_view)) {
  return {name,
          [member, to_word](const Row& row) -> StoredValue {
            if (!(row.*member)) return std::monostate{};
            return std::string(to_word(*(row.*member)));
          },
          [member, from_word, name](Row& row, const StoredValue& value) {
            if (std::holds_alternative<std::monostate>(value)) return row.*member = std::nullopt, void();
            const std::string text = as_text(value, name);
            if (text.empty()) row.*member = std::nullopt;
            else row.*member = from_word(text);
          },
          true};
}

}  // namespace stored

}  // namespace qgate::db
