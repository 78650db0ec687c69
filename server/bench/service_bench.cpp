// qgate-service-bench: QueryTrend latency through a running qgated (gRPC over its socket) over the
// last 30 days and over the whole year, the points per answer, and the daemon's memory after both.
// Pair it with qgate-store-bench --keep to pre-fill a store, as scripts/bench-service.sh does.
//   qgate-service-bench --server ADDR [--queries N] [--pid QGATED_PID] [--json-out FILE]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "qgate/common/default_paths.h"
#include "qgate/v1/harness.grpc.pb.h"

namespace {

// The profiles and types qgate-store-bench fills the store with.
const char* kProfiles[] = {"llama-7b-q4_K_M", "llama-13b-q5_K_M", "mistral-7b-q8_0"};
const char* kTypes[] = {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_K", "q5_K", "q6_K"};
// qgate-store-bench's history runs through 2025; the queries ask for its last 30 days, as
// `qgate trend` asks by default, then for all of it.
constexpr int64_t kDayMs = 24LL * 3600 * 1000;
constexpr int64_t kHistoryEndMs = 1'735'689'600'000 + 365 * kDayMs;

long status_kib(int pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
}

}  // namespace

int main(int argc, char** argv) {
  std::string server = qgate::paths::default_server_address(), json_out;
  int queries = 200, pid = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "qgate-service-bench: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--server") server = value();
    else if (a == "--queries") queries = std::stoi(value());
    else if (a == "--pid") pid = std::stoi(value());
    else if (a == "--json-out") json_out = value();
    else {
      std::cerr << "usage: qgate-service-bench --server ADDR [--queries N] [--pid PID] [--json-out FILE]\n";
      return 2;
    }
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);  // a trend over a large history is tens of MB
  auto stub = qgate::v1::Harness::NewStub(grpc::CreateCustomChannel(
      qgate::paths::to_grpc_target(server), grpc::InsecureChannelCredentials(), args));
  struct Span {
    const char* name;
    int64_t days;
    std::vector<double> ms;
    size_t points = 0, max_points = 0;
  };
  // The same seeded mix of queries for both spans.
  Span spans[] = {{"trend_30d", 30, {}, 0, 0}, {"trend_year", 365, {}, 0, 0}};
  for (Span& span : spans) {
    std::mt19937 rng(7);
    for (int q = 0; q < queries; ++q) {
      qgate::v1::QueryTrendRequest req;
      req.set_profile(kProfiles[rng() % 3]);
      if (q % 4 != 3) req.set_weight_type(kTypes[rng() % 8]);  // 1 in 4 asks for every type
      req.set_include_contended(q % 2 == 0);
      req.set_since_unix_ms(kHistoryEndMs - span.days * kDayMs);
      qgate::v1::QueryTrendResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
      const auto t0 = std::chrono::steady_clock::now();
      const grpc::Status s = stub->QueryTrend(&ctx, req, &resp);
      const auto t1 = std::chrono::steady_clock::now();
      if (!s.ok()) {
        std::cerr << "qgate-service-bench: QueryTrend failed: " << s.error_message() << "\n";
        return 3;
      }
      span.ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      span.points += size_t(resp.points_size());
      span.max_points = std::max(span.max_points, size_t(resp.points_size()));
    }
  }
  const long rss = pid ? status_kib(pid, "VmRSS") : -1, hwm = pid ? status_kib(pid, "VmHWM") : -1;
  nlohmann::json j = {{"queries", queries}, {"qgated_rss_kib", rss}, {"qgated_peak_rss_kib", hwm}};
  for (const Span& span : spans) {
    const double p50 = percentile(span.ms, 0.50), p99 = percentile(span.ms, 0.99);
    const double max_ms = *std::max_element(span.ms.begin(), span.ms.end());
    const double mean_points = double(span.points) / queries;
    std::printf("QueryTrend over gRPC, last %lld days: %d queries, %.0f points each on average (at most %zu)\n",
                static_cast<long long>(span.days), queries, mean_points, span.max_points);
    std::printf("  p50 %.2f ms   p99 %.2f ms   max %.2f ms\n", p50, p99, max_ms);
    j[span.name] = {{"days", span.days}, {"mean_points", mean_points}, {"max_points", span.max_points},
                    {"p50_ms", p50}, {"p99_ms", p99}, {"max_ms", max_ms}, {"each_ms", span.ms}};
  }
  if (pid) std::printf("qgated memory: RSS %.1f MiB (peak %.1f MiB)\n", rss / 1024.0, hwm / 1024.0);
  if (!json_out.empty()) std::ofstream(json_out) << j.dump(2) << "\n";
  return 0;
}
