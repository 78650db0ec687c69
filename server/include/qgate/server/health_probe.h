// HealthProbe: what qgated answers on /healthz (docs/operations.md). Healthy when the store answers
// a read and every GPU's scheduler loop is alive; otherwise not, with the reason. A daemon started
// read-only (a database it cannot write) runs no job, so it is not healthy either; nor is one whose
// scheduler finds the store out (StoreOutage: it claims no job until the store answers).
#pragma once

#include <chrono>
#include <string>
#include <utility>

#include "qgate/dashboards/dashboard_site.h"
#include "qgate/db/store.h"
#include "qgate/server/scheduler.h"
#include "qgate/server/store_outage.h"

namespace qgate::server {

class HealthProbe {
 public:
  /// An idle loop looks at the queue once a second; one silent for this long is stuck.
  static constexpr std::chrono::milliseconds kMaxLoopSilence{30000};

  /// `read_only` is why the daemon runs no job ("" when it can).
  HealthProbe(db::Store& store, const Scheduler& scheduler, std::string read_only)
      : store_(store), scheduler_(scheduler), read_only_(std::move(read_only)) {}

  /// checks: "store" and "scheduler", each "ok" or why not; the reason names the first that failed.
  dashboards::ServiceHealth check() const;
  /// What the scheduler found of the store: while it is out, the "store" check says so, whatever
  /// one read answers.
  void set_store_outage(const StoreOutage* outage) { outage_ = outage; }

 private:
  db::Store& store_;
  const Scheduler& scheduler_;
  std::string read_only_;
  const StoreOutage* outage_ = nullptr;
};

}  // namespace qgate::server
