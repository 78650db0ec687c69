// Tests of opening a database: migrations, versioning, refusal of newer schemas, file mode, pragmas.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <set>
#include <string>
#include <tuple>

#include <SQLiteCpp/SQLiteCpp.h>

#include "qgate/db/sqlite_store.h"
#include "schema_rewind.h"
#include "store_test_support.h"

namespace qgate::db {
namespace {

using testing::make_build;
using testing::open_store;
using testing::TempDir;

int count_migration_files() {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(QGATE_DB_MIGRATIONS_DIR)) {
    if (entry.path().extension() == ".sql") ++count;
  }
  return count;
}

int raw_user_version(const std::filesystem::path& path) {
  SQLite::Database raw(path.string(), SQLite::OPEN_READONLY);
  return raw.execAndGet("PRAGMA user_version").getInt();
}

/// The names a one-parameter query of the file's schema returns.
std::set<std::string> read_names(const std::filesystem::path& path, const char* sql, const std::string& argument) {
  SQLite::Database raw(path.string(), SQLite::OPEN_READONLY);
  SQLite::Statement select(raw, sql);
  select.bind(1, argument);
  std::set<std::string> names;
  while (select.executeStep()) names.insert(select.getColumn(0).getString());
  return names;
}

std::set<std::string> schema_names(const std::filesystem::path& path, const std::string& type) {
  return read_names(path, "SELECT name FROM sqlite_master WHERE type = ?", type);
}

std::set<std::string> column_names(const std::filesystem::path& path, const std::string& table) {
  return read_names(path, "SELECT name FROM pragma_table_info(?)", table);
}

TEST(Migrations, FreshFileGetsEveryMigrationFile) {
  TempDir dir;
  const auto path = dir.file("qgate.db");
  const int files = count_migration_files();
  ASSERT_GE(files, 1);
  {
    auto store = open_store(path);
    EXPECT_EQ(store->schema_version(), files);
  }
  EXPECT_EQ(schema_version_known(), files);
  EXPECT_EQ(raw_user_version(path), files);

  const auto tables = schema_names(path, "table");
  for (const char* table : {"builds", "jobs", "runs", "samples", "parity_cases", "verdicts",
                            "cotenant", "cotenant_samples"}) {
    EXPECT_TRUE(tables.count(table)) << "missing table " << table;
  }
  const auto indexes = schema_names(path, "index");
  for (const char* index : {"runs_by_series", "runs_by_profile_type", "runs_by_build_series",
                            "runs_by_job", "jobs_by_state", "parity_cases_by_job",
                            "samples_by_run", "cotenant_samples_by_run"}) {
    EXPECT_TRUE(indexes.count(index)) << "missing index " << index;
  }
}

TEST(Migrations, EverySeriesFieldIsAColumnOfRunsAndOfTheTrendPoints) {
  // The series fields are declared once (records.h); a migration gives each its column in runs and
  // in build_rollups, whose key the rollup statement makes from the same declaration.
  TempDir dir;
  const auto path = dir.file("qgate.db");
  { auto store = open_store(path); }
  const auto runs = column_names(path, "runs");
  const auto rollups = column_names(path, "build_rollups");
  const auto fields = series_field_values(SeriesFields{});
  ASSERT_GE(fields.size(), 7u);
  for (const SeriesFieldValue& field : fields) {
    EXPECT_TRUE(runs.count(std::string(field.name))) << "runs lacks series field " << field.name;
    EXPECT_TRUE(rollups.count(std::string(field.name))) << "build_rollups lacks series field " << field.name;
  }
}

TEST(Migrations, ReopeningIsIdempotentAndKeepsData) {
  TempDir dir;
  const auto path = dir.file("qgate.db");
  RowId build_id = 0;
  {
    auto store = open_store(path);
    build_id = store->insert_build(make_build("k", "sha-1")).id;
  }
  for (int reopen = 0; reopen < 2; ++reopen) {
    auto store = open_store(path);
    EXPECT_EQ(store->schema_version(), schema_version_known());
    ASSERT_TRUE(store->find_build(build_id).has_value());
    EXPECT_EQ(store->integrity_check(), "ok");
  }
}

TEST(Migrations, NewerSchemaIsRefusedWithAClearMessage) {
  TempDir dir;
  const auto path = dir.file("qgate.db");
  open_store(path);
  const int newer = schema_version_known() + 1;
  {
    SQLite::Database raw(path.string(), SQLite::OPEN_READWRITE);
    raw.exec("PRAGMA user_version = " + std::to_string(newer));
  }
  try {
    open_store(path);
    FAIL() << "a database from a newer qgate was opened";
  } catch (const StoreError& error) {
    EXPECT_EQ(error.kind(), StoreErrorKind::SchemaTooNew);
    const std::string message = error.what();
    EXPECT_NE(message.find("newer"), std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(newer)), std::string::npos) << message;
  }
  EXPECT_EQ(raw_user_version(path), newer);  // refused, not downgraded
}

// Verdicts written before 0009 named their arms' builds by label alone. The migration refers them to
// the builds by id: a gate's arms to its build and baseline, an A/B of one build's to that build, and
// stores a label only where it says more than the build ("mmq").
TEST(Migrations, Migration0009RefersOldVerdictsToTheirArmsBuilds) {
  TempDir dir;
  const auto path = dir.file("qgate.db");
  RowId a = 0, b = 0, gate = 0, ab = 0;
  {
    auto store = open_store(path);
    a = store->insert_build(make_build("mmq-a", "sha-a-0123456789")).id;
    b = store->insert_build(make_build("mmq-b", "sha-b-0123456789")).id;
    Job gate_job = testing::make_job(a);
    gate_job.baseline_build_id = b;
    gate = store->create_job(gate_job);
    Job ab_job = testing::make_job(a);
    ab_job.kind = "ab";
    ab = store->create_job(ab_job);
    for (auto [job, label_a, label_b] : {std::tuple{gate, "mmq-a@sha-a-01", "mmq-b@sha-b-01"},
                                         std::tuple{ab, "mmq", "f16"}}) {
      Verdict verdict;  // as schema 8 stored it: labels only
      verdict.job_id = job;
      verdict.arm_a_label = label_a;
      verdict.arm_b_label = label_b;
      store->put_verdict(verdict);
    }
  }
  {  // back to schema 8
    SQLite::Database raw(path.string(), SQLite::OPEN_READWRITE);
    testing::rewind_schema_to(raw, 8);
  }
  auto store = open_store(path);
  const auto gate_verdict = store->find_verdict(gate);
  ASSERT_TRUE(gate_verdict);
  EXPECT_EQ(gate_verdict->arm_a_build_id, a);
  EXPECT_EQ(gate_verdict->arm_b_build_id, b);
  EXPECT_EQ(gate_verdict->arm_a_label, "mmq-a@sha-a-01");  // read back from the build
  EXPECT_EQ(gate_verdict->arm_b_label, "mmq-b@sha-b-01");
  const auto ab_verdict = store->find_verdict(ab);
  ASSERT_TRUE(ab_verdict);
  EXPECT_EQ(ab_verdict->arm_a_build_id, a);
  EXPECT_EQ(ab_verdict->arm_b_build_id, a);
  EXPECT_EQ(ab_verdict->arm_a_label, "mmq");
  EXPECT_EQ(ab_verdict->arm_b_label, "f16");

  SQLite::Database raw(path.string(), SQLite::OPEN_READONLY);
  SQLite::Statement labels(raw, "SELECT arm_a_label, arm_b_label FROM verdicts WHERE job_id = ?");
  labels.bind(1, gate);
  ASSERT_TRUE(labels.executeStep());
  EXPECT_EQ(labels.getColumn(0).getString(), "") << "a build's own label is not stored twice";
  EXPECT_EQ(labels.getColumn(1).getString(), "");
}

TEST(Migrations, DatabaseAndWalFilesAreOwnerOnly) {
  TempDir dir;
  const auto path = dir.file("qgate.db");
  // A permissive umask must not leak into the files: the store sets the mode itself.
  const mode_t previous_umask = ::umask(0);
  auto store = open_store(path);
  ::umask(previous_umask);
  store->insert_build(make_build("k", "sha-1"));  // makes sure -wal and -shm exist

  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string file = path.string() + suffix;
    struct stat info {};
    ASSERT_EQ(::stat(file.c_str(), &info), 0) << file << " missing";
    EXPECT_EQ(info.st_mode & 0777, 0600u) << file;
  }
}

TEST(Migrations, ConnectionPragmasAreSet) {
  TempDir dir;
  const auto path = dir.file("qgate.db");
  auto store = open_store(path);
  {
    SQLite::Database raw(path.string(), SQLite::OPEN_READONLY);
    EXPECT_EQ(raw.execAndGet("PRAGMA journal_mode").getString(), "wal");
  }
  // foreign_keys=ON is per connection: a job naming no stored build must be refused.
  Job orphan;
  orphan.build_id = 4242;
  try {
    store->create_job(orphan);
    FAIL() << "foreign key not enforced";
  } catch (const StoreError& error) {
    EXPECT_EQ(error.kind(), StoreErrorKind::Constraint) << error.what();
    EXPECT_NE(std::string(error.what()).find("create_job"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace qgate::db
