// StoreOutage: whether the store answers this daemon, as its scheduler and lease keeper find when
// they call it (docs/fleet.md, "When the database is unreachable"). The first failure of an outage
// is logged once, naming the store and why; the calls that fail after it are quiet, and the
// scheduler waits longer between its claims (retry_delay). The first call that succeeds again is
// logged once too. /healthz and /metrics read the state. Thread-safe: every GPU's lane reports.
#pragma once

#include <chrono>
#include <exception>
#include <mutex>
#include <string>
#include <utility>

namespace qgate::server {

class StoreOutage {
 public:
  /// The longest the scheduler waits, besides its own second, between two claims while the store
  /// does not answer.
  static constexpr std::chrono::milliseconds kMaxRetryDelay{3000};

  /// `store_name` as the log names the store: its file, or "postgresql" (never an address).
  explicit StoreOutage(std::string store_name) : store_name_(std::move(store_name)) {}

  /// A call to the store failed with `error`.
  void failed(const std::exception& error);
  /// A call to the store succeeded.
  void answered();

  bool reachable() const;
  /// "" while the store answers; otherwise what /healthz says: the store, why, and for how long.
  std::string reason() const;
  /// How long to wait before the next claim: none while the store answers, then doubling from a
  /// quarter of a second with each failure, up to kMaxRetryDelay.
  std::chrono::milliseconds retry_delay() const;

 private:
  const std::string store_name_;
  mutable std::mutex mu_;
  bool reachable_ = true;
  std::string why_;           // the first failure's words, with how the store failed
  int failures_ = 0;          // calls that failed in this outage
  std::chrono::steady_clock::time_point since_;
};

}  // namespace qgate::server
