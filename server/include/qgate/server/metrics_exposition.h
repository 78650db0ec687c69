// MetricsExposition: qgated's /metrics page. It reads what the daemon knows now through the same
// read paths as the API (JobQueries for the jobs by state and the queue, DeviceStatusReport for each
// GPU's co-tenant state), the store's files for its size, and DaemonMetrics for the latencies the
// scheduler counted, and writes them in Prometheus' text format. The metrics' names, types and labels
// are listed in docs/operations.md; they are kept stable. While the store does not answer, the page
// leaves out what it reads from the store and says so in qgate_store_reachable.
#pragma once

#include <string>
#include <vector>

#include "qgate/dashboards/prometheus_text.h"
#include "qgate/db/store.h"
#include "qgate/server/daemon_metrics.h"
#include "qgate/server/daemon_options.h"
#include "qgate/server/scheduler.h"
#include "qgate/server/served_gpus.h"
#include "qgate/server/store_outage.h"
#include "qgate/v1/harness.pb.h"

namespace qgate::server {

class MetricsExposition {
 public:
  MetricsExposition(db::Store& store, const DaemonOptions& options, const ServedGpus& gpus, const Scheduler& scheduler,
                    const DaemonMetrics& metrics)
      : store_(store), options_(options), gpus_(gpus), scheduler_(scheduler), metrics_(metrics) {}

  /// The whole page; without the families read from the store while it does not answer.
  std::string text() const;
  /// What the scheduler found of the store, for qgate_store_reachable (without it, only the page's
  /// own reads count).
  void set_store_outage(const StoreOutage* outage) { outage_ = outage; }

 private:
  /// The qgate_gpu_* families, one sample per served GPU.
  static void write_gpus(dashboards::PrometheusText& out, const std::vector<v1::DeviceStatus>& devices);

  db::Store& store_;
  const DaemonOptions& options_;
  const ServedGpus& gpus_;
  const Scheduler& scheduler_;
  const DaemonMetrics& metrics_;
  const StoreOutage* outage_ = nullptr;
};

}  // namespace qgate::server
