// qgate-trend-rpc-bench: QueryTrend latency through a running qgated, over its gRPC API, on a store
// that qgate-history-fill (or qgate-store-bench --keep) filled with the 2025 history. A seeded mix of
// the filters `qgate trend` takes: a profile (7 in 8 queries), a weight type (3 in 4), a path (1 in
// 2), contended runs included (1 in 4), over the history's last month and over its whole year, the
// same sequence of queries for every store. Each query is one RPC on one channel, timed from the call
// to its answer. Reports p50/p90/p99/max and the points per answer; with --pid, qgated's memory.
// A benchmark, not a test.
//
//   qgate-trend-rpc-bench --server ADDRESS [--queries N] [--warmup N] [--pid PID] [--json-out FILE]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qgate/common/default_paths.h"
#include "qgate/v1/harness.grpc.pb.h"

namespace {

// What qgate-history-fill and qgate-store-bench write: 2025, these profiles, types and paths.
const char* const kProfiles[] = {"llama-7b-q4_K_M", "llama-13b-q5_K_M", "mistral-7b-q8_0"};
const char* const kTypes[] = {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_K", "q5_K", "q6_K"};
const char* const kPaths[] = {"mmq", "f16"};
constexpr std::int64_t kDayMs = 24LL * 3600 * 1000;
constexpr std::int64_t kHistoryEndMs = 1'735'689'600'000 + 365 * kDayMs;

long status_kib(int pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}

double percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, static_cast<std::size_t>(fraction * static_cast<double>(values.size() - 1) + 0.5))];
}

/// The q-th query of the mix over the last `days` days.
qgate::v1::QueryTrendRequest query_at(std::mt19937& rng, std::int64_t days) {
  qgate::v1::QueryTrendRequest request;
  if (rng() % 8 != 0) request.set_profile(kProfiles[rng() % 3]);
  if (rng() % 4 != 0) request.set_weight_type(kTypes[rng() % 8]);
  if (rng() % 2 == 0) request.set_path(kPaths[rng() % 2]);
  request.set_include_contended(rng() % 4 == 0);
  request.set_since_unix_ms(kHistoryEndMs - days * kDayMs);
  return request;
}

}  // namespace

int main(int argc, char** argv) {
  std::string server = qgate::paths::default_server_address(), json_out;
  int queries = 250, warmup = 10, pid = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "qgate-trend-rpc-bench: " << arg << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--server") server = value();
    else if (arg == "--queries") queries = std::stoi(value());
    else if (arg == "--warmup") warmup = std::stoi(value());
    else if (arg == "--pid") pid = std::stoi(value());
    else if (arg == "--json-out") json_out = value();
    else {
      std::cerr << "usage: qgate-trend-rpc-bench --server ADDRESS [--queries N] [--warmup N] [--pid PID] "
                   "[--json-out FILE]\n";
      return 2;
    }
  }
  if (queries <= 0) return 2;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  auto stub = qgate::v1::Harness::NewStub(
      grpc::CreateCustomChannel(qgate::paths::to_grpc_target(server), grpc::InsecureChannelCredentials(), args));

  auto call = [&](const qgate::v1::QueryTrendRequest& request, qgate::v1::QueryTrendResponse& response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    const grpc::Status status = stub->QueryTrend(&context, request, &response);
    if (!status.ok()) {
      std::cerr << "qgate-trend-rpc-bench: QueryTrend failed: " << status.error_message() << "\n";
      std::exit(3);
    }
  };
  {  // Warm-up, untimed: the channel's connection and the daemon's first statements.
    std::mt19937 rng(11);
    for (int q = 0; q < warmup; ++q) {
      qgate::v1::QueryTrendResponse response;
      call(query_at(rng, q % 2 == 0 ? 30 : 365), response);
    }
  }

  struct Span {
    const char* name;
    std::int64_t days;
    std::vector<double> ms;
    std::size_t points = 0, max_points = 0;
    std::vector<int> each_points;
    std::vector<double> narrow_ms, wide_ms;  // with a profile and a weight type; without one of them
  };
  Span spans[] = {{"month", 30, {}, 0, 0, {}, {}, {}}, {"year", 365, {}, 0, 0, {}, {}, {}}};
  std::vector<double> all_ms;
  for (Span& span : spans) {
    std::mt19937 rng(20261205);  // the same mix for both spans and every store
    for (int q = 0; q < queries; ++q) {
      const qgate::v1::QueryTrendRequest request = query_at(rng, span.days);
      qgate::v1::QueryTrendResponse response;
      const auto t0 = std::chrono::steady_clock::now();
      call(request, response);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      span.ms.push_back(ms);
      all_ms.push_back(ms);
      span.points += static_cast<std::size_t>(response.points_size());
      span.max_points = std::max(span.max_points, static_cast<std::size_t>(response.points_size()));
      span.each_points.push_back(response.points_size());
      (!request.profile().empty() && !request.weight_type().empty() ? span.narrow_ms : span.wide_ms).push_back(ms);
    }
  }

  nlohmann::json report = {{"tool", "qgate-trend-rpc-bench"}, {"queries_per_span", queries}, {"warmup", warmup}};
  std::printf("%-6s %8s %9s %9s %9s %9s %12s %10s\n", "span", "queries", "p50 ms", "p90 ms", "p99 ms", "max ms",
              "mean points", "max points");
  for (const Span& span : spans) {
    const double mean_points = static_cast<double>(span.points) / queries;
    const double max_ms = *std::max_element(span.ms.begin(), span.ms.end());
    std::printf("%-6s %8d %9.2f %9.2f %9.2f %9.2f %12.0f %10zu\n", span.name, queries, percentile(span.ms, 0.5),
                percentile(span.ms, 0.9), percentile(span.ms, 0.99), max_ms, mean_points, span.max_points);
    report[span.name] = {{"days", span.days},          {"p50_ms", percentile(span.ms, 0.5)},
                         {"p90_ms", percentile(span.ms, 0.9)}, {"p99_ms", percentile(span.ms, 0.99)},
                         {"max_ms", max_ms},           {"mean_points", mean_points},
                         {"max_points", span.max_points}, {"each_ms", span.ms},
                         {"each_points", span.each_points},
                         {"profile_and_type", {{"queries", span.narrow_ms.size()}, {"p50_ms", percentile(span.narrow_ms, 0.5)},
                                               {"p99_ms", percentile(span.narrow_ms, 0.99)}}},
                         {"wider", {{"queries", span.wide_ms.size()}, {"p50_ms", percentile(span.wide_ms, 0.5)},
                                    {"p99_ms", percentile(span.wide_ms, 0.99)}}}};
  }
  for (const Span& span : spans) {
    std::printf("%-6s with a profile and a type: %zu queries, p50 %.2f ms, p99 %.2f ms; wider: %zu queries, "
                "p50 %.2f ms, p99 %.2f ms\n",
                span.name, span.narrow_ms.size(), percentile(span.narrow_ms, 0.5), percentile(span.narrow_ms, 0.99),
                span.wide_ms.size(), percentile(span.wide_ms, 0.5), percentile(span.wide_ms, 0.99));
  }
  const double all_max = *std::max_element(all_ms.begin(), all_ms.end());
  std::printf("%-6s %8zu %9.2f %9.2f %9.2f %9.2f\n", "both", all_ms.size(), percentile(all_ms, 0.5),
              percentile(all_ms, 0.9), percentile(all_ms, 0.99), all_max);
  report["both"] = {{"p50_ms", percentile(all_ms, 0.5)}, {"p90_ms", percentile(all_ms, 0.9)},
                    {"p99_ms", percentile(all_ms, 0.99)}, {"max_ms", all_max}};
  if (pid) {
    const long rss = status_kib(pid, "VmRSS"), hwm = status_kib(pid, "VmHWM");
    std::printf("qgated memory: RSS %.1f MiB (peak %.1f MiB)\n", rss / 1024.0, hwm / 1024.0);
    report["qgated_rss_kib"] = rss;
    report["qgated_peak_rss_kib"] = hwm;
  }
  if (!json_out.empty()) std::ofstream(json_out) << report.dump(2) << "\n";
  return 0;
}
