// The SQLite store's engine half: opening the file (mode 0600, WAL, pragmas), the migrations and
// the schema version, the prepared-statement cache and the integrity check. The queries live by
// table group beside it (detail/sqlite_store_impl.h lists them).
#include "qgate/db/sqlite_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "detail/migrations.h"
#include "detail/sqlite_store_impl.h"

namespace qgate::db::detail {

StoreErrorKind kind_from_sqlite_code(int sqlite_code) {
  if (sqlite_code < 0) return StoreErrorKind::Other;  // SQLiteCpp's own misuse errors
  switch (sqlite_code & 0xff) {                       // primary code of an extended one
    case SQLITE_CONSTRAINT: return StoreErrorKind::Constraint;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH: return StoreErrorKind::ReadOnly;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return StoreErrorKind::Busy;
    case SQLITE_FULL: return StoreErrorKind::Full;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return StoreErrorKind::Corrupt;
    case SQLITE_CANTOPEN: return StoreErrorKind::CannotOpen;
    case SQLITE_IOERR: return StoreErrorKind::Io;
    default: return StoreErrorKind::Other;
  }
}

namespace {

// Creates the database file with mode 0600 before SQLite touches it. SQLite's unix VFS gives the
// -wal and -shm files the mode of the database file, so all three stay private to the daemon's
// user. Done with open(2)+fchmod rather than umask(2): umask is process-wide and racy with threads.
void create_private_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return;  // created meanwhile by someone else: theirs to keep as it is
    throw StoreError(StoreErrorKind::CannotOpen,
                     fmt::format("create database {}: {}", path.string(), std::strerror(errno)));
  }
  // open(2) applies the umask; fchmod makes it exactly 0600 whatever the umask.
  const int chmod_result = ::fchmod(fd, S_IRUSR | S_IWUSR);
  const int chmod_errno = errno;
  ::close(fd);
  if (chmod_result != 0) {
    throw StoreError(StoreErrorKind::CannotOpen, fmt::format("chmod 0600 {}: {}", path.string(),
                                                             std::strerror(chmod_errno)));
  }
}

}  // namespace

int SqliteStore::schema_version() {
  return guarded("schema_version", [&] { return read_user_version(); });
}

std::string SqliteStore::integrity_check() {
  return guarded("integrity_check", [&] {
    SQLite::Statement check(database_, "PRAGMA integrity_check");
    std::string report;
    while (check.executeStep()) {
      if (!report.empty()) report += '\n';
      report += check.getColumn(0).getString();
    }
    return report;
  });
}

SQLite::Database SqliteStore::open_database(const SqliteOptions& options) {
  return detail::checked_sqlite("open", options.path.string(), [&] {
    if (!options.read_only && !std::filesystem::exists(options.path)) {
      create_private_file(options.path);
    }
    const int flags = options.read_only ? SQLite::OPEN_READONLY : SQLite::OPEN_READWRITE;
    return SQLite::Database(options.path.string(), flags | SQLITE_OPEN_NOFOLLOW, options.busy_timeout_ms);
  });
}

void SqliteStore::configure(const SqliteOptions& options) {
  detail::checked_sqlite("configure", path_, [&] {
    // WAL: readers (CLI queries, the dashboard) never block the daemon's writes, and a commit is
    // one append instead of a rollback-journal dance. It is a property of the file, so a
    // read-only connection leaves it as the writer set it.
    if (!read_only_) {
      const std::string mode = database_.execAndGet("PRAGMA journal_mode = WAL").getString();
      if (mode != "wal") {
        throw StoreError(StoreErrorKind::Other,
                         fmt::format("{}: cannot switch to WAL (journal_mode is '{}')", path_, mode));
      }
    }
    // synchronous=NORMAL is durable in WAL mode against a crash of the process (every commit is
    // in the -wal file before the call returns) and never corrupts the file; only an OS crash or
    // power cut can lose the last commits before a checkpoint. Runs can be measured again, so
    // that trade buys a sync-free commit per run; create_job alone commits with FULL.
    database_.exec("PRAGMA synchronous = NORMAL");
    // SQLite leaves REFERENCES unenforced unless asked, per connection.
    database_.exec("PRAGMA foreign_keys = ON");
    if (options.max_size_bytes) {
      const std::int64_t page_size = database_.execAndGet("PRAGMA page_size").getInt64();
      const std::int64_t pages = std::max<std::int64_t>(1, *options.max_size_bytes / page_size);
      database_.exec(fmt::format("PRAGMA max_page_count = {}", pages));
    }
  });
}

void SqliteStore::migrate() {
  const std::span<const detail::Migration> migrations = detail::embedded_migrations();
  const int known = static_cast<int>(migrations.size());
  const int found = detail::checked_sqlite("migrate", path_, [&] { return read_user_version(); });
  if (found > known) {
    throw StoreError(StoreErrorKind::SchemaTooNew,
                     fmt::format("{}: database schema version {} is newer than this qgate knows "
                                 "({}); it was written by a newer qgate, refusing to open it",
                                 path_, found, known));
  }
  if (found == known) return;
  if (read_only_) {
    throw StoreError(StoreErrorKind::ReadOnly,
                     fmt::format("{}: database schema version {} needs migrating to {}, which a "
                                 "read-only open cannot do",
                                 path_, found, known));
  }
  for (const detail::Migration& migration : migrations) {
    detail::checked_sqlite(fmt::format("migration {}", migration.name), path_, [&] {
      // Each migration and its version bump commit together. The version is read again under
      // the write lock so two processes opening a fresh file do not both apply it.
      SQLite::Transaction transaction(database_, SQLite::TransactionBehavior::IMMEDIATE);
      if (read_user_version() >= migration.version) return;
      database_.exec(std::string(migration.sql));
      after_migration(migration.version);
      database_.exec(fmt::format("PRAGMA user_version = {}", migration.version));
      transaction.commit();
    });
  }
}

int build_rollups_version() {
  static const int version = [] {
    int last = 0;
    for (const Migration& migration : embedded_migrations()) {
      if (migration.sql.find("TABLE build_rollups") != std::string_view::npos) last = migration.version;
    }
    return last;
  }();
  return version;
}

void SqliteStore::after_migration(int version) {
  // Every existing run's trend point, by the statement the write path uses (kRollupRecompute).
  if (version == build_rollups_version()) {
    database_.exec("DELETE FROM build_rollups");
    database_.exec(rollup_recompute("1"));
  }
}

int SqliteStore::read_user_version() { return database_.execAndGet("PRAGMA user_version").getInt(); }

SQLite::Statement& SqliteStore::prepared(const std::string& sql) {
  auto found = statements_.find(sql);
  if (found == statements_.end()) {
    found = statements_.emplace(sql, std::make_unique<SQLite::Statement>(database_, sql)).first;
  }
  return *found->second;
}

}  // namespace qgate::db::detail

namespace qgate::db {

std::unique_ptr<Store> open_sqlite_store(const SqliteOptions& options) {
  return std::make_unique<detail::SqliteStore>(options);
}

int sqlite_schema_version_known() {
  return static_cast<int>(detail::embedded_migrations().size());
}

}  // namespace qgate::db
