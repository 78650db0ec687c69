// HealthProbe: a read of the store, what the scheduler found of it, and the scheduler's loops.
#include "qgate/server/health_probe.h"

namespace qgate::server {

dashboards::ServiceHealth HealthProbe::check() const {
  std::string store = "ok";
  try {
    store_.schema_version();  // one read of the database file
  } catch (const std::exception& e) {
    store = std::string("the store does not answer: ") + e.what();
  }
  if (outage_ && !outage_->reachable()) store = outage_->reason();
  std::string scheduler = "ok";
  if (!read_only_.empty())
    scheduler = "no job runs: qgated started read-only (" + read_only_ + ")";
  else if (std::string why = scheduler_.not_alive(kMaxLoopSilence); !why.empty())
    scheduler = why;

  dashboards::ServiceHealth health;
  health.checks = {{"store", store}, {"scheduler", scheduler}};
  health.healthy = store == "ok" && scheduler == "ok";
  if (!health.healthy) health.reason = store != "ok" ? store : scheduler;
  return health;
}

}  // namespace qgate::server
