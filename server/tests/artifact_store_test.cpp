// Uploads on disk (artifact_store.h): stored by their hash, and the same bytes uploaded again leave
// the stored file untouched, so a worker starting on it keeps reading the file its sandbox allowed;
// the files of uploads and fetches an earlier life was killed in are removed, and nothing else.
#include "qgate/server/artifact_store.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace qgate::server {
namespace {

class ArtifactStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("qgate-artifacts-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string upload(const std::string& bytes, std::string* sha256) {
    ArtifactUpload upload(dir_.string(), 1 << 20);
    std::string error;
    EXPECT_TRUE(upload.append(bytes, &error)) << error;
    const std::string path = upload.commit(sha256, &error);
    EXPECT_FALSE(path.empty()) << error;
    return path;
  }
  static ino_t inode(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
    return st.st_ino;
  }

  std::filesystem::path dir_;
};

TEST_F(ArtifactStoreTest, TheSameBytesUploadedAgainLeaveTheStoredFileAsItWas) {
  std::string sha256;
  const std::string path = upload("\x7f" "ELF build bytes", &sha256);
  EXPECT_EQ(path, (dir_ / (sha256 + ".so")).string());
  const ino_t first = inode(path);
  std::string again;
  EXPECT_EQ(upload("\x7f" "ELF build bytes", &again), path);
  EXPECT_EQ(again, sha256);
  EXPECT_EQ(inode(path), first) << "renamed over: a worker's sandbox rule on the old file would refuse it";
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) files += entry.is_regular_file();
  EXPECT_EQ(files, 1u) << "the second upload's temporary file is removed";
}

TEST_F(ArtifactStoreTest, AStoredFileThatNoLongerMatchesIsReplacedByTheUpload) {
  std::string sha256;
  const std::string path = upload("\x7f" "ELF build bytes", &sha256);
  std::ofstream(path, std::ios::trunc) << "edited on disk";
  ASSERT_FALSE(stored_build_mismatch(path, sha256).empty());
  upload("\x7f" "ELF build bytes", &sha256);
  EXPECT_EQ(stored_build_mismatch(path, sha256), "");
}

TEST_F(ArtifactStoreTest, UnfinishedUploadsAndFetchesOfAnEarlierLifeAreRemovedAndNothingElse) {
  std::string sha256;
  const std::string stored = upload("a whole build", &sha256);
  for (const std::string name : {".upload-a1b2c3", ".fetch-Zx9Yw8", "notes.txt", ".hidden"})
    std::ofstream(dir_ / name) << "bytes";
  EXPECT_EQ(remove_unfinished_builds(dir_.string()), 2);
  EXPECT_FALSE(std::filesystem::exists(dir_ / ".upload-a1b2c3"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / ".fetch-Zx9Yw8"));
  EXPECT_TRUE(std::filesystem::exists(stored));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "notes.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir_ / ".hidden"));
  EXPECT_EQ(remove_unfinished_builds((dir_ / "absent").string()), 0);  // no folder yet: nothing to do
}

}  // namespace
}  // namespace qgate::server
