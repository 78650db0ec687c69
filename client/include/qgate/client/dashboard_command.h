// `qgate dashboard --out DIR`: the dashboard as files that open from disk (dashboards/snapshot.h),
// its data read from qgated through the same API the --http dashboard serves.
#pragma once

#include <string>

#include "qgate/client/connection.h"

namespace qgate::client {

struct DashboardCommandOptions {
  std::string out_dir;
  std::string assets_dir;  // empty = <qgate's dir>/../share/qgate/dashboard
  int jobs = 50;
};

/// Writes the snapshot and prints where; returns the exit code (0, or 3 with the reason on stderr).
int write_dashboard_snapshot(const ConnectionOptions& connection, const DashboardCommandOptions& options);

}  // namespace qgate::client
