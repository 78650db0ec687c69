// DashboardSite: method and Host checks, the API, /metrics, /healthz and the dashboard's files.
#include "qgate/dashboards/dashboard_site.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace qgate::dashboards {
namespace {

namespace fs = std::filesystem;

constexpr std::uintmax_t kMaxFileBytes = 32u << 20;

HttpResponse error(int status, const std::string& code, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.body = nlohmann::json{{"error", {{"code", code}, {"message", message}}}}.dump();
  return r;
}

/// Headers on every answer: no sniffing, no framing, nothing loaded from elsewhere. Vega compiles
/// its expressions with Function(), hence 'unsafe-eval'.
HttpResponse with_security_headers(HttpResponse r) {
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("X-Frame-Options", "DENY");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'self'; script-src 'self' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; "
                         "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'");
  return r;
}

std::string content_type(const fs::path& file) {
  const std::string ext = file.extension().string();
  if (ext == ".html") return "text/html; charset=utf-8";
  if (ext == ".js") return "text/javascript; charset=utf-8";
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".json") return "application/json";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".png") return "image/png";
  return "application/octet-stream";
}

}  // namespace

bool is_loopback_host_header(const std::string& host_header) {
  std::string host = host_header;
  if (!host.empty() && host[0] == '[') {
    const auto close = host.find(']');
    return close != std::string::npos && host.substr(1, close - 1) == "::1";
  }
  if (const auto colon = host.find(':'); colon != std::string::npos) host = host.substr(0, colon);
  if (host == "localhost") return true;
  // 127.0.0.0/8 as a dotted quad, nothing else ("127.0.0.1.example.com" is a name, not loopback).
  if (host.rfind("127.", 0) != 0) return false;
  int dots = 0;
  for (char c : host) {
    if (c == '.')
      ++dots;
    else if (c < '0' || c > '9')
      return false;
  }
  return dots == 3;
}

DashboardSite::DashboardSite(const DashboardApi& api, SiteOptions options) : api_(api), options_(std::move(options)) {
  std::error_code ec;
  root_ = fs::canonical(options_.static_dir, ec).string();
  if (ec || !fs::is_regular_file(fs::path(root_) / "index.html"))
    throw std::runtime_error("the dashboard's files are not in " + options_.static_dir +
                             " (no index.html: build the dashboard_assets target, or give --http-root)");
}

HttpResponse DashboardSite::handle(const HttpRequest& request) const {
  if (request.method != "GET" && request.method != "HEAD") {
    HttpResponse r =
        error(405, "METHOD_NOT_ALLOWED", "the dashboard is read-only: GET and HEAD, not " + request.method);
    r.headers.emplace_back("Allow", "GET, HEAD");
    return with_security_headers(std::move(r));
  }
  if (options_.loopback && !is_loopback_host_header(request.header("host")))
    return with_security_headers(error(403, "HOST_NOT_ALLOWED",
                                       "this dashboard listens on a loopback address and answers only requests "
                                       "for a loopback host"));
  if (request.path == "/api" || request.path.rfind("/api/", 0) == 0) {
    const ApiResponse a = api_.get(request.path, request.query, request.header("authorization"));
    HttpResponse r;
    r.status = a.status;
    r.body = a.body;
    r.headers.emplace_back("Cache-Control", "no-store");
    return with_security_headers(std::move(r));
  }
  if (request.path == "/metrics" && options_.metrics) return with_security_headers(metrics());
  if (request.path == "/healthz" && options_.health) return with_security_headers(health());
  return with_security_headers(file(request.path == "/" ? "/index.html" : request.path));
}

HttpResponse DashboardSite::metrics() const {
  HttpResponse r;
  r.headers.emplace_back("Cache-Control", "no-store");
  try {
    r.body = options_.metrics();
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  } catch (const std::exception& e) {
    r = error(500, "INTERNAL", std::string("cannot collect the metrics: ") + e.what());
  }
  return r;
}

HttpResponse DashboardSite::health() const {
  ServiceHealth h;
  try {
    h = options_.health();
  } catch (const std::exception& e) {
    h.healthy = false;
    h.reason = std::string("the health check failed: ") + e.what();
  }
  nlohmann::json checks = nlohmann::json::object();
  for (const auto& [name, state] : h.checks) checks[name] = state;
  nlohmann::json body = {{"status", h.healthy ? "ok" : "unavailable"}, {"checks", checks}};
  if (!h.healthy) body["reason"] = h.reason;
  HttpResponse r;
  r.status = h.healthy ? 200 : 503;
  r.body = body.dump();
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

HttpResponse DashboardSite::file(const std::string& path) const {
  const HttpResponse missing = error(404, "NOT_FOUND", "no file " + path);
  if (path.empty() || path[0] != '/' || path.find("..") != std::string::npos || path.find('\\') != std::string::npos)
    return missing;
  std::error_code ec;
  const fs::path wanted = fs::weakly_canonical(fs::path(root_) / path.substr(1), ec);
  const std::string text = wanted.string();
  if (ec || text.size() <= root_.size() || text.compare(0, root_.size(), root_) != 0 || text[root_.size()] != '/')
    return missing;
  if (!fs::is_regular_file(wanted, ec) || fs::file_size(wanted, ec) > kMaxFileBytes) return missing;
  std::ifstream in(wanted, std::ios::binary);
  std::ostringstream body;
  body << in.rdbuf();
  if (!in && !in.eof()) return error(500, "INTERNAL", "cannot read " + path);
  HttpResponse r;
  r.content_type = content_type(wanted);
  r.body = body.str();
  r.headers.emplace_back("Cache-Control", "no-cache");
  return r;
}

}  // namespace qgate::dashboards
