// StoreOutage: the store's answers as the daemon sees them, said once per change (store_outage.h).
#include "qgate/server/store_outage.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "qgate/db/store_error.h"

namespace qgate::server {
namespace {

/// "is unreachable" for a connection that cannot be opened or was lost, "fails" for the rest.
std::string how_it_failed(const std::exception& error) {
  const auto* store_error = dynamic_cast<const db::StoreError*>(&error);
  if (store_error && store_error->kind() == db::StoreErrorKind::CannotOpen) return "is unreachable";
  return "fails";
}

}  // namespace

void StoreOutage::failed(const std::exception& error) {
  std::lock_guard lock(mu_);
  ++failures_;
  if (!reachable_) {
    spdlog::debug("the store {} still does not answer: {}", store_name_, error.what());
    return;
  }
  reachable_ = false;
  since_ = std::chrono::steady_clock::now();
  why_ = how_it_failed(error) + " (" + error.what() + ")";
  spdlog::warn("the store {} {}: not claiming jobs until it answers", store_name_, why_);
}

void StoreOutage::answered() {
  std::lock_guard lock(mu_);
  failures_ = 0;
  if (reachable_) return;
  reachable_ = true;
  const auto out_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - since_).count();
  spdlog::info("the store {} answers again after {} s: claiming jobs", store_name_, out_s);
}

bool StoreOutage::reachable() const {
  std::lock_guard lock(mu_);
  return reachable_;
}

std::string StoreOutage::reason() const {
  std::lock_guard lock(mu_);
  if (reachable_) return "";
  const auto out_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - since_).count();
  return "the store " + store_name_ + " " + why_ + ": no job claimed for " + std::to_string(out_s) + " s";
}

std::chrono::milliseconds StoreOutage::retry_delay() const {
  std::lock_guard lock(mu_);
  if (reachable_ || failures_ == 0) return std::chrono::milliseconds(0);
  const int doublings = std::min(failures_ - 1, 8);
  return std::min(kMaxRetryDelay, std::chrono::milliseconds(250) * (1 << doublings));
}

}  // namespace qgate::server
