// Tests of the store's build content (docs/fleet.md, "Builds on every host"), each case on both
// engines: every byte value (NUL included) round-trips through the chunks, a put is idempotent by
// sha256 and refuses bytes that do not hash to it, and a read detects a chunk damaged or missing.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "engine_fixtures.h"
#include "qgate/common/sha256.h"

namespace qgate::db {
namespace {

/// `size` bytes cycling through 0..255.
std::string every_byte(std::size_t size) {
  std::string bytes(size, '\0');
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(i % 256);
  return bytes;
}

std::string sha256_of(const std::string& bytes) { return common::sha256_hex(bytes.data(), bytes.size()); }

class BuildContentTest : public testing::StoreFixture {
 protected:
  /// The content stored for sha256, read back whole, and the sizes of the chunks as the sink got them.
  bool read_back(const std::string& sha256, std::string* bytes, std::vector<std::size_t>* chunks = nullptr) {
    return store_->read_build_content(sha256, [&](std::string_view chunk) {
      bytes->append(chunk);
      if (chunks) chunks->push_back(chunk.size());
    });
  }
  bool put(const std::string& sha256, const std::string& bytes) {
    std::istringstream in(bytes);
    return store_->put_build_content(sha256, in);
  }
  /// Runs one statement past the store, binding sha256 as ?1.
  void raw_exec(const std::string& sql, const std::string& sha256, const std::string* blob = nullptr) {
    auto connection = raw();
    detail::SqlStatement& statement = connection->prepared(sql);
    statement.bind(1, sha256);
    if (blob) statement.bind_blob(2, *blob);
    statement.exec();
    statement.reset();
  }
};
INSTANTIATE_FOR_BOTH_ENGINES(BuildContentTest);

TEST_P(BuildContentTest, OnlyPostgresqlIsSharedByHosts) {
  EXPECT_EQ(store_->shared_by_hosts(), GetParam() == testing::Engine::Postgresql);
}

TEST_P(BuildContentTest, EveryByteValueRoundTripsThroughChunks) {
  // Two whole chunks and part of a third, every byte value in each.
  const std::string bytes = every_byte(2 * kBuildContentChunkBytes + 300);
  const std::string sha256 = sha256_of(bytes);
  EXPECT_FALSE(store_->has_build_content(sha256));
  EXPECT_TRUE(put(sha256, bytes));
  EXPECT_TRUE(store_->has_build_content(sha256));
  EXPECT_EQ(raw_count("build_contents"), 1);
  EXPECT_EQ(raw_count("build_content_chunks"), 3);

  std::string read;
  std::vector<std::size_t> chunks;
  ASSERT_TRUE(read_back(sha256, &read, &chunks));
  EXPECT_EQ(chunks, (std::vector<std::size_t>{std::size_t(kBuildContentChunkBytes), std::size_t(kBuildContentChunkBytes), 300}));
  ASSERT_EQ(read.size(), bytes.size());
  EXPECT_TRUE(read == bytes) << "the bytes read back differ from those put";
}

TEST_P(BuildContentTest, ASmallBuildWithNulBytesIsOneChunk) {
  const std::string bytes = every_byte(256) + std::string(3, '\0');
  const std::string sha256 = sha256_of(bytes);
  ASSERT_TRUE(put(sha256, bytes));
  std::string read;
  ASSERT_TRUE(read_back(sha256, &read));
  EXPECT_EQ(read, bytes);
  EXPECT_EQ(raw_count("build_content_chunks"), 1);
}

TEST_P(BuildContentTest, APutIsOncePerSha256) {
  const std::string bytes = every_byte(5000);
  const std::string sha256 = sha256_of(bytes);
  ASSERT_TRUE(put(sha256, bytes));
  EXPECT_FALSE(put(sha256, bytes)) << "already stored: nothing read, nothing written";
  EXPECT_FALSE(put(sha256, "other bytes are not even read")) << "the content is known by its sha256";
  EXPECT_EQ(raw_count("build_contents"), 1);
  EXPECT_EQ(raw_count("build_content_chunks"), 1);
  // Another daemon's store on the same database sees it.
  EXPECT_TRUE(reopen()->has_build_content(sha256));
}

TEST_P(BuildContentTest, BytesThatDoNotHashToTheirSha256AreRefusedAndNothingIsWritten) {
  const std::string bytes = every_byte(kBuildContentChunkBytes + 10);
  const std::string claimed = sha256_of("something else");
  try {
    put(claimed, bytes);
    FAIL() << "content under another sha256 was stored";
  } catch (const StoreError& error) {
    EXPECT_EQ(error.kind(), StoreErrorKind::InvalidValue);
    EXPECT_NE(std::string(error.what()).find(sha256_of(bytes)), std::string::npos) << error.what();
  }
  EXPECT_FALSE(store_->has_build_content(claimed));
  EXPECT_EQ(raw_count("build_contents"), 0);
  EXPECT_EQ(raw_count("build_content_chunks"), 0);
  EXPECT_THROW(put("not-a-sha256", bytes), StoreError);
}

TEST_P(BuildContentTest, ContentNeverStoredReadsAsNone) {
  bool called = false;
  EXPECT_FALSE(store_->read_build_content(sha256_of("never put"), [&](std::string_view) { called = true; }));
  EXPECT_FALSE(called);
}

TEST_P(BuildContentTest, ADamagedChunkIsDetected) {
  const std::string bytes = every_byte(2 * kBuildContentChunkBytes);
  const std::string sha256 = sha256_of(bytes);
  ASSERT_TRUE(put(sha256, bytes));
  std::string damaged = bytes.substr(kBuildContentChunkBytes);
  damaged[12345] ^= 0x01;  // one bit of the second chunk
  raw_exec("UPDATE build_content_chunks SET data = ?2 WHERE sha256 = ?1 AND chunk_index = 1", sha256, &damaged);
  std::string read;
  try {
    read_back(sha256, &read);
    FAIL() << "a damaged chunk was read as the build";
  } catch (const StoreError& error) {
    EXPECT_EQ(error.kind(), StoreErrorKind::Corrupt);
    EXPECT_NE(std::string(error.what()).find("damaged"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find(sha256), std::string::npos) << error.what();
  }
}

TEST_P(BuildContentTest, AMissingChunkIsDetected) {
  const std::string bytes = every_byte(2 * kBuildContentChunkBytes);
  const std::string sha256 = sha256_of(bytes);
  ASSERT_TRUE(put(sha256, bytes));
  raw_exec("DELETE FROM build_content_chunks WHERE sha256 = ?1 AND chunk_index = 1", sha256);
  std::string read;
  try {
    read_back(sha256, &read);
    FAIL() << "content with a chunk missing was read as the build";
  } catch (const StoreError& error) {
    EXPECT_EQ(error.kind(), StoreErrorKind::Corrupt);
    EXPECT_NE(std::string(error.what()).find("chunk 1 of 2 is missing"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace qgate::db
