// DashboardSite: what qgated's dashboard answers to a request. GET and HEAD only (405 otherwise);
// on a loopback listener, only requests for a loopback Host (403 otherwise, so a page of another
// site cannot reach the dashboard by DNS rebinding); /api/ goes to DashboardApi with the request's
// Authorization header; /metrics and /healthz go to the daemon's probes (docs/operations.md); any
// other path is a file of the dashboard's directory, or 404.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "qgate/dashboards/dashboard_api.h"
#include "qgate/dashboards/http_server.h"

namespace qgate::dashboards {

/// What /healthz answers: healthy (200), or not (503) and why. Each check by name: "ok" or why not.
struct ServiceHealth {
  bool healthy = false;
  std::string reason;                                       // empty when healthy
  std::vector<std::pair<std::string, std::string>> checks;  // {"store", "ok"}, {"scheduler", "..."}
};

struct SiteOptions {
  std::string static_dir;  // index.html, app.js, vendor/...
  bool loopback = true;    // the listener is on a loopback address: check Host
  // /metrics: the daemon's metrics in Prometheus' text format; unset, /metrics is 404.
  std::function<std::string()> metrics;
  // /healthz: whether the daemon can do its work now; unset, /healthz is 404.
  std::function<ServiceHealth()> health;
};

class DashboardSite {
 public:
  /// Throws std::runtime_error when static_dir has no index.html.
  DashboardSite(const DashboardApi& api, SiteOptions options);
  HttpResponse handle(const HttpRequest& request) const;

 private:
  HttpResponse file(const std::string& path) const;
  HttpResponse metrics() const;
  HttpResponse health() const;

  const DashboardApi& api_;
  SiteOptions options_;
  std::string root_;  // static_dir, canonical
};

/// True when a Host header names a loopback host: localhost, 127.0.0.0/8 or [::1], with any port.
bool is_loopback_host_header(const std::string& host);

}  // namespace qgate::dashboards
