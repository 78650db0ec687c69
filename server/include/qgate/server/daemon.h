// qgated as a library: opens the store (re-queueing jobs a previous run left running), starts the
// scheduler and serves qgate.v1.Harness with health checks and reflection on a unix socket or TCP.
#pragma once

#include <memory>
#include <string>

#include "qgate/server/daemon_options.h"

namespace qgate::server {

class Daemon {
 public:
  /// Fills in defaults (data dir, socket, database, worker binary); throws on a bad option.
  explicit Daemon(DaemonOptions options);
  ~Daemon();
  /// Opens everything and starts listening; throws std::runtime_error with a clear message.
  void start();
  /// Blocks until shutdown() is called from another thread (e.g. a signal handler thread).
  void wait();
  void shutdown();
  const DaemonOptions& options() const { return options_; }
  std::string listening_address() const;
  /// The dashboard's URL ("http://127.0.0.1:8080/"), empty without --http.
  std::string dashboard_url() const;
  /// Where the store lives, for the log: the SQLite file, or the PostgreSQL address's scheme alone
  /// (an address may carry a password).
  std::string store_name() const;

 private:
  struct Parts;
  DaemonOptions options_;
  std::unique_ptr<Parts> parts_;
};

}  // namespace qgate::server
