// Streams an upload to a private temporary file, hashing as it goes, then renames it by its hash.
#include "qgate/server/artifact_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace qgate::server {

int remove_unfinished_builds(const std::string& dir) {
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(kUploadingPrefix) && !name.starts_with(kFetchingPrefix)) continue;
    std::error_code gone;
    if (std::filesystem::remove(entry.path(), gone)) ++removed;
  }
  return removed;
}

ArtifactUpload::ArtifactUpload(const std::string& dir, int64_t max_bytes) : dir_(dir), max_bytes_(max_bytes) {
  std::filesystem::create_directories(dir_);
  std::string tpl = dir_ + "/" + std::string(kUploadingPrefix) + "XXXXXX";
  fd_ = mkstemp(tpl.data());
  if (fd_ < 0) throw std::runtime_error("cannot create an upload file in " + dir_ + ": " + std::strerror(errno));
  fchmod(fd_, 0600);
  temp_path_ = tpl;
}

ArtifactUpload::~ArtifactUpload() {
  if (fd_ >= 0) close(fd_);
  if (!committed_ && !temp_path_.empty()) unlink(temp_path_.c_str());
}

bool ArtifactUpload::append(const std::string& bytes, std::string* error) {
  if (size_ + int64_t(bytes.size()) > max_bytes_) {
    *error = "upload exceeds the limit of " + std::to_string(max_bytes_) + " bytes";
    return false;
  }
  if (head_.size() < 64) head_ += bytes.substr(0, 64 - head_.size());
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = write(fd_, bytes.data() + off, bytes.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *error = std::string("cannot store the upload: ") + std::strerror(errno);
      return false;
    }
    off += size_t(n);
  }
  hash_.update(bytes.data(), bytes.size());
  size_ += int64_t(bytes.size());
  return true;
}

std::string ArtifactUpload::commit(std::string* sha256, std::string* error) {
  if (fsync(fd_) != 0) {
    *error = std::string("cannot store the upload: ") + std::strerror(errno);
    return "";
  }
  close(fd_);
  fd_ = -1;
  *sha256 = hash_.hex_digest();
  const std::string final_path = dir_ + "/" + *sha256 + ".so";
  // The same bytes uploaded again: the stored file stays as it is (its temporary twin is removed by
  // the destructor). Renaming over it would give the path a new inode under a worker that is
  // starting on it, whose sandbox allowed the old one, and its load would be refused.
  if (stored_build_mismatch(final_path, *sha256).empty()) return final_path;
  if (rename(temp_path_.c_str(), final_path.c_str()) != 0) {
    *error = std::string("cannot store the upload: ") + std::strerror(errno);
    return "";
  }
  committed_ = true;
  return final_path;
}

std::string stored_build_mismatch(const std::string& path, const std::string& sha256) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return "the stored build's file is missing: " + path;
  const std::string actual = common::sha256_file_hex(path);
  if (actual.empty()) return "the stored build's file cannot be read: " + path;
  if (actual != sha256)
    return "the stored build " + path + " has changed since it was uploaded (sha256 " + actual.substr(0, 12) +
           ", uploaded as " + sha256.substr(0, 12) + "); it is not run";
  return "";
}

}  // namespace qgate::server
