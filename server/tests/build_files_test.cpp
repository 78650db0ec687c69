// Tests of BuildFiles (docs/fleet.md, "Builds on every host"): on a store of one host a build runs
// from its upload's file as before; on a shared store (PostgreSQL, the ctest fixture's server) a
// daemon's copy is fetched from the database and checked, concurrent fetches are safe, and a build
// whose content is missing or damaged fails with its name and sha256, leaving no file behind.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "qgate/common/sha256.h"
#include "qgate/db/postgres_store.h"
#include "qgate/db/sqlite_store.h"
#include "qgate/server/build_files.h"
#include "qgate/server/job_failure.h"
#include "test_postgres.h"

namespace qgate::server {
namespace {

/// A fresh directory, removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    char pattern[] = "/tmp/qgate-build-files-XXXXXX";
    path_ = mkdtemp(pattern);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Three chunks' worth and a bit of every byte value.
std::string build_bytes() {
  std::string bytes(2 * db::kBuildContentChunkBytes + 1000, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 7) % 256);
  return bytes;
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> names;
  if (!std::filesystem::exists(dir)) return names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  return names;
}

class SharedBuildFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto& server = test_support::TestPostgres::for_process();
    if (!server.available()) GTEST_SKIP() << "no PostgreSQL server: " << server.why_unavailable();
    database_.emplace(server.fresh_database());
    store_ = open();
    bytes_ = build_bytes();
    build_.sha256 = common::sha256_hex(bytes_.data(), bytes_.size());
    build_.name = "travelling";
    build_.artifact_path = "/another/host/artifacts/" + build_.sha256 + ".so";
    build_.id = store_->insert_build(build_).id;
  }
  std::unique_ptr<db::Store> open() {
    db::PostgresOptions options;
    options.address = database_->conninfo();
    return db::open_postgres_store(options);
  }
  void put_content() {
    std::istringstream in(bytes_);
    ASSERT_TRUE(store_->put_build_content(build_.sha256, in));
  }
  void run_sql(const std::string& sql) {
    std::unique_ptr<PGconn, decltype(&PQfinish)> connection(PQconnectdb(database_->conninfo().c_str()), &PQfinish);
    std::unique_ptr<PGresult, decltype(&PQclear)> result(PQexec(connection.get(), sql.c_str()), &PQclear);
    ASSERT_EQ(PQresultStatus(result.get()), PGRES_COMMAND_OK) << PQresultErrorMessage(result.get());
  }
  std::string artifacts() const { return dir_.path() + "/artifacts"; }
  std::string expected_path() const { return artifacts() + "/" + build_.sha256 + ".so"; }

  ScratchDir dir_;
  std::optional<test_support::TestDatabase> database_;
  std::unique_ptr<db::Store> store_;
  std::string bytes_;
  db::Build build_;
};

TEST_F(SharedBuildFilesTest, ABuildMissingHereIsFetchedFromTheDatabaseAndKept) {
  put_content();
  BuildFiles files(*store_, artifacts());
  const std::string path = files.local_path(build_);
  EXPECT_EQ(path, expected_path());
  EXPECT_EQ(common::sha256_file_hex(path), build_.sha256);
  EXPECT_EQ(files_in(artifacts()), std::vector<std::string>{build_.sha256 + ".so"});
  // Kept: found on disk the next time, with the database's copy gone.
  run_sql("DELETE FROM build_content_chunks");
  EXPECT_EQ(files.local_path(build_), expected_path());
}

TEST_F(SharedBuildFilesTest, AFileThatNoLongerHashesToItsBuildIsFetchedAgain) {
  put_content();
  std::filesystem::create_directories(artifacts());
  std::ofstream(expected_path()) << "edited on disk";
  BuildFiles files(*store_, artifacts());
  EXPECT_EQ(common::sha256_file_hex(files.local_path(build_)), build_.sha256);
}

TEST_F(SharedBuildFilesTest, ConcurrentFetchesOfOneBuildAreSafe) {
  put_content();
  // Daemon-wide instances of their own (no shared lock) and stores of their own, all at once.
  std::vector<std::thread> threads;
  std::vector<std::string> paths(4);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      auto store = open();
      BuildFiles files(*store, artifacts());
      paths[i] = files.local_path(build_);
    });
  for (auto& thread : threads) thread.join();
  for (const std::string& path : paths) EXPECT_EQ(path, expected_path());
  EXPECT_EQ(common::sha256_file_hex(expected_path()), build_.sha256);
  EXPECT_EQ(files_in(artifacts()), std::vector<std::string>{build_.sha256 + ".so"});
}

TEST_F(SharedBuildFilesTest, ADamagedChunkFailsTheFetchAndLeavesNoFile) {
  put_content();
  // One byte of the second chunk changed in the database.
  run_sql("UPDATE build_content_chunks SET data = set_byte(data, 100, (get_byte(data, 100) + 1) % 256) "
          "WHERE chunk_index = 1");
  BuildFiles files(*store_, artifacts());
  try {
    files.local_path(build_);
    FAIL() << "a damaged build was fetched";
  } catch (const JobFailure& failure) {
    const std::string message = failure.what();
    EXPECT_NE(message.find(build_.sha256), std::string::npos) << message;
    EXPECT_NE(message.find("'travelling'"), std::string::npos) << message;
    EXPECT_NE(message.find("damaged"), std::string::npos) << message;
  }
  EXPECT_TRUE(files_in(artifacts()).empty()) << "left behind: " << files_in(artifacts()).front();
}

TEST_F(SharedBuildFilesTest, ABuildInNeitherPlaceFailsNamingIt) {
  BuildFiles files(*store_, artifacts());
  try {
    files.local_path(build_);
    FAIL() << "a build with no content anywhere was given a path";
  } catch (const JobFailure& failure) {
    const std::string message = failure.what();
    EXPECT_NE(message.find(build_.sha256), std::string::npos) << message;
    EXPECT_NE(message.find("neither on this host"), std::string::npos) << message;
  }
  EXPECT_TRUE(files_in(artifacts()).empty());
}

TEST_F(SharedBuildFilesTest, ASubmitSharesTheUploadOnce) {
  std::filesystem::create_directories(artifacts());
  std::ofstream(expected_path(), std::ios::binary) << bytes_;
  BuildFiles files(*store_, artifacts());
  files.share(expected_path(), build_.sha256);
  EXPECT_TRUE(store_->has_build_content(build_.sha256));
  files.share(expected_path(), build_.sha256);  // already there: nothing read
  std::string read;
  ASSERT_TRUE(store_->read_build_content(build_.sha256, [&](std::string_view chunk) { read.append(chunk); }));
  EXPECT_TRUE(read == bytes_);
}

TEST(SingleHostBuildFiles, ABuildRunsFromItsUploadAndNothingIsShared) {
  ScratchDir dir;
  auto store = db::open_sqlite_store({.path = dir.path() + "/qgate.db"});
  const std::string upload = dir.path() + "/artifacts/upload.so";
  std::filesystem::create_directories(dir.path() + "/artifacts");
  std::ofstream(upload) << "bytes";
  db::Build build;
  build.sha256 = common::sha256_hex("bytes", 5);
  build.artifact_path = upload;
  BuildFiles files(*store, dir.path() + "/artifacts");
  EXPECT_FALSE(store->shared_by_hosts());
  files.share(upload, build.sha256);
  EXPECT_FALSE(store->has_build_content(build.sha256)) << "no content in SQLite";
  EXPECT_EQ(files.local_path(build), upload);
}

}  // namespace
}  // namespace qgate::server
