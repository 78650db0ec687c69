// MetricsExposition: qgated's /metrics page. It reads what the daemon knows now through the same
// read paths as the API (JobQueries for the jobs by state and the queue, DeviceStatusReport for each
// GPU's co-tenant state), the store's files for its size, and DaemonMetrics for the latencies the
// scheduler counted, and writes them in Prometheus' text format. The metrics' names, types and labels
// are listed in docs/operations.md; they are kept stable.
#pragma once

#include <string>

#include "qgate/db/store.h"
#include "qgate/server/daemon_metrics.h"
#include "qgate/server/daemon_options.h"
#include "qgate/server/scheduler.h"
#include "qgate/server/served_gpus.h"

namespace qgate::server {

class MetricsExposition {
 public:
  MetricsExposition(db::Store& store, const DaemonOptions& options, const ServedGpus& gpus, const Scheduler& scheduler,
                    const DaemonMetrics& metrics)
      : store_(store), options_(options), gpus_(gpus), scheduler_(scheduler), metrics_(metrics) {}

  /// The whole page; throws when the store cannot be read.
  std::string text() const;

 private:
  db::Store& store_;
  const DaemonOptions& options_;
  const ServedGpus& gpus_;
  const Scheduler& scheduler_;
  const DaemonMetrics& metrics_;
};

}  // namespace qgate::server
