// DashboardSnapshot: copies the page and writes snapshot.js from the API's answers.
#include "qgate/dashboards/snapshot.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>

namespace qgate::dashboards {
namespace {

/// "/api/jobs?limit=50" as a path and its parameters.
std::pair<std::string, QueryParams> split_request(const std::string& request) {
  const auto q = request.find('?');
  QueryParams params;
  if (q == std::string::npos) return {request, params};
  std::string rest = request.substr(q + 1);
  size_t start = 0;
  while (start <= rest.size()) {
    const size_t amp = rest.find('&', start);
    const std::string pair = rest.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    if (!pair.empty()) {
      const auto eq = pair.find('=');
      params.emplace(pair.substr(0, eq), eq == std::string::npos ? "" : pair.substr(eq + 1));
    }
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  return {request.substr(0, q), params};
}

/// A query value as the page's encodeURIComponent writes it: letters, digits and -_.!~*'() as they are,
/// every other byte as %XX.
std::string uri_component(const std::string& value) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || std::string_view("-_.!~*'()").find(static_cast<char>(c)) != std::string_view::npos) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> page_requests(int jobs_limit) {
  // The fleet's GPUs: the devices page, and the hosts the page's host filter offers.
  return {"/api/device", "/api/devices", "/api/jobs?limit=" + std::to_string(jobs_limit),
          "/api/trend?include_contended=true", "/api/changes", "/api/regressions"};
}

std::string compare_request(const std::string& build_a, const std::string& build_b) {
  return "/api/compare?build_a=" + uri_component(build_a) + "&build_b=" + uri_component(build_b);
}

std::vector<std::string> job_requests(long long job_id) {
  const std::string base = "/api/jobs/" + std::to_string(job_id);
  return {base + "/ab", base + "/parity", base + "/cotenant"};
}

SnapshotResult DashboardSnapshot::write(const SnapshotOptions& options) const {
  namespace fs = std::filesystem;
  if (!fs::exists(fs::path(options.assets_dir) / "index.html"))
    throw std::runtime_error("the dashboard's files are not in " + options.assets_dir + " (no index.html)");
  fs::create_directories(options.out_dir);
  fs::copy(options.assets_dir, options.out_dir, fs::copy_options::recursive | fs::copy_options::overwrite_existing);

  SnapshotResult result;
  nlohmann::json answers = nlohmann::json::object();
  auto fetch = [&](const std::string& request) {
    const auto [path, params] = split_request(request);
    const ApiResponse r = api_.get(path, params, authorization_);
    if (r.status != 200) throw std::runtime_error("the snapshot's request " + request + " failed: " + r.body);
    answers[request] = nlohmann::json::parse(r.body);
    result.requests.push_back(request);
  };
  for (const std::string& request : page_requests(options.jobs)) fetch(request);
  // The builds compared: each listed job's build against its baseline, and the two builds of each
  // regression. A comparison the daemon refuses (nothing comparable) is left out: the page says so.
  std::set<std::pair<std::string, std::string>> comparisons;
  const auto& jobs = answers["/api/jobs?limit=" + std::to_string(options.jobs)];
  if (jobs.contains("jobs")) {
    for (const auto& job : jobs["jobs"]) {
      // The answer's envelope holds the list under "jobs"; ids are JSON numbers (docs/dashboard.md).
      const long long id = job.at("id").get<long long>();
      for (const std::string& request : job_requests(id)) fetch(request);
      ++result.jobs;
      const std::string build = job.value(nlohmann::json::json_pointer("/build/metadata/name"), "");
      const std::string baseline = job.value(nlohmann::json::json_pointer("/baseline/metadata/name"), "");
      if (!build.empty() && !baseline.empty()) comparisons.insert({build, baseline});
    }
  }
  const auto& regressions = answers["/api/regressions"];
  if (regressions.contains("regressions"))
    for (const auto& series : regressions["regressions"].value("series", nlohmann::json::array()))
      for (const auto& change : series.value("changes", nlohmann::json::array()))
        // As the regressions page links them: A the first slow build, B the last before it.
        comparisons.insert({change.value("build_name", ""), change.value("previous_build_name", "")});
  for (const auto& [a, b] : comparisons) {
    if (a.empty() || b.empty()) continue;
    const ApiResponse r = api_.get("/api/compare", {{"build_a", a}, {"build_b", b}}, authorization_);
    if (r.status != 200) continue;
    const std::string request = compare_request(a, b);
    answers[request] = nlohmann::json::parse(r.body);
    result.requests.push_back(request);
  }
  const fs::path file = fs::path(options.out_dir) / "snapshot.js";
  std::ofstream out(file, std::ios::trunc);
  out << "// A snapshot of qgate's dashboard API, written by `qgate dashboard --out`.\n"
      << "window.QGATE_SNAPSHOT = " << answers.dump() << ";\n";
  if (!out) throw std::runtime_error("cannot write " + file.string());
  return result;
}

}  // namespace qgate::dashboards
