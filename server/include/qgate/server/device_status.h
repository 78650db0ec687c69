// `qgate device`'s facts about each GPU the daemon serves: what its worker said it is, its queue (jobs
// pinned to it, jobs any GPU may take, the job running, a split job holding it) and its co-tenant
// state now, from that GPU's own sampler.
#pragma once

#include <cstdint>
#include <vector>

#include "qgate/cotenant/device_watch.h"
#include "qgate/db/store.h"
#include "qgate/server/daemon_options.h"
#include "qgate/server/scheduler.h"
#include "qgate/server/served_gpus.h"
#include "qgate/v1/harness.pb.h"

namespace qgate::server {

class DeviceStatusReport {
 public:
  DeviceStatusReport(db::Store& store, const DaemonOptions& options, const ServedGpus& gpus, const Scheduler& scheduler)
      : store_(store), options_(options), gpus_(gpus), scheduler_(scheduler) {}

  /// Every served GPU, in the order --gpus gave them; `uptime_s` is the daemon's.
  std::vector<v1::DeviceStatus> all(int64_t uptime_s, const std::string& version) const;
  /// The live co-tenant state of one GPU's watch (none: unavailable), with the jobs waiting for a
  /// quiet window.
  static void fill_cotenant_now(const cotenant::DeviceWatch* watch, int64_t waiting_jobs, v1::CotenantNow* out);

  /// Every served GPU as the fleet sees it (Store::publish_gpus): what it is, the daemon's labels,
  /// the job running and the co-tenant state now.
  std::vector<db::FleetGpu> published(const std::string& version) const;
  /// Another daemon's GPU, as it published it, in `qgate device`'s terms (published_unix_ms set).
  static v1::DeviceStatus from_published(const db::FleetGpu& gpu);

 private:
  db::Store& store_;
  const DaemonOptions& options_;
  const ServedGpus& gpus_;
  const Scheduler& scheduler_;
};

}  // namespace qgate::server
