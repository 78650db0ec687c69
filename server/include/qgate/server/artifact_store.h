// Uploaded kernel builds on disk: <data dir>/artifacts/<sha256>.so, named from their hash and never
// from anything a client sent. An upload is written to a temporary file while it is hashed, and
// renamed into place only when it is complete.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "qgate/common/sha256.h"

namespace qgate::server {

/// How the builds' folder names a file still being written: an upload being received, or a
/// build being fetched from the database (build_files.h). Either is renamed to <sha256>.so when whole.
inline constexpr std::string_view kUploadingPrefix = ".upload-";
inline constexpr std::string_view kFetchingPrefix = ".fetch-";

/// Removes from `dir` the files that uploads and fetches were writing when an earlier life of this
/// daemon was killed (nothing else removes them then). Call it only while holding the data dir's
/// lock, before serving: no upload or fetch of this daemon is under way. Returns how many it removed.
int remove_unfinished_builds(const std::string& dir);

class ArtifactUpload {
 public:
  ArtifactUpload(const std::string& dir, int64_t max_bytes);
  ~ArtifactUpload();  // removes the temporary file unless committed
  /// False (with `error`) when the upload exceeds its bound or the disk refuses the write.
  bool append(const std::string& bytes, std::string* error);
  int64_t size() const { return size_; }
  /// First bytes of the upload (for a quick ELF check).
  const std::string& head() const { return head_; }
  /// Finishes the hash, moves the file to <dir>/<sha256>.so and returns that path. When that file
  /// is already there with these bytes it is kept as it is (same inode) and the new copy dropped.
  std::string commit(std::string* sha256, std::string* error);

 private:
  std::string dir_;
  std::string temp_path_;
  int fd_ = -1;
  int64_t max_bytes_;
  int64_t size_ = 0;
  std::string head_;
  common::Sha256 hash_;
  bool committed_ = false;
};

/// "" when the stored build at `path` still hashes to `sha256`; else why not (missing, unreadable,
/// or bytes that changed since the upload). Checked before every use of a stored build: a file
/// edited on disk must never be run under the name and verdicts of the bytes that were uploaded.
std::string stored_build_mismatch(const std::string& path, const std::string& sha256);

}  // namespace qgate::server
