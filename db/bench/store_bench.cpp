// qgate-store-bench: fills a temporary SQLite store (or, with --postgres, a PostgreSQL database) with a large synthetic history (default 1,000,000
// runs over ~50 builds, 3 profiles, 8 weight types, each run with a sample and a co-tenant summary,
// in jobs of kRunsPerJob runs with one profile and path each) through the store's own API, then times
// trend queries over 30 days and over the whole year, both as raw runs (query_trend) and as trend
// points from the write-time rollups (query_trend_summaries), and reports p50/p99 and max RSS.
// A benchmark, not a test: it takes minutes at its default size.
//
//   qgate-store-bench [--runs N] [--builds N] [--queries N] [--db FILE | --postgres ADDRESS] [--keep] [--skip-raw]
//                     [--json-out FILE]
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_arguments.h"
#include "qgate/db/postgres_store.h"
#include "qgate/db/sqlite_store.h"

using qgate::db::bench::BenchArguments;

namespace {

using qgate::db::RowId;

struct BenchOptions {
  std::int64_t runs = 1'000'000;
  int builds = 50;
  int queries = 200;
  int batch_size = 10'000;  // runs per transaction while filling
  std::string db_path;      // empty = a file in a fresh temporary directory
  std::string postgres;     // a PostgreSQL address (an empty database) instead of SQLite
  bool keep = false;
  bool skip_raw = false;    // time only the rollup points (max RSS without raw year-long queries)
  std::string json_out;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "qgate-store-bench: " << message << "\n"
            << "usage: qgate-store-bench [--runs N] [--builds N] [--queries N] [--db FILE | --postgres ADDRESS] [--keep] "
               "[--skip-raw] [--json-out FILE]\n";
  std::exit(2);
}

BenchOptions parse_options(int argc, char** argv) {
  BenchOptions options;
  for (BenchArguments args(argc, argv, 1, usage_error); args.next();) {
    const std::string_view arg = args.flag();
    if (arg == "--runs") options.runs = args.positive();
    else if (arg == "--builds") options.builds = static_cast<int>(args.positive());
    else if (arg == "--queries") options.queries = static_cast<int>(args.positive());
    else if (arg == "--db") options.db_path = args.value();
    else if (arg == "--postgres") options.postgres = args.value();
    else if (arg == "--keep") options.keep = true;
    else if (arg == "--skip-raw") options.skip_raw = true;
    else if (arg == "--json-out") options.json_out = args.value();
    else if (arg == "--help" || arg == "-h") usage_error("help");
    else usage_error(fmt::format("unknown option {}", arg));
  }
  return options;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double percentile(std::vector<double> values, double fraction) {
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(fraction * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

constexpr std::array<const char*, 3> kProfiles{"llama-7b-q4_K_M", "llama-13b-q5_K_M", "mistral-7b-q8_0"};
constexpr std::array<const char*, 8> kTypes{"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_K", "q5_K", "q6_K"};
constexpr std::array<const char*, 2> kPaths{"mmq", "f16"};
constexpr int kRunsPerJob = 40;  // a gate's timed runs: one profile and path, the types mixed
constexpr int kBuildNames = 10;  // 50 builds share 10 names: successive builds of each kernel
constexpr std::int64_t kDayMs = 24LL * 3600 * 1000;
constexpr std::int64_t kHistoryStartMs = 1'735'689'600'000;  // 2025-01-01, fixed for repeatability
constexpr std::int64_t kHistorySpanMs = 365 * kDayMs;

}  // namespace

int main(int argc, char** argv) {
  const BenchOptions options = parse_options(argc, argv);

  std::filesystem::path temp_dir;
  std::filesystem::path db_path = options.db_path;
  if (db_path.empty()) {
    temp_dir = std::filesystem::temp_directory_path() / fmt::format("qgate-store-bench-{}", ::getpid());
    std::filesystem::create_directories(temp_dir);
    db_path = temp_dir / "bench.db";
  }

  try {
    std::unique_ptr<qgate::db::Store> store;
    if (!options.postgres.empty()) {
      qgate::db::PostgresOptions store_options;
      store_options.address = options.postgres;
      store = qgate::db::open_postgres_store(store_options);
    } else {
      qgate::db::SqliteOptions store_options;
      store_options.path = db_path;
      store = qgate::db::open_sqlite_store(store_options);
    }
    std::mt19937_64 random(20261130);

    // --- Fill ---
    const auto fill_start = std::chrono::steady_clock::now();
    std::vector<RowId> build_ids;
    std::vector<std::string> build_names;
    for (int b = 0; b < options.builds; ++b) {
      qgate::db::Build build;
      build.name = fmt::format("kern-{}", b % kBuildNames);
      build.sha256 = fmt::format("{:064x}", 0xb0000 + b);
      build.commit_sha = fmt::format("{:012x}", 0xc0000 + b);
      build.branch = "main";
      build.created_ms = kHistoryStartMs + b * (kHistorySpanMs / options.builds);
      build_ids.push_back(store->insert_build(build).id);
      build_names.push_back(build.name);
    }

    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::vector<qgate::db::RunBundle> batch;
    batch.reserve(static_cast<std::size_t>(options.batch_size));
    std::int64_t cotenant_sample_rows = 0;
    RowId job_id = 0;
    for (std::int64_t i = 0; i < options.runs; ++i) {
      qgate::db::RunBundle bundle;
      qgate::db::Run& run = bundle.run;
      // Runs march through the year in order; each build is measured in its own stretch of it.
      const std::int64_t started =
          kHistoryStartMs + static_cast<std::int64_t>(static_cast<double>(i) / options.runs * kHistorySpanMs);
      const auto build_index = static_cast<std::size_t>(i * options.builds / options.runs);
      run.build_id = build_ids[build_index];
      const std::int64_t job_index = i / kRunsPerJob;
      if (i % kRunsPerJob == 0) {
        qgate::db::Job job;
        job.build_id = run.build_id;
        job.profile = kProfiles[job_index % kProfiles.size()];
        job.state = qgate::db::JobState::Done;
        job.backend = "cuda";
        job.created_ms = started;
        job_id = store->create_job(job);
        // create_job queues a job; the history's jobs are over. Left queued, a qgated opened on this
        // store would spend its first minutes claiming and failing them while it is being measured.
        store->end_job(job_id, qgate::db::JobState::Done, "", qgate::db::JobEnding{qgate::db::Disposition::Ok, ""},
                       std::nullopt);
      }
      run.job_id = job_id;
      run.path = kPaths[(job_index / kProfiles.size()) % kPaths.size()];
      run.arm = (i / 2) % 2 == 0 ? "A" : "B";
      run.pair_index = static_cast<int>(i / 2);
      run.seq = static_cast<int>(i % 2);
      run.profile = kProfiles[job_index % kProfiles.size()];
      run.weight_type = kTypes[random() % kTypes.size()];
      run.started_ms = started;
      run.finished_ms = started + 900;
      run.state = qgate::db::RunState::Done;
      run.host = "gpu-host-01";
      run.gpu_name = "NVIDIA H200";
      run.gpu_uuid = "GPU-5c0ffee0-1234-5678-9abc-def012345678";
      run.driver_version = "560.35.03";
      run.cuda_version = "12.6";
      run.backend = "cuda";
      run.qgate_version = "0.1.0";
      run.tokens = 512;
      const double tokens_per_s = 400.0 + 40.0 * unit(random);
      run.tokens_per_s = tokens_per_s;
      run.gemm_ms = 512.0 / tokens_per_s * 1000.0;
      bundle.samples = {{"tokens_per_s", "tok/s", tokens_per_s}};

      // ~15% contended, ~3% with NVML unavailable (contended unknown).
      qgate::db::CotenantSummary cotenant;
      const double draw = unit(random);
      cotenant.available = draw >= 0.03;
      if (cotenant.available) {
        const bool contended = draw < 0.18;
        cotenant.sample_period_ms = 100;
        cotenant.max_foreign_sm = contended ? 96.0 : 0.0;
        cotenant.mean_foreign_sm = contended ? 71.0 : 0.0;
        cotenant.device_util_mean = contended ? 99.0 : 62.0;
        cotenant.top_processes = contended ? "sglang@96%" : "";
        cotenant.min_sm_clock_mhz = 1755;
        cotenant.median_sm_clock_mhz = 1980;
        cotenant.max_sm_clock_mhz = 1980;
        cotenant.temperature_max_c = 61;
        cotenant.power_max_w = 412.0;
        cotenant.contended = contended;
        cotenant.policy = "foreign_sm>5";
      }
      bundle.cotenant = cotenant;
      if (i % 100 == 0) {  // a timeline for 1% of the runs
        for (int s = 0; s < 10; ++s) {
          bundle.cotenant_samples.push_back({started + s * 100, 0.0, 60.0, 1980, 0, ""});
        }
        cotenant_sample_rows += 10;
      }
      batch.push_back(std::move(bundle));
      if (static_cast<int>(batch.size()) == options.batch_size || i + 1 == options.runs) {
        store->record_runs(batch);
        batch.clear();
      }
    }
    const double fill_s = seconds_since(fill_start);
    const std::int64_t stored_runs = store->count_runs(std::nullopt);

    // --- Trend queries: the CLI's and dashboard's typical asks over the last 30 days and the year,
    // as raw runs and as rollup points; the same queries (same seed) for both ---
    const std::int64_t history_end = kHistoryStartMs + kHistorySpanMs;
    struct Timing {
      std::vector<double> ms;
      std::int64_t rows = 0;
    };
    auto time_queries = [&](std::int64_t span_ms, bool summaries) {
      std::mt19937_64 query_random(20261201);
      Timing timing;
      for (int q = 0; q < options.queries; ++q) {
        qgate::db::TrendQuery query;
        query.profile = kProfiles[query_random() % kProfiles.size()];
        if (q % 4 != 3) query.weight_type = kTypes[query_random() % kTypes.size()];  // 1 in 4: all types
        query.since_ms = history_end - span_ms;
        if (q % 2 == 0) query.build_name_glob = fmt::format("kern-{}*", query_random() % kBuildNames);
        query.include_contended = (q % 5 == 0);
        query.include_unknown = true;  // as QueryTrend asks
        const auto start = std::chrono::steady_clock::now();
        timing.rows += static_cast<std::int64_t>(summaries ? store->query_trend_summaries(query).size()
                                                           : store->query_trend(query).size());
        timing.ms.push_back(seconds_since(start) * 1000.0);
      }
      return timing;
    };
    const Timing points_30d = time_queries(30 * kDayMs, true);
    const Timing points_year = time_queries(365 * kDayMs, true);
    const Timing raw_30d = options.skip_raw ? Timing{} : time_queries(30 * kDayMs, false);
    const Timing raw_year = options.skip_raw ? Timing{} : time_queries(365 * kDayMs, false);
    const std::string integrity = options.runs <= 100'000 ? store->integrity_check() : "skipped";
    store.reset();

    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    const std::int64_t max_rss_kb = usage.ru_maxrss;  // kilobytes on Linux
    // The file's size on SQLite; PostgreSQL's database lives on its server (pg_database_size).
    const std::int64_t db_bytes =
        options.postgres.empty() ? static_cast<std::int64_t>(std::filesystem::file_size(db_path)) : -1;

    fmt::print("runs stored        {}\n", stored_runs);
    fmt::print("builds             {} ({} names), jobs of {} runs\n", options.builds, kBuildNames, kRunsPerJob);
    fmt::print("cotenant samples   {}\n", cotenant_sample_rows);
    fmt::print("fill               {:.1f} s ({:.0f} runs/s, {} runs per transaction)\n", fill_s,
               static_cast<double>(stored_runs) / fill_s, options.batch_size);
    nlohmann::json figures = nlohmann::json::object();
    for (const auto& [name, timing] : {std::pair{"raw_30d", &raw_30d}, std::pair{"raw_year", &raw_year},
                                       std::pair{"points_30d", &points_30d}, std::pair{"points_year", &points_year}}) {
      if (timing->ms.empty()) continue;  // --skip-raw
      const double p50 = percentile(timing->ms, 0.50);
      const double p99 = percentile(timing->ms, 0.99);
      const double max_ms = *std::max_element(timing->ms.begin(), timing->ms.end());
      const double rows = static_cast<double>(timing->rows) / options.queries;
      fmt::print("trend {:<12} {}: p50 {:.2f} ms, p99 {:.2f} ms, max {:.2f} ms, {:.0f} rows/query\n", name,
                 options.queries, p50, p99, max_ms, rows);
      figures[name] = {{"p50_ms", p50}, {"p99_ms", p99}, {"max_ms", max_ms}, {"rows_mean", rows}};
    }
    fmt::print("engine             {}\n", options.postgres.empty() ? "sqlite" : "postgresql");
    if (db_bytes >= 0) fmt::print("database size      {:.1f} MiB\n", static_cast<double>(db_bytes) / (1 << 20));
    fmt::print("max RSS            {:.1f} MiB\n", static_cast<double>(max_rss_kb) / 1024.0);
    fmt::print("integrity_check    {}\n", integrity);

    if (!options.json_out.empty()) {
      nlohmann::json report = {
          {"schema_version", 2},
          {"tool", "qgate-store-bench"},
          {"store_schema_version", qgate::db::schema_version_known()},
          {"engine", options.postgres.empty() ? "sqlite" : "postgresql"},
          {"runs", stored_runs},
          {"builds", options.builds},
          {"profiles", kProfiles.size()},
          {"weight_types", kTypes.size()},
          {"cotenant_samples", cotenant_sample_rows},
          {"batch_size", options.batch_size},
          {"fill_s", fill_s},
          {"queries", options.queries},
          {"trend", figures},
          {"db_bytes", db_bytes},
          {"max_rss_kb", max_rss_kb},
          {"integrity_check", integrity},
      };
      std::ofstream(options.json_out) << report.dump(2) << "\n";
    }
  } catch (const std::exception& error) {
    std::cerr << "qgate-store-bench: " << error.what() << "\n";
    if (!temp_dir.empty() && !options.keep) std::filesystem::remove_all(temp_dir);
    return 1;
  }
  if (!temp_dir.empty() && !options.keep) std::filesystem::remove_all(temp_dir);
  if (options.keep) fmt::print("kept               {}\n", db_path.string());
  return 0;
}
