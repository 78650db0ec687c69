// qgate-history-fill: a large synthetic run history for trend benchmarks, written fast with SQL on
// the store's own engine, and a check that it is what the store's API would have written.
//
//   qgate-history-fill fill --store ADDRESS --runs N [--builds B] [--via sql|api] [--json-out FILE]
//   qgate-history-fill compare ADDRESS ADDRESS
//
// ADDRESS is a SQLite file or a postgresql:// address, of an empty store. Every value of run i is a
// function of i alone (no random state), so the two ways write the same rows:
//   --via api: builds, jobs (create_job, then done) and runs through the Store API (record_runs, in
//              batches of 10,000): the store computes each run's series key and keeps its trend
//              points (build_rollups) as it writes.
//   --via sql: builds through the API; jobs and runs by one INSERT ... SELECT per million runs over
//              generate_series (PostgreSQL) or a recursive CTE (SQLite), each series key computed by
//              make_series_key; then build_rollups filled, one build at a time, by the store's own
//              statement (rollup_recompute, which the migrations use to rebuild every point); on
//              PostgreSQL the identity sequences are moved past the ids written, and ANALYZE runs (what
//              autovacuum does after a bulk load). No samples or co-tenant rows: trends read neither.
// compare asks both stores the same trend queries (points for every co-tenant filter, profile,
// weight type, path and window; raw runs for every profile) and exits 1 at the first difference.
// The history: 2025, 3 profiles, 8 weight types, 2 paths, jobs of 40 runs, B builds over 10 names
// (default 50), 15% of runs contended and 3% unknown; the shape qgate-store-bench fills.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../src/detail/postgres_connection.h"
#include "../src/detail/sql_store_impl.h"
#include "../src/detail/sqlite_connection.h"
#include "bench_arguments.h"
#include "qgate/db/postgres_store.h"
#include "qgate/db/sqlite_store.h"

using qgate::db::bench::BenchArguments;

namespace {

using qgate::db::RowId;
using Clock = std::chrono::steady_clock;
namespace detail = qgate::db::detail;

constexpr std::array<const char*, 3> kProfiles{"llama-7b-q4_K_M", "llama-13b-q5_K_M", "mistral-7b-q8_0"};
constexpr std::array<const char*, 8> kTypes{"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_K", "q5_K", "q6_K"};
constexpr std::array<const char*, 2> kPaths{"mmq", "f16"};
constexpr std::int64_t kRunsPerJob = 40;
constexpr std::int64_t kBuildNames = 10;
constexpr std::int64_t kDayMs = 24LL * 3600 * 1000;
constexpr std::int64_t kHistoryStartMs = 1'735'689'600'000;  // 2025-01-01
constexpr std::int64_t kHistorySpanMs = 365 * kDayMs;
constexpr std::int64_t kHashMultiplier = 2654435761;  // Knuth's multiplicative hash, mod 2^32
constexpr std::int64_t kHashModulus = 4294967296;
constexpr const char* kHost = "gpu-host-01";
constexpr const char* kGpuName = "NVIDIA H200";
constexpr const char* kGpuUuid = "GPU-5c0ffee0-1234-5678-9abc-def012345678";
constexpr const char* kDriver = "560.35.03";
constexpr const char* kCuda = "12.6";

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

bool is_postgres(std::string_view address) { return qgate::db::is_postgres_address(address); }

std::unique_ptr<qgate::db::Store> open_store(const std::string& address) {
  if (is_postgres(address)) {
    qgate::db::PostgresOptions options;
    options.address = address;
    return qgate::db::open_postgres_store(options);
  }
  qgate::db::SqliteOptions options;
  options.path = address;
  return qgate::db::open_sqlite_store(options);
}

std::unique_ptr<detail::SqlConnection> open_connection(const std::string& address) {
  if (is_postgres(address)) {
    qgate::db::PostgresOptions options;
    options.address = address;
    return detail::open_postgres_connection(options);
  }
  qgate::db::SqliteOptions options;
  options.path = address;
  return detail::open_sqlite_connection(options);
}

// --- The history: every value a function of the run's index ---

struct Shape {
  std::int64_t runs = 0;
  std::int64_t builds = 50;
  std::int64_t jobs() const { return (runs + kRunsPerJob - 1) / kRunsPerJob; }
  std::int64_t started(std::int64_t i) const { return kHistoryStartMs + i * kHistorySpanMs / runs; }
  std::int64_t build_index(std::int64_t i) const { return i * builds / runs; }
};

std::int64_t run_hash(std::int64_t i) { return ((i + 1) * kHashMultiplier) % kHashModulus; }
double run_tokens_per_s(std::int64_t h) { return 400.0 + static_cast<double>((h / 8) % 40000) / 1000.0; }
/// 3 in 100 unknown, 15 in 100 contended.
std::optional<bool> run_contended(std::int64_t h) {
  const std::int64_t draw = (h / 320000) % 1000;
  if (draw < 30) return std::nullopt;
  return draw < 180;
}
std::string build_name(std::int64_t build_index) { return fmt::format("kern-{}", build_index % kBuildNames); }
/// The series of a run of build name n, path p, profile f and type t, as one number (gen_series).
std::int64_t series_index(std::int64_t name, std::int64_t path, std::int64_t profile, std::int64_t type) {
  return ((name * 2 + path) * 3 + profile) * 8 + type;
}

qgate::db::Build build_at(const Shape& shape, std::int64_t b) {
  qgate::db::Build build;
  build.name = build_name(b);
  build.sha256 = fmt::format("{:064x}", 0xb0000 + b);
  build.commit_sha = fmt::format("{:012x}", 0xc0000 + b);
  build.branch = "main";
  build.created_ms = kHistoryStartMs + b * (kHistorySpanMs / shape.builds);
  return build;
}

qgate::db::Run run_at(const Shape& shape, std::int64_t i) {
  const std::int64_t h = run_hash(i);
  const std::int64_t job = i / kRunsPerJob;
  qgate::db::Run run;
  run.job_id = job + 1;
  run.build_id = shape.build_index(i) + 1;
  run.arm = (i / 2) % 2 == 0 ? "A" : "B";
  run.pair_index = static_cast<int>(i / 2);
  run.seq = static_cast<int>(i % 2);
  run.started_ms = shape.started(i);
  run.finished_ms = run.started_ms + 900;
  run.state = qgate::db::RunState::Done;
  run.host = kHost;
  run.gpu_name = kGpuName;
  run.gpu_uuid = kGpuUuid;
  run.driver_version = kDriver;
  run.cuda_version = kCuda;
  run.backend = "cuda";
  run.qgate_version = "0.1.0";
  run.profile = kProfiles[job % 3];
  run.path = kPaths[(job / 3) % 2];
  run.weight_type = kTypes[h % 8];
  run.tokens = 512;
  run.tokens_per_s = run_tokens_per_s(h);
  run.gemm_ms = 512.0 / *run.tokens_per_s * 1000.0;
  run.contended = run_contended(h);
  return run;
}

qgate::db::Job job_at(const Shape& shape, std::int64_t j) {
  qgate::db::Job job;
  job.kind = "gate";
  job.build_id = shape.build_index(j * kRunsPerJob) + 1;
  job.profile = kProfiles[j % 3];
  job.path = kPaths[(j / 3) % 2];
  job.backend = "cuda";
  job.created_ms = shape.started(j * kRunsPerJob);
  return job;
}

void insert_builds(qgate::db::Store& store, const Shape& shape) {
  for (std::int64_t b = 0; b < shape.builds; ++b) {
    const qgate::db::BuildInsert inserted = store.insert_build(build_at(shape, b));
    if (!inserted.inserted || inserted.id != b + 1) {
      throw std::runtime_error(fmt::format("build {} got id {}: the store was not empty", b, inserted.id));
    }
  }
}

// --- Through the API ---

void fill_through_api(const std::string& address, const Shape& shape, nlohmann::json& report) {
  auto store = open_store(address);
  insert_builds(*store, shape);
  const auto jobs_start = Clock::now();
  for (std::int64_t j = 0; j < shape.jobs(); ++j) {
    const RowId id = store->create_job(job_at(shape, j));
    if (id != j + 1) throw std::runtime_error(fmt::format("job {} got id {}", j, id));
    store->update_job_state(id, qgate::JobState::Done, std::nullopt, std::nullopt);
  }
  report["jobs_s"] = seconds_since(jobs_start);
  const auto runs_start = Clock::now();
  constexpr std::int64_t kBatch = 10'000;
  for (std::int64_t lo = 0; lo < shape.runs; lo += kBatch) {
    std::vector<qgate::db::RunBundle> batch;
    for (std::int64_t i = lo; i < std::min(shape.runs, lo + kBatch); ++i) batch.push_back({run_at(shape, i), {}, {}, {}});
    const std::vector<RowId> ids = store->record_runs(batch);
    if (ids.front() != lo + 1) throw std::runtime_error(fmt::format("run {} got id {}", lo, ids.front()));
  }
  report["runs_s"] = seconds_since(runs_start);
}

// --- Through SQL ---

/// The rows of [lo, hi] as `i`, in the engine's words.
std::string index_rows(detail::SqlEngine engine, std::int64_t lo, std::int64_t hi) {
  if (engine == detail::SqlEngine::Postgresql) {
    return fmt::format("(SELECT i FROM generate_series(CAST({} AS BIGINT), CAST({} AS BIGINT)) AS g(i))", lo, hi);
  }
  return fmt::format("(WITH RECURSIVE seq(i) AS (SELECT {} UNION ALL SELECT i + 1 FROM seq WHERE i < {}) SELECT i FROM seq)",
                     lo, hi);
}

std::string case_of(std::string_view expression, std::span<const char* const> words) {
  std::string out = fmt::format("CASE {}", expression);
  for (std::size_t k = 0; k < words.size(); ++k) out += fmt::format(" WHEN {} THEN '{}'", k, words[k]);
  return out + " END";
}

void fill_through_sql(const std::string& address, const Shape& shape, nlohmann::json& report) {
  {
    auto store = open_store(address);  // migrated to this library's schema
    insert_builds(*store, shape);
  }
  auto connection = open_connection(address);
  const detail::SqlEngine engine = connection->engine();
  const bool postgres = engine == detail::SqlEngine::Postgresql;
  // Room to sort in for this connection only (the recompute's windows); the rows are the same.
  if (postgres) connection->execute_script("SET work_mem = '64MB'");
  else connection->execute_script("PRAGMA cache_size = -262144; PRAGMA temp_store = MEMORY");

  // Every series key the history has, from the store's own make_series_key.
  connection->execute_script("CREATE TEMP TABLE gen_series (k INTEGER PRIMARY KEY, series_key TEXT NOT NULL)");
  std::string values;
  for (std::int64_t name = 0; name < kBuildNames; ++name) {
    for (std::int64_t path = 0; path < 2; ++path) {
      for (std::int64_t profile = 0; profile < 3; ++profile) {
        for (std::int64_t type = 0; type < 8; ++type) {
          qgate::db::Run run = run_at(shape, 0);
          run.path = kPaths[path];
          run.profile = kProfiles[profile];
          run.weight_type = kTypes[type];
          if (!values.empty()) values += ", ";
          values += fmt::format("({}, '{}')", series_index(name, path, profile, type),
                                qgate::db::make_series_key(build_name(name), run));
        }
      }
    }
  }
  connection->execute_script("INSERT INTO gen_series (k, series_key) VALUES " + values);

  const std::string n = std::to_string(shape.runs), b = std::to_string(shape.builds);
  const std::string start = std::to_string(kHistoryStartMs), span = std::to_string(kHistorySpanMs);
  const auto jobs_start = Clock::now();
  connection->begin(detail::TransactionKind::Write);
  connection->execute_script(fmt::format(
      "INSERT INTO jobs (id, kind, state, build_id, profile, spec_json, backend, created_ms, finished_ms, path) "
      "SELECT i + 1, 'gate', 'done', (i * {runs_per_job}) * {b} / {n} + 1, {profile}, '{{}}', 'cuda', "
      "{start} + (i * {runs_per_job}) * {span} / {n}, {now}, {path} FROM {rows} AS g",
      fmt::arg("runs_per_job", kRunsPerJob), fmt::arg("b", b), fmt::arg("n", n),
      fmt::arg("profile", case_of("i % 3", kProfiles)), fmt::arg("start", start), fmt::arg("span", span),
      fmt::arg("now", detail::now_ms()), fmt::arg("path", case_of("(i / 3) % 2", kPaths)),
      fmt::arg("rows", index_rows(engine, 0, shape.jobs() - 1))));
  connection->commit();
  report["jobs_s"] = seconds_since(jobs_start);

  const auto runs_start = Clock::now();
  constexpr std::int64_t kChunk = 1'000'000;
  for (std::int64_t lo = 0; lo < shape.runs; lo += kChunk) {
    const std::int64_t hi = std::min(shape.runs, lo + kChunk) - 1;
    const auto chunk_start = Clock::now();
    connection->begin(detail::TransactionKind::Write);
    // s: the run's index, hash, job and build; t: its figures; then the row, key by gen_series.
    connection->execute_script(fmt::format(
        "INSERT INTO runs (id, job_id, build_id, arm, path, pair_index, seq, started_ms, finished_ms, state, host, "
        "gpu_name, gpu_uuid, driver_version, cuda_version, backend, qgate_version, options_json, series_key, profile, "
        "weight_type, tokens, tokens_per_s, gemm_ms, contended, settings, part_of) "
        "SELECT t.i + 1, t.job + 1, t.build + 1, CASE WHEN (t.i / 2) % 2 = 0 THEN 'A' ELSE 'B' END, {path}, t.i / 2, "
        "t.i % 2, {start} + t.i * {span} / {n}, {start} + t.i * {span} / {n} + 900, 'done', '{host}', '{gpu}', "
        "'{uuid}', '{driver}', '{cuda}', 'cuda', '0.1.0', '{{}}', k.series_key, {profile}, {type}, 512, t.v, "
        "512.0 / t.v * 1000.0, CASE WHEN t.draw < 30 THEN NULL WHEN t.draw < 180 THEN 1 ELSE 0 END, '', NULL "
        "FROM (SELECT s.*, 400.0 + CAST((s.h / 8) % 40000 AS DOUBLE PRECISION) / 1000.0 AS v, "
        "             (s.h / 320000) % 1000 AS draw "
        "      FROM (SELECT i, ((i + 1) * {mul}) % {modulus} AS h, i / {runs_per_job} AS job, i * {b} / {n} AS build "
        "            FROM {rows} AS g) AS s) AS t "
        "JOIN gen_series k ON k.k = ((((t.build % {names}) * 2 + (t.job / 3) % 2) * 3 + t.job % 3) * 8 + t.h % 8)",
        fmt::arg("path", case_of("(t.job / 3) % 2", kPaths)), fmt::arg("profile", case_of("t.job % 3", kProfiles)),
        fmt::arg("type", case_of("t.h % 8", kTypes)), fmt::arg("start", start), fmt::arg("span", span),
        fmt::arg("n", n), fmt::arg("b", b), fmt::arg("host", kHost), fmt::arg("gpu", kGpuName),
        fmt::arg("uuid", kGpuUuid), fmt::arg("driver", kDriver), fmt::arg("cuda", kCuda),
        fmt::arg("mul", kHashMultiplier), fmt::arg("modulus", kHashModulus), fmt::arg("runs_per_job", kRunsPerJob),
        fmt::arg("names", kBuildNames), fmt::arg("rows", index_rows(engine, lo, hi))));
    connection->commit();
    std::cerr << fmt::format("qgate-history-fill: runs {}..{} in {:.1f} s\n", lo + 1, hi + 1, seconds_since(chunk_start));
  }
  report["runs_s"] = seconds_since(runs_start);
  if (postgres) {
    connection->execute_script(
        "SELECT setval(pg_get_serial_sequence('jobs', 'id'), (SELECT max(id) FROM jobs));"
        "SELECT setval(pg_get_serial_sequence('runs', 'id'), (SELECT max(id) FROM runs))");
  }

  // The trend points, by the statement the store rebuilds them with, one build's runs at a time
  // (a point is one build's, so the rows are those of one statement over every run).
  const auto rollups_start = Clock::now();
  for (std::int64_t build = 1; build <= shape.builds; ++build) {
    connection->begin(detail::TransactionKind::Write);
    connection->execute_script(detail::rollup_recompute(fmt::format("r.build_id = {}", build)));
    connection->commit();
    if (build % 50 == 0 || build == shape.builds) {
      std::cerr << fmt::format("qgate-history-fill: trend points of builds 1..{} after {:.1f} s\n", build,
                               seconds_since(rollups_start));
    }
  }
  report["rollups_s"] = seconds_since(rollups_start);
  if (postgres) {
    const auto analyze_start = Clock::now();
    connection->execute_script("ANALYZE");
    report["analyze_s"] = seconds_since(analyze_start);
  }
}

// --- compare ---

std::string text_of(const std::optional<std::string>& value) { return value ? "'" + *value + "'" : "null"; }
template <typename T>
std::string text_of(const std::optional<T>& value) {
  return value ? fmt::format("{}", *value) : "null";
}

std::string series_text(const qgate::db::SeriesFields& s) {
  return fmt::format("{}|{}|{}|{}|{}|{}|{}|{}", s.profile, text_of(s.weight_type), s.path, s.tokens, s.backend,
                     s.gpu_name, s.settings, s.host);
}

/// Every field of a point but its row id (the order the store inserted points in).
std::string point_text(const qgate::db::TrendSummary& p) {
  return fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{:.17g}|{:.17g}|{:.17g}|{}|{}|{}|{}", series_text(p),
                     text_of(p.last_job_id), p.jobs, p.build_id, p.build_name, p.build_sha256, p.commit_sha,
                     p.series_key, p.first_ms, p.last_ms, p.runs, p.median_tokens_per_s, p.low_tokens_per_s,
                     p.high_tokens_per_s, p.total_runs, p.contended_runs, p.unknown_runs,
                     p.timing ? static_cast<int>(*p.timing) : -1);
}

std::string row_text(const qgate::db::TrendRow& r) {
  return fmt::format("{}|{}|{}|{}|{}|{}|{}|{:.17g}|{}|{}|{}|{}", series_text(r), r.run_id, text_of(r.job_id),
                     r.build_id, r.build_name, r.build_sha256, r.started_ms, r.tokens_per_s, text_of(r.contended),
                     r.series_key, r.commit_sha, r.timing ? static_cast<int>(*r.timing) : -1);
}

int compare(const std::string& left_address, const std::string& right_address) {
  auto left = open_store(left_address);
  auto right = open_store(right_address);
  std::int64_t queries = 0, points = 0, rows = 0, same_order = 0;
  auto differ = [&](const std::string& what, const std::vector<std::string>& a, const std::vector<std::string>& b) {
    if (a == b) {
      ++same_order;
      return false;
    }
    std::vector<std::string> sa = a, sb = b;
    std::sort(sa.begin(), sa.end());
    std::sort(sb.begin(), sb.end());
    if (sa == sb) return false;  // the same points; ties on first_ms ordered by row id
    std::cerr << fmt::format("differ: {}: {} against {} answers\n", what, a.size(), b.size());
    for (std::size_t k = 0; k < std::min(sa.size(), sb.size()); ++k) {
      if (sa[k] != sb[k]) {
        std::cerr << "  " << sa[k] << "\n  " << sb[k] << "\n";
        break;
      }
    }
    return true;
  };
  if (left->count_runs(std::nullopt) != right->count_runs(std::nullopt)) {
    std::cerr << "differ: run counts\n";
    return 1;
  }
  const std::int64_t end = kHistoryStartMs + kHistorySpanMs;
  std::vector<std::optional<std::string>> profiles{std::nullopt}, types{std::nullopt}, paths{std::nullopt};
  for (const char* p : kProfiles) profiles.emplace_back(p);
  for (const char* t : kTypes) types.emplace_back(t);
  for (const char* p : kPaths) paths.emplace_back(p);
  for (int filter = 0; filter < 3; ++filter) {
    for (const auto& profile : profiles) {
      for (const auto& type : types) {
        for (const auto& path : paths) {
          for (std::int64_t since : {std::int64_t{0}, end - 30 * kDayMs}) {
            qgate::db::TrendQuery query;
            query.profile = profile;
            query.weight_type = type;
            query.path = path;
            query.since_ms = since;
            query.include_contended = filter == 2;
            query.include_unknown = filter == 1;
            std::vector<std::string> a, b;
            for (const auto& p : left->query_trend_summaries(query)) a.push_back(point_text(p));
            for (const auto& p : right->query_trend_summaries(query)) b.push_back(point_text(p));
            ++queries;
            points += static_cast<std::int64_t>(a.size());
            if (differ(fmt::format("points {} {} {} since {} filter {}", text_of(profile), text_of(type),
                                   text_of(path), since, filter),
                       a, b)) {
              return 1;
            }
          }
        }
      }
    }
  }
  for (const auto& profile : profiles) {
    qgate::db::TrendQuery query;
    query.profile = profile;
    query.include_contended = true;
    query.include_unknown = true;
    for (const auto& type : types) {
      query.weight_type = type;
      std::vector<std::string> a, b;
      for (const auto& r : left->query_trend(query)) a.push_back(row_text(r));
      for (const auto& r : right->query_trend(query)) b.push_back(row_text(r));
      ++queries;
      rows += static_cast<std::int64_t>(a.size());
      if (differ(fmt::format("raw runs {} {}", text_of(profile), text_of(type)), a, b)) return 1;
    }
  }
  std::printf("same answers: %lld queries (%lld in the same order), %lld points and %lld raw runs compared\n",
              static_cast<long long>(queries), static_cast<long long>(same_order), static_cast<long long>(points),
              static_cast<long long>(rows));
  return 0;
}

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "qgate-history-fill: " << message << "\n"
            << "usage: qgate-history-fill fill --store ADDRESS --runs N [--builds B] [--via sql|api] [--json-out FILE]\n"
               "       qgate-history-fill compare ADDRESS ADDRESS\n";
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) usage_error("no command");
  const std::string command = argv[1];
  try {
    if (command == "compare") {
      if (argc != 4) usage_error("compare takes two addresses");
      return compare(argv[2], argv[3]);
    }
    if (command != "fill") usage_error(fmt::format("unknown command {}", command));
    std::string address, via = "sql", json_out;
    Shape shape;
    for (BenchArguments args(argc, argv, 2, usage_error); args.next();) {
      const std::string_view arg = args.flag();
      if (arg == "--store") address = args.value();
      else if (arg == "--runs") shape.runs = args.positive();
      else if (arg == "--builds") shape.builds = args.positive();
      else if (arg == "--via") via = args.value();
      else if (arg == "--json-out") json_out = args.value();
      else usage_error(fmt::format("unknown option {}", arg));
    }
    if (address.empty() || shape.runs == 0) usage_error("fill needs --store and --runs");
    if (via != "sql" && via != "api") usage_error("--via is sql or api");
    if (shape.builds > shape.runs) usage_error("more builds than runs");

    nlohmann::json report = {{"tool", "qgate-history-fill"},
                             {"engine", is_postgres(address) ? "postgresql" : "sqlite"},
                             {"via", via},
                             {"runs", shape.runs},
                             {"builds", shape.builds},
                             {"jobs", shape.jobs()}};
    const auto start = Clock::now();
    if (via == "api") fill_through_api(address, shape, report);
    else fill_through_sql(address, shape, report);
    report["fill_s"] = seconds_since(start);

    auto connection = open_connection(address);
    auto count = [&](const std::string& sql) {
      detail::ScopedStatement select(connection->prepared(sql));
      select->step();
      return select->int64(0);
    };
    report["runs_stored"] = count("SELECT count(*) FROM runs");
    report["trend_points"] = count("SELECT count(*) FROM build_rollups");
    if (is_postgres(address)) report["db_bytes"] = count("SELECT pg_database_size(current_database())");
    else report["db_bytes"] = static_cast<std::int64_t>(std::filesystem::file_size(address));
    std::printf("%s: %lld runs, %lld jobs, %lld builds, %lld trend points via %s in %.1f s; %.2f GB\n",
                report["engine"].get<std::string>().c_str(), static_cast<long long>(report["runs_stored"].get<std::int64_t>()),
                static_cast<long long>(shape.jobs()), static_cast<long long>(shape.builds),
                static_cast<long long>(report["trend_points"].get<std::int64_t>()), via.c_str(),
                report["fill_s"].get<double>(), static_cast<double>(report["db_bytes"].get<std::int64_t>()) / 1e9);
    if (!json_out.empty()) std::ofstream(json_out) << report.dump(2) << "\n";
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "qgate-history-fill: " << error.what() << "\n";
    return 1;
  }
}
