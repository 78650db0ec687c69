// The store's start: opening an engine's connection, the migrations (one set of files for both
// engines, each translated into the engine's dialect: detail/sql_dialect.h), the schema version and
// the integrity check. The queries live by table group beside it (detail/sql_store_impl.h).
#include <algorithm>

#include "detail/migrations.h"
#include "detail/postgres_connection.h"
#include "detail/sql_dialect.h"
#include "detail/sql_store_impl.h"
#include "detail/sqlite_connection.h"
#include "qgate/db/postgres_store.h"
#include "qgate/db/sqlite_store.h"

namespace qgate::db::detail {

int SqlStore::schema_version() {
  return guarded("schema_version", [&] { return connection_->schema_version(); });
}

std::string SqlStore::integrity_check() {
  return guarded("integrity_check", [&] { return connection_->integrity_check(); });
}

void SqlStore::migrate() {
  const std::span<const Migration> migrations = embedded_migrations();
  const int known = static_cast<int>(migrations.size());
  const std::string& where = connection_->where();
  const int found = checked_sql("migrate", where, [&] { return connection_->schema_version(); });
  if (found > known) {
    throw StoreError(StoreErrorKind::SchemaTooNew,
                     fmt::format("{}: database schema version {} is newer than this qgate knows "
                                 "({}); it was written by a newer qgate, refusing to open it",
                                 where, found, known));
  }
  if (found == known) return;
  if (read_only_) {
    throw StoreError(StoreErrorKind::ReadOnly,
                     fmt::format("{}: database schema version {} needs migrating to {}, which a "
                                 "read-only open cannot do",
                                 where, found, known));
  }
  for (const Migration& migration : migrations) {
    checked_sql(fmt::format("migration {}", migration.name), where, [&] {
      // Each migration and its version bump commit together. The version is read again under
      // the migration lock so two daemons opening a fresh database do not both apply it.
      SqlTransaction transaction(*connection_, TransactionKind::Write);
      connection_->lock_for_migration();
      if (connection_->schema_version() >= migration.version) return;
      connection_->execute_script(migration_for_engine(migration.sql, connection_->engine()));
      after_migration(migration.version);
      connection_->set_schema_version(migration.version);
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

void SqlStore::after_migration(int version) {
  // Every existing run's trend point, by the statement the write path uses (kRollupRecompute).
  if (version == build_rollups_version()) {
    connection_->execute_script("DELETE FROM build_rollups");
    connection_->execute_script(rollup_recompute("1 = 1"));
  }
}

}  // namespace qgate::db::detail

namespace qgate::db {

std::unique_ptr<Store> open_sqlite_store(const SqliteOptions& options) {
  auto connection = detail::checked_sql("open", options.path.string(),
                                        [&] { return detail::open_sqlite_connection(options); });
  return std::make_unique<detail::SqlStore>(std::move(connection), options.read_only);
}


int schema_version_known() { return static_cast<int>(detail::embedded_migrations().size()); }

std::unique_ptr<Store> open_postgres_store(const PostgresOptions& options) {
  auto connection = detail::checked_sql("open", "postgresql",
                                        [&] { return detail::open_postgres_connection(options); });
  return std::make_unique<detail::SqlStore>(std::move(connection), options.read_only);
}

bool is_postgres_address(std::string_view address) {
  if (address.starts_with("postgresql://") || address.starts_with("postgres://")) return true;
  // libpq's keyword=value form ("host=/run/pg dbname=qgate"): its first word is one of libpq's keywords.
  static constexpr std::string_view kKeywords[] = {
      "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "service", "options",
      "application_name", "connect_timeout", "sslmode", "sslrootcert", "sslcert", "sslkey", "target_session_attrs",
      "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout",
      "channel_binding", "gssencmode", "client_encoding", "requirepeer", "load_balance_hosts"};
  const auto first = address.find_first_not_of(" \t");
  if (first == std::string_view::npos) return false;
  const auto equals = address.find('=', first);
  if (equals == std::string_view::npos) return false;
  std::string_view keyword = address.substr(first, equals - first);
  keyword = keyword.substr(0, keyword.find_last_not_of(" \t") + 1);
  return std::find(std::begin(kKeywords), std::end(kKeywords), keyword) != std::end(kKeywords);
}

}  // namespace qgate::db
