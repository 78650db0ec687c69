// A build's file on this host: the upload's own on one host, or this daemon's copy fetched from the
// database's (chunked, sha256-checked) content when the store is shared by hosts.
#include "qgate/server/build_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "qgate/common/sha256.h"
#include "qgate/db/store_error.h"
#include "qgate/server/artifact_store.h"
#include "qgate/server/job_failure.h"

namespace qgate::server {

namespace {

/// "build 7 'mmq-k' (sha256 <hex>)", for messages.
std::string build_words(const db::Build& build) {
  return "build " + std::to_string(build.id) + " '" + build.name + "' (sha256 " + build.sha256 + ")";
}

/// A private temporary file beside the builds, removed unless it was renamed into place.
class TemporaryBuildFile {
 public:
  explicit TemporaryBuildFile(const std::string& dir) {
    std::filesystem::create_directories(dir);
    std::string pattern = dir + "/" + std::string(kFetchingPrefix) + "XXXXXX";
    fd_ = mkstemp(pattern.data());  // mode 0600
    if (fd_ < 0) throw JobFailure("cannot create a file in " + dir + " to fetch a build into: " + std::strerror(errno));
    path_ = pattern;
  }
  ~TemporaryBuildFile() {
    if (fd_ >= 0) close(fd_);
    if (!path_.empty()) unlink(path_.c_str());
  }
  TemporaryBuildFile(const TemporaryBuildFile&) = delete;
  TemporaryBuildFile& operator=(const TemporaryBuildFile&) = delete;

  void write(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw JobFailure("cannot write a fetched build to " + path_ + ": " + std::strerror(errno));
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  /// Synced, closed and renamed to `path` (atomically: a reader sees the old file or the whole new one).
  void place_at(const std::string& path) {
    if (fsync(fd_) != 0 || close(fd_) != 0) {
      fd_ = -1;
      throw JobFailure("cannot write a fetched build to " + path_ + ": " + std::strerror(errno));
    }
    fd_ = -1;
    if (rename(path_.c_str(), path.c_str()) != 0)
      throw JobFailure("cannot move a fetched build to " + path + ": " + std::strerror(errno));
    path_.clear();
  }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace

BuildFiles::BuildFiles(db::Store& store, std::string artifacts_dir) : store_(store), dir_(std::move(artifacts_dir)) {}

std::string BuildFiles::path_for(const std::string& sha256) const { return dir_ + "/" + sha256 + ".so"; }

void BuildFiles::share(const std::string& path, const std::string& sha256) {
  if (!store_.shared_by_hosts() || store_.has_build_content(sha256)) return;
  std::ifstream content(path, std::ios::binary);
  if (!content) throw std::runtime_error("cannot read the stored upload " + path + " to share it with the fleet");
  if (store_.put_build_content(sha256, content))
    spdlog::info("build {} stored in the database for the fleet", sha256.substr(0, 12));
}

std::string BuildFiles::local_path(const db::Build& build) {
  if (!store_.shared_by_hosts()) return build.artifact_path;
  const std::string path = path_for(build.sha256);
  if (common::sha256_file_hex(path) == build.sha256) return path;
  std::lock_guard lock(fetch_mutex_);
  const std::string found = common::sha256_file_hex(path);
  if (found == build.sha256) return path;  // another job of this daemon fetched it meanwhile
  if (!found.empty())
    spdlog::warn("{}: the file {} no longer hashes to it ({}); it is fetched again from the database",
                 build_words(build), path, found.substr(0, 12));
  fetch(build, path);
  return path;
}

void BuildFiles::fetch(const db::Build& build, const std::string& path) {
  TemporaryBuildFile file(dir_);
  bool stored = false;
  try {
    stored = store_.read_build_content(build.sha256, [&](std::string_view chunk) { file.write(chunk); });
  } catch (const db::StoreError& error) {
    if (error.kind() == db::StoreErrorKind::CannotOpen) throw;  // the store is lost: the job goes back to the queue
    throw JobFailure(build_words(build) + " cannot be fetched from the database: " + error.what());
  }
  if (!stored)
    throw JobFailure(build_words(build) + " is neither on this host (" + path +
                     ") nor in the database: the daemon that took in its upload did not store its content");
  // The store checked the bytes it read; this checks the bytes that reached the disk.
  if (const std::string written = common::sha256_file_hex(file.path()); written != build.sha256)
    throw JobFailure(build_words(build) + ": the fetched file " + file.path() + " hashes to " + written +
                     "; it is not run");
  file.place_at(path);
  spdlog::info("{} fetched from the database to {}", build_words(build), path);
}

}  // namespace qgate::server
