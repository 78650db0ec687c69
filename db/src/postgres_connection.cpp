// The PostgreSQL engine: libpq behind SqlStatement. The store's SQL gets PostgreSQL's parameter marks
// (detail/sql_dialect.h) and is prepared on the server once per statement and parameter types;
// values travel as text and come back typed by their column's type, except blobs: a bytea parameter
// is sent in binary format (its bytes as they are) and a bytea column read back from its hex form. A connection lost
// between transactions is opened again on the next use; SQLSTATEs become StoreErrorKind. libpq is loaded when the first
// connection opens (detail/libpq_library.h); every call goes through its table, pq_.
#include "detail/postgres_connection.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "detail/libpq_library.h"
#include "detail/sql_checked.h"
#include "detail/sql_dialect.h"

namespace qgate::db::detail {

namespace {

// Type OIDs of PostgreSQL's catalog (pg_type.dat), the few the store's values travel as.
constexpr Oid kBoolOid = 16, kByteaOid = 17, kInt8Oid = 20, kInt2Oid = 21, kInt4Oid = 23, kTextOid = 25, kFloat4Oid = 700,
              kFloat8Oid = 701, kNumericOid = 1700;

StoreErrorKind kind_from_sqlstate(std::string_view state) {
  if (state.starts_with("23")) return StoreErrorKind::Constraint;  // integrity constraint violation
  if (state == "25006" || state.starts_with("42501") || state.starts_with("28")) return StoreErrorKind::ReadOnly;
  if (state == "40001" || state == "40P01" || state == "55P03" || state == "57014") return StoreErrorKind::Busy;
  if (state == "53100" || state == "53200" || state == "54000") return StoreErrorKind::Full;
  if (state == "XX001" || state == "XX002") return StoreErrorKind::Corrupt;
  if (state.starts_with("08") || state == "57P01" || state == "57P02" || state == "57P03" || state == "3D000")
    return StoreErrorKind::CannotOpen;
  if (state == "58030") return StoreErrorKind::Io;
  if (state.starts_with("22")) return StoreErrorKind::InvalidValue;  // data exception
  return StoreErrorKind::Other;
}

/// A PGresult freed, by the libpq that made it, when it goes out of scope.
struct ResultDeleter {
  decltype(&::PQclear) clear = nullptr;
  void operator()(PGresult* result) const { clear(result); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

std::string trimmed(const char* message) {
  std::string text = message ? message : "";
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

/// The address without its password, for messages.
std::string address_for_messages(const LibpqFunctions& pq, const std::string& address) {
  char* error = nullptr;
  PQconninfoOption* options = pq.PQconninfoParse(address.c_str(), &error);
  if (!options) {
    pq.PQfreemem(error);
    return "postgresql (unparsable address)";
  }
  std::string shown;
  for (PQconninfoOption* option = options; option->keyword; ++option) {
    const std::string_view keyword = option->keyword;
    if (!option->val || keyword == "password") continue;
    if (keyword == "host" || keyword == "hostaddr" || keyword == "port" || keyword == "dbname" || keyword == "user")
      shown += fmt::format("{}{}={}", shown.empty() ? "" : " ", keyword, option->val);
  }
  pq.PQconninfoFree(options);
  return shown.empty() ? "postgresql (from PG* variables)" : "postgresql " + shown;
}

/// A bytea value in PostgreSQL's hex output (\x and two digits a byte) as its bytes.
std::string bytes_from_hex(const char* text, std::size_t length) {
  const std::string_view hex(text, length);
  if (!hex.starts_with("\\x") || hex.size() % 2 != 0)
    throw SqlEngineError(StoreErrorKind::InvalidValue, "a bytea value not in hex output", "read");
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw SqlEngineError(StoreErrorKind::InvalidValue, "a bytea value with a character that is not hex", "read");
  };
  std::string bytes((hex.size() - 2) / 2, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<char>(digit(hex[2 + 2 * i]) << 4 | digit(hex[3 + 2 * i]));
  return bytes;
}

class PostgresConnection;

class PostgresStatement final : public SqlStatement {
 public:
  PostgresStatement(PostgresConnection& connection, std::string sql);

  void bind(int index, const StoredValue& value) override {
    if (index < 1) throw SqlEngineError(StoreErrorKind::Other, fmt::format("parameter {}", index), "bind");
    if (static_cast<std::size_t>(index) > values_.size()) values_.resize(static_cast<std::size_t>(index));
    values_[static_cast<std::size_t>(index - 1)] = value;
    blobs_.erase(index);
  }
  void bind_blob(int index, std::string_view bytes) override {
    bind(index, std::string(bytes));
    blobs_.insert(index);
  }
  bool step() override {
    if (!result_) run();
    if (row_ + 1 >= pq_.PQntuples(result_.get())) return false;
    ++row_;
    return true;
  }
  StoredValue value(int column) const override;
  std::int64_t exec() override {
    run();
    const char* changed = pq_.PQcmdTuples(result_.get());
    return changed && *changed ? std::atoll(changed) : 0;
  }
  void reset() override {
    values_.clear();
    blobs_.clear();
    result_.reset();
    row_ = -1;
  }

 private:
  void run();

  PostgresConnection& connection_;
  const LibpqFunctions& pq_;  // the connection's
  std::string sql_;  // in PostgreSQL's marks
  std::vector<StoredValue> values_;
  std::set<int> blobs_;  // the parameters (from 1) bound as blobs
  Result result_;
  int row_ = -1;
  // The server-side statement for each list of parameter types, and the connection it lives on
  // (prepared statements do not outlive a reconnect).
  std::map<std::vector<Oid>, std::string> server_names_;
  int server_generation_ = -1;
};

class PostgresConnection final : public SqlConnection {
 public:
  PostgresConnection(const PostgresOptions& options, const LibpqFunctions& pq)
      : pq_(pq),
        address_(options.address),
        where_(address_for_messages(pq_, options.address)),
        read_only_(options.read_only),
        connect_timeout_s_(options.connect_timeout_s) {
    connect();
  }
  ~PostgresConnection() override {
    statements_.clear();
    if (connection_) pq_.PQfinish(connection_);
  }

  SqlEngine engine() const override { return SqlEngine::Postgresql; }
  const std::string& where() const override { return where_; }

  SqlStatement& prepared(const std::string& sql) override {
    auto found = statements_.find(sql);
    if (found == statements_.end()) {
      found = statements_.emplace(sql, std::make_unique<PostgresStatement>(*this, numbered_parameters(sql))).first;
    }
    return *found->second;
  }
  void execute_script(std::string_view sql) override {
    ensure_connected();
    Result result = owned(pq_.PQexec(connection_, std::string(sql).c_str()));
    check(result.get(), "script");
  }

  void begin(TransactionKind kind) override {
    ensure_connected();
    if (kind == TransactionKind::Write && durable_next_write_) {
      // A server (or this role or database) may run with synchronous_commit off, which acknowledges a
      // commit before its WAL is flushed: this transaction's commit waits for the flush whatever the
      // setting; a stronger setting (remote_write, remote_apply) is left as it is.
      durable_next_write_ = false;
      execute_script(
          "BEGIN; SELECT set_config('synchronous_commit', 'on', true) "
          "WHERE current_setting('synchronous_commit') = 'off'");
    } else {
      execute_script(kind == TransactionKind::Write ? "BEGIN" : "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    }
    in_transaction_ = true;
  }
  void commit() override {
    in_transaction_ = false;
    execute_script("COMMIT");
  }
  void rollback() noexcept override {
    in_transaction_ = false;
    if (connection_ && pq_.PQstatus(connection_) == CONNECTION_OK) pq_.PQclear(pq_.PQexec(connection_, "ROLLBACK"));
  }

  int schema_version() override {
    ensure_connected();
    Result exists = owned(pq_.PQexec(connection_, "SELECT to_regclass('schema_migrations') IS NOT NULL"));
    check(exists.get(), "schema version");
    if (std::string_view(pq_.PQgetvalue(exists.get(), 0, 0)) != "t") return 0;
    Result version = owned(pq_.PQexec(connection_, "SELECT COALESCE(max(version), 0) FROM schema_migrations"));
    check(version.get(), "schema version");
    return std::atoi(pq_.PQgetvalue(version.get(), 0, 0));
  }
  void set_schema_version(int version) override {
    execute_script(fmt::format(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_ms BIGINT NOT NULL);"
        "INSERT INTO schema_migrations (version, applied_ms) "
        "VALUES ({}, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)",
        version));
  }
  void lock_for_migration() override {
    // One key for qgate's migrations ("qgate" in ASCII), held to the end of the transaction.
    execute_script("SELECT pg_advisory_xact_lock(113103097116101)");
  }
  void lock_key(std::string_view key) override {
    SqlStatement& lock = prepared("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))");
    lock.reset();
    lock.bind(1, std::string(key));
    lock.exec();
    lock.reset();
  }

  std::string integrity_check() override {
    // PostgreSQL checks pages as it reads them; what it can be left with is an index that a failed
    // build marked invalid.
    ensure_connected();
    Result result = owned(pq_.PQexec(connection_,
                                     "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                                     "JOIN pg_namespace n ON n.oid = c.relnamespace "
                                     "WHERE NOT i.indisvalid AND n.nspname = current_schema() ORDER BY 1"));
    check(result.get(), "integrity check");
    std::string report;
    for (int row = 0; row < pq_.PQntuples(result.get()); ++row)
      report += fmt::format("{}index {} is invalid", report.empty() ? "" : "\n", pq_.PQgetvalue(result.get(), row, 0));
    return report.empty() ? "ok" : report;
  }

  std::string glob_condition(std::string_view column) const override { return fmt::format("{} ~ ?", column); }
  std::string glob_argument(std::string_view glob) const override { return glob_to_regex(glob); }
  std::string_view claim_lock_clause() const override { return " FOR UPDATE SKIP LOCKED"; }

  void make_next_commit_durable() override { durable_next_write_ = true; }

  PGconn* handle() {
    ensure_connected();
    return connection_;
  }
  int generation() const { return generation_; }
  const LibpqFunctions& pq() const { return pq_; }
  /// `result`, freed by this connection's libpq when it goes out of scope.
  Result owned(PGresult* result) const { return Result(result, ResultDeleter{pq_.PQclear}); }

  /// Throws SqlEngineError unless `result` succeeded.
  void check(const PGresult* result, std::string_view what) {
    const ExecStatusType status = result ? pq_.PQresultStatus(result) : PGRES_FATAL_ERROR;
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return;
    const char* state = result ? pq_.PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
    if (!state && pq_.PQstatus(connection_) != CONNECTION_OK) {
      throw SqlEngineError(StoreErrorKind::CannotOpen,
                           fmt::format("{}: the connection to the database was lost: {}", what,
                                       trimmed(pq_.PQerrorMessage(connection_))),
                           "connection");
    }
    const std::string message = trimmed(result ? pq_.PQresultErrorMessage(result) : pq_.PQerrorMessage(connection_));
    throw SqlEngineError(kind_from_sqlstate(state ? state : ""), message,
                         fmt::format("sqlstate {}", state ? state : "none"));
  }

 private:
  void connect() {
    const std::string timeout = std::to_string(connect_timeout_s_);
    // Over TCP, a database host that vanishes without closing the connection (a network cut, a
    // powered-off host) ends a call within about a minute instead of hanging the daemon: keepalive
    // probes after 30 s idle, 10 s apart, 3 unanswered; data unacknowledged for 60 s. The address
    // may set any of these itself, and wins.
    std::vector<const char*> keywords{"connect_timeout",  "application_name",    "client_encoding",
                                      "keepalives",       "keepalives_idle",     "keepalives_interval",
                                      "keepalives_count", "tcp_user_timeout"};
    std::vector<const char*> values{timeout.c_str(), "qgate", "UTF8", "1", "30", "10", "3", "60000"};
    if (!address_.empty()) {
      keywords.push_back("dbname");  // expanded: a URI or "key=value ..." string
      values.push_back(address_.c_str());
    }
    keywords.push_back(nullptr);
    values.push_back(nullptr);
    connection_ = pq_.PQconnectdbParams(keywords.data(), values.data(), 1);
    if (!connection_ || pq_.PQstatus(connection_) != CONNECTION_OK) {
      const std::string why = connection_ ? trimmed(pq_.PQerrorMessage(connection_)) : "out of memory";
      if (connection_) pq_.PQfinish(connection_);
      connection_ = nullptr;
      throw SqlEngineError(StoreErrorKind::CannotOpen, fmt::format("cannot connect: {}", why), "connection");
    }
    configure();
  }

  void configure() {
    ++generation_;
    pq_.PQsetNoticeProcessor(
        connection_, [](void*, const char*) {}, nullptr);
    // bytea comes back in hex, whatever the server's default (value() decodes it).
    Result result =
        owned(pq_.PQexec(connection_, read_only_ ? "SET bytea_output = 'hex'; SET default_transaction_read_only = on"
                                                 : "SET bytea_output = 'hex'"));
    check(result.get(), "configure");
  }

  // A connection lost between transactions is opened again; inside one, the transaction is gone
  // and the statement fails (check names the lost connection).
  void ensure_connected() {
    if (!connection_) {
      connect();
      return;
    }
    if (pq_.PQstatus(connection_) == CONNECTION_OK || in_transaction_) return;
    pq_.PQreset(connection_);
    if (pq_.PQstatus(connection_) != CONNECTION_OK) {
      throw SqlEngineError(StoreErrorKind::CannotOpen,
                           fmt::format("the database cannot be reached: {}", trimmed(pq_.PQerrorMessage(connection_))),
                           "connection");
    }
    configure();
  }

  LibpqFunctions pq_;  // first: where_ is made with it
  std::string address_;
  std::string where_;
  bool read_only_;
  int connect_timeout_s_;
  PGconn* connection_ = nullptr;
  bool in_transaction_ = false;
  bool durable_next_write_ = false;  // make_next_commit_durable: the next write transaction syncs its commit
  int generation_ = 0;
  std::unordered_map<std::string, std::unique_ptr<PostgresStatement>> statements_;
};

PostgresStatement::PostgresStatement(PostgresConnection& connection, std::string sql)
    : connection_(connection), pq_(connection.pq()), sql_(std::move(sql)), result_(connection.owned(nullptr)) {}

void PostgresStatement::run() {
  result_.reset();
  row_ = -1;
  std::vector<Oid> types(values_.size(), 0);
  std::vector<std::string> texts(values_.size());
  std::vector<const char*> pointers(values_.size(), nullptr);
  std::vector<int> lengths(values_.size(), 0);
  std::vector<int> formats(values_.size(), 0);  // 0 text, 1 binary
  for (std::size_t i = 0; i < values_.size(); ++i) {
    const StoredValue& value = values_[i];
    if (const auto* bytes = std::get_if<std::string>(&value); bytes && blobs_.contains(static_cast<int>(i + 1))) {
      types[i] = kByteaOid;
      formats[i] = 1;
      lengths[i] = static_cast<int>(bytes->size());
      pointers[i] = bytes->data();
      continue;
    }
    if (const auto* integer = std::get_if<std::int64_t>(&value)) {
      types[i] = kInt8Oid;
      texts[i] = std::to_string(*integer);
    } else if (const auto* real = std::get_if<double>(&value)) {
      types[i] = kFloat8Oid;
      texts[i] = std::isnan(*real) ? "NaN" : std::isinf(*real) ? (*real > 0 ? "Infinity" : "-Infinity")
                                                               : fmt::format("{}", *real);
    } else if (const auto* text = std::get_if<std::string>(&value)) {
      if (text->find('\0') != std::string::npos)
        throw SqlEngineError(StoreErrorKind::InvalidValue, fmt::format("parameter {} holds a NUL byte", i + 1), "bind");
      types[i] = kTextOid;
      texts[i] = *text;
    } else {
      continue;  // NULL: no value, its type left to the server
    }
    pointers[i] = texts[i].c_str();
  }
  PGconn* handle = connection_.handle();
  if (server_generation_ != connection_.generation()) {
    server_names_.clear();
    server_generation_ = connection_.generation();
  }
  auto name = server_names_.find(types);
  if (name == server_names_.end()) {
    static std::atomic<int> next_name{0};
    const std::string fresh = fmt::format("qgate_{}", ++next_name);
    Result prepared = connection_.owned(
        pq_.PQprepare(handle, fresh.c_str(), sql_.c_str(), static_cast<int>(types.size()), types.data()));
    connection_.check(prepared.get(), "prepare");
    name = server_names_.emplace(types, fresh).first;
  }
  result_.reset(pq_.PQexecPrepared(handle, name->second.c_str(), static_cast<int>(pointers.size()), pointers.data(),
                                   lengths.data(), formats.data(), 0));
  connection_.check(result_.get(), "statement");
}

StoredValue PostgresStatement::value(int column) const {
  if (!result_ || row_ < 0 || column >= pq_.PQnfields(result_.get()))
    throw SqlEngineError(StoreErrorKind::Other, fmt::format("no column {} in this row", column), "read");
  if (pq_.PQgetisnull(result_.get(), row_, column)) return std::monostate{};
  const char* text = pq_.PQgetvalue(result_.get(), row_, column);
  switch (pq_.PQftype(result_.get(), column)) {
    case kInt8Oid:
    case kInt4Oid:
    case kInt2Oid: return static_cast<std::int64_t>(std::strtoll(text, nullptr, 10));
    case kFloat4Oid:
    case kFloat8Oid: return std::strtod(text, nullptr);
    case kNumericOid:  // sum() of integers: a whole number unless it has a point or an exponent
      if (std::string_view(text).find_first_of(".eE") == std::string_view::npos)
        return static_cast<std::int64_t>(std::strtoll(text, nullptr, 10));
      return std::strtod(text, nullptr);
    case kBoolOid: return static_cast<std::int64_t>(text[0] == 't' ? 1 : 0);
    case kByteaOid:
      return bytes_from_hex(text, static_cast<std::size_t>(pq_.PQgetlength(result_.get(), row_, column)));
    default:
      return std::string(text, static_cast<std::size_t>(pq_.PQgetlength(result_.get(), row_, column)));
  }
}

}  // namespace

std::unique_ptr<SqlConnection> open_postgres_connection(const PostgresOptions& options) {
  return std::make_unique<PostgresConnection>(options, libpq());
}

std::unique_ptr<SqlConnection> open_postgres_connection(const PostgresOptions& options,
                                                        const std::string& libpq_library) {
  return std::make_unique<PostgresConnection>(options, load_libpq(libpq_library));
}

std::optional<std::string> postgres_connection_option(SqlConnection& connection, const std::string& keyword) {
  auto& pg = dynamic_cast<PostgresConnection&>(connection);
  PQconninfoOption* options = pg.pq().PQconninfo(pg.handle());
  std::optional<std::string> value;
  for (PQconninfoOption* o = options; o && o->keyword; ++o)
    if (keyword == o->keyword) value = o->val ? o->val : "";
  if (options) pg.pq().PQconninfoFree(options);
  return value;
}

}  // namespace qgate::db::detail
