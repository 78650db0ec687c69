// DashboardSnapshot: the dashboard as files that open from disk (`qgate dashboard --out DIR`): the
// page and its vendored chart libraries copied, and the API answers the page asks for written into
// snapshot.js, which the page reads instead of fetching when it is there.
#pragma once

#include <string>
#include <vector>

#include "qgate/dashboards/dashboard_api.h"

namespace qgate::dashboards {

struct SnapshotOptions {
  std::string assets_dir;  // the dashboard's files (index.html, app.js, vendor/...)
  std::string out_dir;     // created; files already there are replaced
  int jobs = 50;           // the jobs the page lists, each with its A/B, parity and co-tenant answers
};

struct SnapshotResult {
  std::vector<std::string> requests;  // the API requests written, in order
  int jobs = 0;
};

/// The requests the page makes on load, in the form its script builds them (path?query).
std::vector<std::string> page_requests(int jobs_limit);
/// The requests the page makes for one job when it is opened.
std::vector<std::string> job_requests(long long job_id);
/// The request the compare page makes for two builds (names percent-encoded as the page encodes them).
/// The snapshot holds those of each listed job's build and baseline and of each regression's two
/// builds, where the daemon could compare them.
std::string compare_request(const std::string& build_a, const std::string& build_b);

class DashboardSnapshot {
 public:
  /// `authorization` ("Bearer <token>", or empty) goes with every request, as a browser's would.
  DashboardSnapshot(const DashboardApi& api, std::string authorization = "")
      : api_(api), authorization_(std::move(authorization)) {}
  /// Writes the snapshot; throws std::runtime_error naming the request that failed or the file
  /// that could not be written.
  SnapshotResult write(const SnapshotOptions& options) const;

 private:
  const DashboardApi& api_;
  std::string authorization_;
};

}  // namespace qgate::dashboards
