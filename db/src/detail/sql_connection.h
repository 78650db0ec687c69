// The one seam between the store and a database engine: a connection that prepares statements,
// runs scripts and transactions, and a statement that binds StoredValues and reads rows back as
// StoredValues. The store's SQL is written once, in the subset both engines run (docs/fleet.md,
// "One schema, two engines"); each engine's connection turns it into its own dialect where the two
// differ (parameter marks, GLOB, the schema version's home) and maps its errors onto StoreErrorKind.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "qgate/db/records.h"

namespace qgate::db::detail {

/// A prepared statement. Parameters are numbered from 1 (`?` marks, or `?N` for the N-th); columns
/// of a row from 0.
class SqlStatement {
 public:
  virtual ~SqlStatement() = default;

  virtual void bind(int index, const StoredValue& value) = 0;
  /// Binds bytes as a blob (SQLite BLOB, PostgreSQL bytea): any byte values, NUL included. A blob
  /// column reads back through value() and text() as those bytes.
  virtual void bind_blob(int index, std::string_view bytes) = 0;
  /// The next row of the result (the statement runs at the first call); false past the last.
  virtual bool step() = 0;
  /// A column of the current row.
  virtual StoredValue value(int column) const = 0;
  /// Runs a statement that returns no rows; the number of rows it changed.
  virtual std::int64_t exec() = 0;
  /// Runs an INSERT ... RETURNING key to its end; the new row's key.
  std::int64_t exec_returning_key();
  /// Forgets the bindings and the result, ready to run again.
  virtual void reset() = 0;

  bool is_null(int column) const { return std::holds_alternative<std::monostate>(value(column)); }
  std::int64_t int64(int column) const;
  double real(int column) const;
  std::string text(int column) const;
};

/// The transaction a store operation runs in.
enum class TransactionKind {
  Write,  // takes the write lock up front (SQLite: BEGIN IMMEDIATE)
  Read,   // one consistent snapshot for several reads
};

/// The engines, for the few statements whose meaning (not spelling) differs between them.
enum class SqlEngine { Sqlite, Postgresql };

class SqlConnection {
 public:
  virtual ~SqlConnection() = default;

  virtual SqlEngine engine() const = 0;
  /// Where the data lives, for messages: a file path, or a PostgreSQL address without its password.
  virtual const std::string& where() const = 0;
  /// A statement prepared once per connection and reused (cached by its text).
  virtual SqlStatement& prepared(const std::string& sql) = 0;
  /// Runs several statements separated by semicolons (a migration file).
  virtual void execute_script(std::string_view sql) = 0;

  virtual void begin(TransactionKind kind) = 0;
  virtual void commit() = 0;
  virtual void rollback() noexcept = 0;

  /// The schema version the database is at (0 when it has none yet), and setting it inside the
  /// migration's transaction.
  virtual int schema_version() = 0;
  virtual void set_schema_version(int version) = 0;
  /// Held from here to the end of the transaction: no other connection migrates meanwhile.
  virtual void lock_for_migration() = 0;
  /// Held from here to the end of the transaction: no other connection's transaction holds `key` at
  /// the same time (a build's sha256 about to be inserted, a trend point about to be rewritten).
  /// Nothing to do where a write transaction holds the whole database's write lock (SQLite).
  virtual void lock_key(std::string_view key) = 0;

  /// The engine's own consistency check; "ok" when healthy.
  virtual std::string integrity_check() = 0;

  /// "column GLOB ?" in the engine's words, and the pattern to bind to it.
  virtual std::string glob_condition(std::string_view column) const = 0;
  virtual std::string glob_argument(std::string_view glob) const = 0;
  /// What a claim's SELECT appends so that concurrent claimers skip each other's rows (PostgreSQL:
  /// FOR UPDATE SKIP LOCKED); empty where the write lock already serialises claims.
  virtual std::string_view claim_lock_clause() const = 0;

  /// The next commit only is synced to stable storage before it returns (a submitted job).
  virtual void make_next_commit_durable() = 0;
};

/// A transaction that rolls back unless committed.
class SqlTransaction {
 public:
  SqlTransaction(SqlConnection& connection, TransactionKind kind) : connection_(connection) {
    connection_.begin(kind);
  }
  ~SqlTransaction() {
    if (!done_) connection_.rollback();
  }
  SqlTransaction(const SqlTransaction&) = delete;
  SqlTransaction& operator=(const SqlTransaction&) = delete;

  void commit() {
    connection_.commit();
    done_ = true;
  }

 private:
  SqlConnection& connection_;
  bool done_ = false;
};

/// A cached statement, reset on entry and on exit so it never holds a result or a read snapshot.
class ScopedStatement {
 public:
  explicit ScopedStatement(SqlStatement& statement) : statement_(statement) { statement_.reset(); }
  ~ScopedStatement() { statement_.reset(); }
  ScopedStatement(const ScopedStatement&) = delete;
  ScopedStatement& operator=(const ScopedStatement&) = delete;

  SqlStatement* operator->() { return &statement_; }
  SqlStatement& operator*() { return statement_; }

 private:
  SqlStatement& statement_;
};

}  // namespace qgate::db::detail
