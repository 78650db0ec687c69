// Opening the SQLite implementation of qgate::db::Store.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>

#include "qgate/db/store.h"

namespace qgate::db {

struct SqliteOptions {
  std::filesystem::path path;          // created with mode 0600 when missing (unless read_only)
  bool read_only = false;              // no migrations; every write fails with StoreError(ReadOnly)
  int busy_timeout_ms = 5000;          // how long a writer waits for another connection's lock
  std::optional<std::int64_t> max_size_bytes;  // cap on the file; beyond it writes fail with Full
};

/// Opens (creating when missing) and migrates the database. Throws StoreError: SchemaTooNew when
/// the file was migrated by a newer qgate, CannotOpen / Corrupt / ReadOnly as the case may be.
std::unique_ptr<Store> open_sqlite_store(const SqliteOptions& options);

}  // namespace qgate::db
