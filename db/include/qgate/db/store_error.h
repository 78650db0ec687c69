// StoreError: the one exception type the store throws, whatever the backend underneath.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace qgate::db {

/// What went wrong, in backend-neutral terms, so callers can react (retry on Busy, alert on Full)
/// without knowing SQLite's or PostgreSQL's error codes.
enum class StoreErrorKind {
  Other,
  NotFound,      // the row an update names does not exist
  Constraint,    // a uniqueness, foreign-key or CHECK constraint refused the write
  ReadOnly,      // the database, its file or its directory cannot be written
  Busy,          // another writer held the lock past the busy timeout
  Full,          // disk full or the configured size limit reached
  Corrupt,       // the file is damaged or is not a database
  SchemaTooNew,  // the database was migrated by a newer qgate than this one
  InvalidValue,  // a stored value this library cannot read (unknown state name, bad JSON)
  CannotOpen,    // the file cannot be opened or created
  Io,            // the file system failed a read or write (EIO, a file size limit)
};

std::string_view to_string(StoreErrorKind kind);

class StoreError : public std::runtime_error {
 public:
  StoreError(StoreErrorKind kind, const std::string& message)
      : std::runtime_error(message), kind_(kind) {}

  StoreErrorKind kind() const noexcept { return kind_; }

 private:
  StoreErrorKind kind_;
};

}  // namespace qgate::db
