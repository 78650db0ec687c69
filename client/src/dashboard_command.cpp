// `qgate dashboard --out DIR`: DashboardSnapshot over the CLI's channel.
#include "qgate/client/dashboard_command.h"

#include <filesystem>
#include <iostream>

#include "qgate/dashboards/snapshot.h"

namespace qgate::client {
namespace {

std::string default_assets_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path bin = ec ? std::filesystem::path(".") : exe.parent_path();
  return (bin / ".." / "share" / "qgate" / "dashboard").lexically_normal().string();
}

}  // namespace

int write_dashboard_snapshot(const ConnectionOptions& connection, const DashboardCommandOptions& options) {
  try {
    const dashboards::DashboardApi api(make_channel(connection.address, connection));
    dashboards::SnapshotOptions snapshot;
    snapshot.assets_dir = options.assets_dir.empty() ? default_assets_dir() : options.assets_dir;
    snapshot.out_dir = options.out_dir;
    snapshot.jobs = options.jobs;
    const std::string authorization = connection.token.empty() ? "" : "Bearer " + connection.token;
    const dashboards::SnapshotResult result = dashboards::DashboardSnapshot(api, authorization).write(snapshot);
    std::cout << "wrote the dashboard to " << options.out_dir << ": " << result.requests.size() << " API answers, "
              << result.jobs << " jobs; open " << (std::filesystem::path(options.out_dir) / "index.html").string()
              << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "qgate dashboard: " << e.what() << "\n";
    return 3;
  }
}

}  // namespace qgate::client
