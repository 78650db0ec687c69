// The SQLite engine: SQLiteCpp statements behind SqlStatement, the file's pragmas, the schema version
// in PRAGMA user_version, and SQLite's error codes as StoreErrorKind.
#include "detail/sqlite_connection.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <unordered_map>

#include <SQLiteCpp/SQLiteCpp.h>
#include <fmt/format.h>

#include "detail/sql_checked.h"

namespace qgate::db::detail {

namespace {

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

/// Runs `body`, turning SQLite::Exception into SqlEngineError.
template <class Body>
auto sqlite_call(Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const SQLite::Exception& error) {
    throw SqlEngineError(kind_from_sqlite_code(error.getErrorCode()), error.what(),
                         fmt::format("sqlite {}", error.getExtendedErrorCode()));
  }
}

// Creates the database file with mode 0600 before SQLite touches it. SQLite's unix VFS gives the
// -wal and -shm files the mode of the database file, so all three stay private to the daemon's
// user. Done with open(2)+fchmod rather than umask(2): umask is process-wide and racy with threads.
void create_private_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == EEXIST) return;  // created meanwhile by someone else: theirs to keep as it is
    throw SqlEngineError(StoreErrorKind::CannotOpen, fmt::format("create database {}: {}", path.string(),
                                                                 std::strerror(errno)), "errno");
  }
  // open(2) applies the umask; fchmod makes it exactly 0600 whatever the umask.
  const int chmod_result = ::fchmod(fd, S_IRUSR | S_IWUSR);
  const int chmod_errno = errno;
  ::close(fd);
  if (chmod_result != 0) {
    throw SqlEngineError(StoreErrorKind::CannotOpen,
                         fmt::format("chmod 0600 {}: {}", path.string(), std::strerror(chmod_errno)), "errno");
  }
}

class SqliteStatement final : public SqlStatement {
 public:
  SqliteStatement(SQLite::Database& database, const std::string& sql)
      : handle_(database.getHandle()), statement_(sqlite_call([&] { return SQLite::Statement(database, sql); })) {}

  void bind(int index, const StoredValue& value) override {
    sqlite_call([&] {
      if (const auto* i = std::get_if<std::int64_t>(&value)) statement_.bind(index, *i);
      else if (const auto* d = std::get_if<double>(&value)) statement_.bind(index, *d);
      else if (const auto* s = std::get_if<std::string>(&value)) statement_.bind(index, *s);
      else statement_.bind(index);  // NULL
    });
  }
  void bind_blob(int index, std::string_view bytes) override {
    sqlite_call([&] { // A null pointer would bind NULL: an empty blob binds a pointer to no bytes.
      statement_.bind(index, bytes.empty() ? "" : bytes.data(), static_cast<int>(bytes.size())); });
  }
  bool step() override {
    return sqlite_call([&] { return statement_.executeStep(); });
  }
  StoredValue value(int column) const override {
    return sqlite_call([&]() -> StoredValue {
      const SQLite::Column read = statement_.getColumn(column);
      switch (read.getType()) {
        case SQLITE_INTEGER: return read.getInt64();
        case SQLITE_FLOAT: return read.getDouble();
        case SQLITE_NULL: return std::monostate{};
        case SQLITE_BLOB: return std::string(static_cast<const char*>(read.getBlob()), static_cast<std::size_t>(read.getBytes()));
        default: return read.getString();
      }
    });
  }
  std::int64_t exec() override {
    return sqlite_call([&]() -> std::int64_t {
      while (statement_.executeStep()) {
      }  // an INSERT ... RETURNING run for its effect alone
      return sqlite3_changes(handle_);
    });
  }
  void reset() override {
    statement_.tryReset();
    statement_.clearBindings();
  }

 private:
  sqlite3* handle_;
  mutable SQLite::Statement statement_;
};

class SqliteConnection final : public SqlConnection {
 public:
  explicit SqliteConnection(const SqliteOptions& options)
      : where_(options.path.string()), database_(open(options)) {
    configure(options);
  }

  SqlEngine engine() const override { return SqlEngine::Sqlite; }
  const std::string& where() const override { return where_; }

  SqlStatement& prepared(const std::string& sql) override {
    auto found = statements_.find(sql);
    if (found == statements_.end()) {
      found = statements_.emplace(sql, std::make_unique<SqliteStatement>(database_, sql)).first;
    }
    return *found->second;
  }
  void execute_script(std::string_view sql) override {
    sqlite_call([&] { database_.exec(std::string(sql)); });
  }

  void begin(TransactionKind kind) override {
    // IMMEDIATE takes the write lock at once, so a read-then-write never fails half-way on a lock
    // another connection took between the two.
    sqlite_call([&] { database_.exec(kind == TransactionKind::Write ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED"); });
  }
  void commit() override {
    sqlite_call([&] { database_.exec("COMMIT"); });
    if (durable_commit_) {
      durable_commit_ = false;
      database_.tryExec("PRAGMA synchronous = NORMAL");
    }
  }
  void rollback() noexcept override {
    database_.tryExec("ROLLBACK");
    if (durable_commit_) {
      durable_commit_ = false;
      database_.tryExec("PRAGMA synchronous = NORMAL");
    }
  }

  int schema_version() override {
    return sqlite_call([&] { return database_.execAndGet("PRAGMA user_version").getInt(); });
  }
  void set_schema_version(int version) override {
    execute_script(fmt::format("PRAGMA user_version = {}", version));
  }
  void lock_for_migration() override {}  // BEGIN IMMEDIATE holds the file's write lock already
  void lock_key(std::string_view) override {}   // so does every write transaction

  std::string integrity_check() override {
    return sqlite_call([&] {
      SQLite::Statement check(database_, "PRAGMA integrity_check");
      std::string report;
      while (check.executeStep()) {
        if (!report.empty()) report += '\n';
        report += check.getColumn(0).getString();
      }
      return report;
    });
  }

  std::string glob_condition(std::string_view column) const override { return fmt::format("{} GLOB ?", column); }
  std::string glob_argument(std::string_view glob) const override { return std::string(glob); }
  std::string_view claim_lock_clause() const override { return ""; }

  void make_next_commit_durable() override {
    // synchronous=NORMAL (configure) survives a crash of the process; FULL also a power cut.
    execute_script("PRAGMA synchronous = FULL");
    durable_commit_ = true;
  }

 private:
  static SQLite::Database open(const SqliteOptions& options) {
    return sqlite_call([&] {
      if (!options.read_only && !std::filesystem::exists(options.path)) create_private_file(options.path);
      const int flags = options.read_only ? SQLite::OPEN_READONLY : SQLite::OPEN_READWRITE;
      return SQLite::Database(options.path.string(), flags | SQLITE_OPEN_NOFOLLOW, options.busy_timeout_ms);
    });
  }

  void configure(const SqliteOptions& options) {
    sqlite_call([&] {
      // WAL: readers (CLI queries, the dashboard) never block the daemon's writes, and a commit is
      // one append instead of a rollback-journal dance. It is a property of the file, so a
      // read-only connection leaves it as the writer set it.
      if (!options.read_only) {
        const std::string mode = database_.execAndGet("PRAGMA journal_mode = WAL").getString();
        if (mode != "wal") {
          throw SqlEngineError(StoreErrorKind::Other,
                               fmt::format("cannot switch to WAL (journal_mode is '{}')", mode), "journal_mode");
        }
      }
      // synchronous=NORMAL is durable in WAL mode against a crash of the process (every commit is
      // in the -wal file before the call returns) and never corrupts the file; only an OS crash or
      // power cut can lose the last commits before a checkpoint. Runs can be measured again, so
      // that trade buys a sync-free commit per run; a submitted job alone commits with FULL.
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

  std::string where_;
  SQLite::Database database_;
  // Declared after database_ so the statements are finalized before the connection closes.
  std::unordered_map<std::string, std::unique_ptr<SqliteStatement>> statements_;
  bool durable_commit_ = false;
};

}  // namespace

std::unique_ptr<SqlConnection> open_sqlite_connection(const SqliteOptions& options) {
  return std::make_unique<SqliteConnection>(options);
}

}  // namespace qgate::db::detail
