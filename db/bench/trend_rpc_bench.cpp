// qgate-trend-rpc-bench: QueryTrend latency through a running qgated, over its gRPC API, on a store
// that qgate-history-fill (or qgate-store-bench --keep) filled with the 2025 history. A seeded mix of
// the filters `qgate trend` takes: a profile (7 in 8 queries), a weight type (3 in 4), a path (1 in
// 2), contended runs included (1 in 4), over the history's last month and over its whole year, the
// same sequence of queries for every store. Each query's whole answer is read by pages (page_size
// --page-size, 0 = the daemon's default; docs/trends.md, "Pages"), one RPC per page on one channel.
// Reports, per span, the latency of each RPC (a page: p50/p90/p99/max, narrow queries with a profile
// and a weight type against wider ones), the time to read each whole answer by pages, and the
// points and pages per answer; then the widest answer (the whole year, every profile and type,
// contended runs included) read whole --widest times. With --pid, qgated's memory.
// A benchmark, not a test.
//
//   qgate-trend-rpc-bench --server ADDRESS [--queries N] [--warmup N] [--page-size N] [--widest N]
//                         [--pid PID] [--json-out FILE]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <numeric>
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

/// Summary figures of a list of milliseconds.
nlohmann::json figures(const std::vector<double>& ms) {
  const double max = ms.empty() ? 0.0 : *std::max_element(ms.begin(), ms.end());
  return {{"count", ms.size()},
          {"p50_ms", percentile(ms, 0.5)},
          {"p90_ms", percentile(ms, 0.9)},
          {"p99_ms", percentile(ms, 0.99)},
          {"max_ms", max}};
}

}  // namespace

int main(int argc, char** argv) {
  std::string server = qgate::paths::default_server_address(), json_out;
  int queries = 250, warmup = 10, pid = 0, page_size = 0, widest = 10;
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
    else if (arg == "--page-size") page_size = std::stoi(value());
    else if (arg == "--widest") widest = std::stoi(value());
    else if (arg == "--pid") pid = std::stoi(value());
    else if (arg == "--json-out") json_out = value();
    else {
      std::cerr << "usage: qgate-trend-rpc-bench --server ADDRESS [--queries N] [--warmup N] [--page-size N] "
                   "[--widest N] [--pid PID] [--json-out FILE]\n";
      return 2;
    }
  }
  if (queries <= 0 || page_size < 0 || widest < 0) return 2;
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
  // One whole answer, page by page: each page's RPC time into `page_ms`; returns the whole time and
  // counts the points and pages.
  struct Whole {
    double ms = 0;
    int points = 0, pages = 0;
  };
  auto read_whole = [&](qgate::v1::QueryTrendRequest request, std::vector<double>& page_ms) {
    Whole whole;
    request.set_page_size(page_size);
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      qgate::v1::QueryTrendResponse response;
      const auto t0 = std::chrono::steady_clock::now();
      call(request, response);
      page_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      whole.points += response.points_size();
      ++whole.pages;
      if (response.next_page_token().empty()) break;
      request.set_page_token(response.next_page_token());
    }
    whole.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return whole;
  };
  {  // Warm-up, untimed: the channel's connection and the daemon's first statements.
    std::mt19937 rng(11);
    std::vector<double> ignored;
    for (int q = 0; q < warmup; ++q) read_whole(query_at(rng, q % 2 == 0 ? 30 : 365), ignored);
  }

  struct Span {
    const char* name;
    std::int64_t days;
    std::vector<double> page_ms, narrow_page_ms, wide_page_ms;  // each RPC
    std::vector<double> whole_ms, narrow_whole_ms, wide_whole_ms;  // each answer, all its pages
    std::vector<int> each_points, each_pages;
  };
  Span spans[] = {{"month", 30, {}, {}, {}, {}, {}, {}, {}, {}}, {"year", 365, {}, {}, {}, {}, {}, {}, {}, {}}};
  std::vector<double> all_page_ms;
  for (Span& span : spans) {
    std::mt19937 rng(20261205);  // the same mix for both spans and every store
    for (int q = 0; q < queries; ++q) {
      const qgate::v1::QueryTrendRequest request = query_at(rng, span.days);
      const bool narrow = !request.profile().empty() && !request.weight_type().empty();
      std::vector<double> pages;
      const Whole whole = read_whole(request, pages);
      for (double ms : pages) {
        span.page_ms.push_back(ms);
        all_page_ms.push_back(ms);
        (narrow ? span.narrow_page_ms : span.wide_page_ms).push_back(ms);
      }
      span.whole_ms.push_back(whole.ms);
      (narrow ? span.narrow_whole_ms : span.wide_whole_ms).push_back(whole.ms);
      span.each_points.push_back(whole.points);
      span.each_pages.push_back(whole.pages);
    }
  }

  nlohmann::json report = {{"tool", "qgate-trend-rpc-bench"}, {"queries_per_span", queries}, {"warmup", warmup},
                           {"page_size", page_size}};
  std::printf("per RPC (one page; page_size %d, 0 = the daemon's default)\n", page_size);
  std::printf("%-6s %8s %9s %9s %9s %9s %12s %10s %10s\n", "span", "RPCs", "p50 ms", "p90 ms", "p99 ms", "max ms",
              "mean points", "max points", "max pages");
  for (const Span& span : spans) {
    const double points = std::accumulate(span.each_points.begin(), span.each_points.end(), 0.0);
    const int max_points = *std::max_element(span.each_points.begin(), span.each_points.end());
    const int max_pages = *std::max_element(span.each_pages.begin(), span.each_pages.end());
    const double max_ms = *std::max_element(span.page_ms.begin(), span.page_ms.end());
    std::printf("%-6s %8zu %9.2f %9.2f %9.2f %9.2f %12.0f %10d %10d\n", span.name, span.page_ms.size(),
                percentile(span.page_ms, 0.5), percentile(span.page_ms, 0.9), percentile(span.page_ms, 0.99), max_ms,
                points / queries, max_points, max_pages);
    report[span.name] = {{"days", span.days},
                         {"rpc", figures(span.page_ms)},
                         {"rpc_profile_and_type", figures(span.narrow_page_ms)},
                         {"rpc_wider", figures(span.wide_page_ms)},
                         {"whole", figures(span.whole_ms)},
                         {"whole_profile_and_type", figures(span.narrow_whole_ms)},
                         {"whole_wider", figures(span.wide_whole_ms)},
                         {"mean_points", points / queries},
                         {"max_points", max_points},
                         {"max_pages", max_pages},
                         {"each_rpc_ms", span.page_ms},
                         {"each_whole_ms", span.whole_ms},
                         {"each_points", span.each_points},
                         {"each_pages", span.each_pages}};
  }
  std::printf("%-6s %8zu %9.2f %9.2f %9.2f %9.2f\n", "both", all_page_ms.size(), percentile(all_page_ms, 0.5),
              percentile(all_page_ms, 0.9), percentile(all_page_ms, 0.99),
              *std::max_element(all_page_ms.begin(), all_page_ms.end()));
  report["both"] = {{"rpc", figures(all_page_ms)}};
  for (const Span& span : spans) {
    std::printf("%-6s per RPC, with a profile and a type: %zu RPCs, p50 %.2f ms, p99 %.2f ms; wider: %zu RPCs, "
                "p50 %.2f ms, p99 %.2f ms\n",
                span.name, span.narrow_page_ms.size(), percentile(span.narrow_page_ms, 0.5),
                percentile(span.narrow_page_ms, 0.99), span.wide_page_ms.size(), percentile(span.wide_page_ms, 0.5),
                percentile(span.wide_page_ms, 0.99));
    std::printf("%-6s whole answers, with a profile and a type: %zu, p50 %.2f ms, p99 %.2f ms; wider: %zu, "
                "p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
                span.name, span.narrow_whole_ms.size(), percentile(span.narrow_whole_ms, 0.5),
                percentile(span.narrow_whole_ms, 0.99), span.wide_whole_ms.size(), percentile(span.wide_whole_ms, 0.5),
                percentile(span.wide_whole_ms, 0.99),
                span.wide_whole_ms.empty() ? 0.0 : *std::max_element(span.wide_whole_ms.begin(), span.wide_whole_ms.end()));
  }
  if (widest > 0) {
    // The widest answer there is: the whole year, every profile, type and path, contended runs too.
    qgate::v1::QueryTrendRequest request;
    request.set_include_contended(true);
    request.set_since_unix_ms(kHistoryEndMs - 365 * kDayMs);
    std::vector<double> page_ms, whole_ms;
    Whole whole;
    for (int i = 0; i < widest; ++i) {
      whole = read_whole(request, page_ms);
      whole_ms.push_back(whole.ms);
    }
    std::printf("widest: %d points in %d pages, read whole %d times: p50 %.1f ms, max %.1f ms; per RPC p50 %.2f ms, "
                "p99 %.2f ms, max %.2f ms\n",
                whole.points, whole.pages, widest, percentile(whole_ms, 0.5),
                *std::max_element(whole_ms.begin(), whole_ms.end()), percentile(page_ms, 0.5),
                percentile(page_ms, 0.99), *std::max_element(page_ms.begin(), page_ms.end()));
    report["widest"] = {{"points", whole.points}, {"pages", whole.pages}, {"whole", figures(whole_ms)},
                        {"rpc", figures(page_ms)}, {"each_whole_ms", whole_ms}};
  }
  if (pid) {
    const long rss = status_kib(pid, "VmRSS"), hwm = status_kib(pid, "VmHWM");
    std::printf("qgated memory: RSS %.1f MiB (peak %.1f MiB)\n", rss / 1024.0, hwm / 1024.0);
    report["qgated_rss_kib"] = rss;
    report["qgated_peak_rss_kib"] = hwm;
  }
  if (!json_out.empty()) std::ofstream(json_out) << report.dump(2) << "\n";
  return 0;
}
