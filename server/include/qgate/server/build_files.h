// BuildFiles: a build's bytes between this host's disk and the database (docs/fleet.md, "Builds on
// every host"). On one host (SQLite) a build runs from the file its upload was stored in, as it
// always has. When the store is shared by daemons on several hosts (PostgreSQL), a submit also puts
// the build's content in the database, and every daemon runs a build from its own copy,
// <data dir>/artifacts/<sha256>.so, fetched from the database when missing and checked by its sha256.
#pragma once

#include <mutex>
#include <string>

#include "qgate/db/records.h"
#include "qgate/db/store.h"

namespace qgate::server {

class BuildFiles {
 public:
  /// `artifacts_dir`: where this daemon keeps builds (<data dir>/artifacts).
  BuildFiles(db::Store& store, std::string artifacts_dir);

  /// After an upload stored at `path` was hashed to `sha256` and before its job is queued: on a
  /// shared store, puts the content in the database unless it is there already, so any daemon can
  /// run the job. Nothing to do on a store of one host.
  void share(const std::string& path, const std::string& sha256);

  /// The file on this host to run `build` from. On one host: the upload's own file (artifact_path),
  /// checked where it is run as before. On a shared store: this daemon's copy, fetched from the
  /// database into a private temporary file and renamed into place when missing (or when it no
  /// longer hashes to the build's sha256); concurrent fetches of one build are safe. Throws
  /// JobFailure, naming the build and its sha256, when the content is in neither place or the
  /// database's copy is damaged (no file is left behind); StoreError(CannotOpen) passes through.
  std::string local_path(const db::Build& build);

 private:
  std::string path_for(const std::string& sha256) const;
  void fetch(const db::Build& build, const std::string& path);

  db::Store& store_;
  std::string dir_;
  std::mutex fetch_mutex_;  // one fetch at a time in this daemon; the others then find the file
};

}  // namespace qgate::server
