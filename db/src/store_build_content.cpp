// The store's build content (docs/fleet.md, "Builds on every host"): a build's bytes kept by their
// sha256 in chunks of kBuildContentChunkBytes (tables build_contents and build_content_chunks), put
// in one transaction and checked against their sha256 on the way in and on the way out.
#include <string>

#include "detail/sql_store_impl.h"
#include "qgate/common/sha256.h"

namespace qgate::db::detail {

namespace {

bool is_sha256_hex(std::string_view text) {
  if (text.size() != 64) return false;
  for (const char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

void require_sha256(std::string_view sha256) {
  if (!is_sha256_hex(sha256))
    throw StoreError(StoreErrorKind::InvalidValue,
                     fmt::format("'{}' is not a sha256 (64 lowercase hex digits)", sha256));
}

}  // namespace

bool SqlStore::has_build_content(std::string_view sha256) {
  return guarded("has_build_content", [&] {
    ScopedStatement select(prepared("SELECT 1 FROM build_contents WHERE sha256 = ?"));
    bind_all(*select, sha256);
    return select->step();
  });
}

bool SqlStore::put_build_content(std::string_view sha256, std::istream& content) {
  require_sha256(sha256);
  return guarded("put_build_content", [&] {
    SqlTransaction transaction(*connection_, TransactionKind::Write);
    connection_->lock_key(fmt::format("build content {}", sha256));
    {
      ScopedStatement select(prepared("SELECT 1 FROM build_contents WHERE sha256 = ?"));
      bind_all(*select, sha256);
      if (select->step()) return false;
    }
    // The chunks refer to their content's row: it comes first, its sizes filled in at the end.
    {
      ScopedStatement insert(prepared(
          "INSERT INTO build_contents (sha256, size_bytes, chunk_bytes, chunk_count, created_ms) VALUES (?, 0, ?, 0, ?)"));
      bind_all(*insert, sha256, kBuildContentChunkBytes, now_ms());
      insert->exec();
    }
    common::Sha256 hash;
    std::string chunk(static_cast<std::size_t>(kBuildContentChunkBytes), '\0');
    std::int64_t size = 0, chunks = 0;
    while (content) {
      content.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      const auto got = static_cast<std::size_t>(content.gcount());
      if (got == 0) break;
      const std::string_view bytes(chunk.data(), got);
      hash.update(bytes.data(), bytes.size());
      ScopedStatement insert(
          prepared("INSERT INTO build_content_chunks (sha256, chunk_index, data) VALUES (?, ?, ?)"));
      bind_all(*insert, sha256, chunks);
      insert->bind_blob(3, bytes);
      insert->exec();
      size += static_cast<std::int64_t>(got);
      ++chunks;
    }
    if (content.bad())
      throw StoreError(StoreErrorKind::Io,
                       fmt::format("the content of build {} could not be read to its end; nothing stored", sha256));
    if (const std::string actual = hash.hex_digest(); actual != sha256)
      throw StoreError(StoreErrorKind::InvalidValue,
                       fmt::format("the content given for build {} hashes to {} ({} bytes); nothing stored", sha256,
                                   actual, size));
    ScopedStatement update(prepared("UPDATE build_contents SET size_bytes = ?, chunk_count = ? WHERE sha256 = ?"));
    bind_all(*update, size, chunks, sha256);
    update->exec();
    transaction.commit();
    return true;
  });
}

bool SqlStore::read_build_content(std::string_view sha256, const BuildContentSink& sink) {
  struct Stored {
    std::int64_t size_bytes;
    std::int64_t chunk_count;
  };
  const std::optional<Stored> stored = guarded("read_build_content", [&]() -> std::optional<Stored> {
    ScopedStatement select(prepared("SELECT size_bytes, chunk_count FROM build_contents WHERE sha256 = ?"));
    bind_all(*select, sha256);
    if (!select->step()) return std::nullopt;
    return Stored{select->int64(0), select->int64(1)};
  });
  if (!stored) return false;
  // One chunk a call: the store's other callers go on between chunks, and the sink runs unlocked.
  // Stored content never changes, so the chunks need no common snapshot; the hash checks the whole.
  common::Sha256 hash;
  std::int64_t size = 0;
  for (std::int64_t index = 0; index < stored->chunk_count; ++index) {
    const std::string chunk = guarded("read_build_content", [&] {
      ScopedStatement select(
          prepared("SELECT data FROM build_content_chunks WHERE sha256 = ? AND chunk_index = ?"));
      bind_all(*select, sha256, index);
      if (!select->step())
        throw StoreError(StoreErrorKind::Corrupt,
                         fmt::format("the stored content of build {} is damaged: chunk {} of {} is missing", sha256,
                                     index, stored->chunk_count));
      return select->text(0);
    });
    hash.update(chunk.data(), chunk.size());
    size += static_cast<std::int64_t>(chunk.size());
    sink(chunk);
  }
  const std::string actual = hash.hex_digest();
  if (size != stored->size_bytes || actual != sha256)
    throw StoreError(StoreErrorKind::Corrupt,
                     fmt::format("the stored content of build {} is damaged: its chunks hold {} bytes hashing to {}, "
                                 "not the {} bytes stored",
                                 sha256, size, actual, stored->size_bytes));
  return true;
}

}  // namespace qgate::db::detail
