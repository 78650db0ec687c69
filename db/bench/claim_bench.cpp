// qgate-claim-bench: the job queue under several claimers, as a fleet of daemons shares it. Queues J
// jobs in an empty store (a third for each of two GPU models, a third for any GPU, half of those
// asking for a label), then forks N claimer processes. Each opens its own store (its own
// connection), sets its own claimant with a lease, as a daemon does, and loops claim_next_job ->
// update_job_state(done) until nothing in its scope is queued. Claimers alternate between the two
// GPU models (one claimer alone serves both: two GPUs) and every other one carries the label.
// Reports the claim latency (p50/p90/p99/max), the jobs per second through the queue, and checks by
// the store afterwards that every job was claimed once, is done, and went to a claimer its model and
// labels allow. A benchmark, not a test.
//
//   qgate-claim-bench --claimers N --jobs J [--db FILE | --postgres ADDRESS] [--json-out FILE]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
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
using Clock = std::chrono::steady_clock;

struct Options {
  int claimers = 3;
  int jobs = 3000;
  std::string db_path;   // empty = a file in a fresh temporary directory
  std::string postgres;  // an empty PostgreSQL database instead of SQLite
  std::string json_out;
};

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "qgate-claim-bench: " << message << "\n"
            << "usage: qgate-claim-bench --claimers N --jobs J [--db FILE | --postgres ADDRESS] [--json-out FILE]\n";
  std::exit(2);
}

Options parse_options(int argc, char** argv) {
  Options options;
  for (BenchArguments args(argc, argv, 1, usage_error); args.next();) {
    const std::string_view arg = args.flag();
    if (arg == "--claimers") options.claimers = static_cast<int>(args.positive(1'000'000));
    else if (arg == "--jobs") options.jobs = static_cast<int>(args.positive(1'000'000));
    else if (arg == "--db") options.db_path = args.value();
    else if (arg == "--postgres") options.postgres = args.value();
    else if (arg == "--json-out") options.json_out = args.value();
    else if (arg == "--help" || arg == "-h") usage_error("help");
    else usage_error(fmt::format("unknown option {}", arg));
  }
  return options;
}

std::unique_ptr<qgate::db::Store> open_store(const Options& options, const std::filesystem::path& db_path) {
  if (!options.postgres.empty()) {
    qgate::db::PostgresOptions store_options;
    store_options.address = options.postgres;
    return qgate::db::open_postgres_store(store_options);
  }
  qgate::db::SqliteOptions store_options;
  store_options.path = db_path;
  return qgate::db::open_sqlite_store(store_options);
}

// The two GPU models of the fleet, as a job asks for one and as a GPU names itself.
constexpr const char* kModels[] = {"H100", "H200"};
constexpr const char* kGpuNames[] = {"NVIDIA H100 80GB HBM3", "NVIDIA H200"};
constexpr const char* kLabel = "fp8";

/// What job i asks for: model 0, model 1 or any GPU by thirds; half of the any-GPU jobs need the label.
std::string job_model(int i) { return i % 3 == 2 ? "" : kModels[i % 3]; }
bool job_needs_label(int i) { return i % 6 == 5; }

/// One GPU of a claimer: its model index.
struct ClaimerGpu {
  int model = 0;
};
/// Claimer k: one GPU of model k % 2 (the only claimer has both), the label on even claimers.
std::vector<ClaimerGpu> claimer_gpus(int k, int claimers) {
  if (claimers == 1) return {{0}, {1}};
  return {{k % 2}};
}
bool claimer_has_label(int k) { return k % 2 == 0; }
std::string claimer_host(int k) { return fmt::format("claimer-{}", k); }

double percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(fraction * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

/// A claimer process: claims and finishes jobs until its GPUs find nothing queued, writing one line
/// per job ("job claim_us done_us") and a last line "errors E empty_us_total" to `log_path`.
int run_claimer(int k, const Options& options, const std::filesystem::path& db_path, int ready_fd, int start_fd,
                const std::filesystem::path& log_path) {
  try {
    auto store = open_store(options, db_path);
    qgate::db::Claimant claimant;
    claimant.id = fmt::format("{}:/var/lib/qgate", claimer_host(k));
    claimant.lease_ms = 60000;
    claimant.host = claimer_host(k);
    store->set_claimant(claimant);
    std::vector<qgate::db::ClaimScope> scopes;
    for (const ClaimerGpu& gpu : claimer_gpus(k, options.claimers)) {
      qgate::db::ClaimScope scope;
      scope.gpu_name = kGpuNames[gpu.model];
      scope.gpu_uuid = fmt::format("GPU-{:08x}-{}", 0xc1a1u + k, gpu.model);
      if (claimer_has_label(k) || options.claimers == 1) scope.labels = {kLabel, "rack-1"};
      else scope.labels = {"rack-2"};
      scope.gpus_served = 1;
      scopes.push_back(scope);
    }
    const char ready = 'r';
    if (::write(ready_fd, &ready, 1) != 1) return 3;
    char go = 0;
    if (::read(start_fd, &go, 1) != 1) return 3;

    std::ofstream log(log_path);
    std::vector<bool> retired(scopes.size(), false);
    std::size_t live = scopes.size();
    int errors = 0;
    for (std::size_t turn = 0; live > 0; turn = (turn + 1) % scopes.size()) {
      if (retired[turn]) continue;
      const auto t0 = Clock::now();
      std::optional<qgate::db::Job> job;
      try {
        job = store->claim_next_job(scopes[turn]);
      } catch (const qgate::db::StoreError& error) {
        // A busy database past its timeout: counted, and the claim tried again.
        ++errors;
        std::cerr << fmt::format("claimer {}: claim failed: {}\n", k, error.what());
        continue;
      }
      const auto t1 = Clock::now();
      if (!job) {
        retired[turn] = true;
        --live;
        continue;
      }
      bool done = false;
      for (int attempt = 0; attempt < 5 && !done; ++attempt) {
        try {
          done = store->update_job_state(job->id, qgate::JobState::Done, std::nullopt, qgate::JobState::Running);
          if (!done) break;
        } catch (const qgate::db::StoreError& error) {
          ++errors;
          std::cerr << fmt::format("claimer {}: done failed: {}\n", k, error.what());
        }
      }
      const auto t2 = Clock::now();
      log << job->id << ' ' << std::chrono::duration<double, std::micro>(t1 - t0).count() << ' '
          << std::chrono::duration<double, std::micro>(t2 - t1).count() << (done ? "" : " lost") << '\n';
    }
    log << "errors " << errors << '\n';
    return 0;
  } catch (const std::exception& error) {
    std::cerr << fmt::format("claimer {}: {}\n", k, error.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  const std::filesystem::path temp_dir =
      std::filesystem::temp_directory_path() / fmt::format("qgate-claim-bench-{}", ::getpid());
  std::filesystem::create_directories(temp_dir);
  const std::filesystem::path db_path = options.db_path.empty() ? temp_dir / "queue.db" : std::filesystem::path(options.db_path);
  const std::string engine = options.postgres.empty() ? "sqlite" : "postgresql";

  try {
    // --- Queue the jobs (one build), each through create_job: durable, as a submit is ---
    double queue_s = 0.0;
    {
      auto store = open_store(options, db_path);
      if (store->count_jobs(qgate::db::JobFilter{}) != 0) throw std::runtime_error("the store is not empty");
      qgate::db::Build build;
      build.name = "claim-bench";
      build.sha256 = fmt::format("{:064x}", 0xc1a1b);
      const RowId build_id = store->insert_build(build).id;
      const auto start = Clock::now();
      const std::int64_t base_ms = 1'764'892'800'000;  // 2025-12-05, fixed: the queue's order is by created_ms
      for (int i = 0; i < options.jobs; ++i) {
        qgate::db::Job job;
        job.kind = "gate";
        job.build_id = build_id;
        job.profile = "cpu-tiny";
        job.backend = "cuda";
        job.created_ms = base_ms + i;
        job.gpu_model = job_model(i);
        if (job_needs_label(i)) job.labels = {kLabel};
        store->create_job(job);
      }
      queue_s = std::chrono::duration<double>(Clock::now() - start).count();
    }  // closed before the fork: no connection crosses into a child

    // --- Fork the claimers, release them together ---
    int start_pipe[2], ready_pipe[2];
    if (::pipe(start_pipe) != 0 || ::pipe(ready_pipe) != 0) throw std::runtime_error("pipe failed");
    std::vector<pid_t> children;
    for (int k = 0; k < options.claimers; ++k) {
      const pid_t pid = ::fork();
      if (pid < 0) throw std::runtime_error("fork failed");
      if (pid == 0) {
        ::close(start_pipe[1]);
        ::close(ready_pipe[0]);
        std::_Exit(run_claimer(k, options, db_path, ready_pipe[1], start_pipe[0],
                               temp_dir / fmt::format("claimer-{}.log", k)));
      }
      children.push_back(pid);
    }
    ::close(start_pipe[0]);
    ::close(ready_pipe[1]);
    // Every claimer has its connection open before any starts: a claimer that failed to open closes
    // its end of the pipe without a byte, and the read ends early.
    for (int ready = 0; ready < options.claimers;) {
      char byte = 0;
      if (::read(ready_pipe[0], &byte, 1) != 1) break;
      ++ready;
    }
    ::close(ready_pipe[0]);
    const auto release = Clock::now();
    const std::string go(static_cast<std::size_t>(options.claimers), 'g');
    if (::write(start_pipe[1], go.data(), go.size()) != static_cast<ssize_t>(go.size())) throw std::runtime_error("write failed");
    ::close(start_pipe[1]);
    int failed_children = 0;
    for (pid_t pid : children) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed_children;
    }
    const double wall_s = std::chrono::duration<double>(Clock::now() - release).count();

    // --- What the claimers say they did ---
    std::vector<double> claim_ms, done_ms;
    std::map<RowId, int> claimed_by;  // job -> claimer
    int duplicates = 0, lost = 0, errors = 0;
    std::vector<int> per_claimer;
    for (int k = 0; k < options.claimers; ++k) {
      std::ifstream log(temp_dir / fmt::format("claimer-{}.log", k));
      std::string line;
      int count = 0;
      while (std::getline(log, line)) {
        if (line.rfind("errors ", 0) == 0) {
          errors += std::stoi(line.substr(7));
          continue;
        }
        RowId id = 0;
        double claim_us = 0, done_us = 0;
        char tail[8] = {0};
        const int fields = std::sscanf(line.c_str(), "%lld %lf %lf %7s", reinterpret_cast<long long*>(&id), &claim_us,
                                       &done_us, tail);
        if (fields < 3) continue;
        if (fields == 4) ++lost;
        if (!claimed_by.emplace(id, k).second) ++duplicates;
        claim_ms.push_back(claim_us / 1000.0);
        done_ms.push_back(done_us / 1000.0);
        ++count;
      }
      per_claimer.push_back(count);
    }

    // --- What the store says: every job done once, by a claimer it could go to ---
    auto store = open_store(options, db_path);
    auto count_state = [&](qgate::JobState state) {
      qgate::db::JobFilter filter;
      filter.state = state;
      return store->count_jobs(filter);
    };
    const std::int64_t done_jobs = count_state(qgate::JobState::Done);
    const std::int64_t queued_left = count_state(qgate::JobState::Queued);
    const std::int64_t running_left = count_state(qgate::JobState::Running);
    qgate::db::JobFilter all;
    all.limit = options.jobs + 10;
    const std::vector<qgate::db::Job> jobs = store->list_jobs(all);
    int misrouted = 0, host_mismatch = 0, retried = 0, unlogged = 0;
    for (const qgate::db::Job& job : jobs) {
      if (job.attempts != 0) ++retried;
      const auto logged = claimed_by.find(job.id);
      if (logged == claimed_by.end()) {
        ++unlogged;
        continue;
      }
      const int k = logged->second;
      if (job.host != claimer_host(k)) ++host_mismatch;
      bool model_ok = job.gpu_model.empty();
      for (const ClaimerGpu& gpu : claimer_gpus(k, options.claimers)) {
        if (job.gpu_model == kModels[gpu.model]) model_ok = true;
      }
      const bool labels_ok = job.labels.empty() || claimer_has_label(k) || options.claimers == 1;
      if (!model_ok || !labels_ok) ++misrouted;
    }
    const bool ok = failed_children == 0 && duplicates == 0 && lost == 0 && unlogged == 0 && misrouted == 0 &&
                    host_mismatch == 0 && retried == 0 && done_jobs == options.jobs && queued_left == 0 &&
                    running_left == 0 && static_cast<int>(claimed_by.size()) == options.jobs;

    const double jobs_per_s = static_cast<double>(claim_ms.size()) / wall_s;
    std::printf("%s, %d claimers, %d jobs (queued in %.1f s through create_job)\n", engine.c_str(), options.claimers,
                options.jobs, queue_s);
    std::printf("  claim latency ms: p50 %.2f  p90 %.2f  p99 %.2f  max %.2f   (done: p50 %.2f p99 %.2f)\n",
                percentile(claim_ms, 0.50), percentile(claim_ms, 0.90), percentile(claim_ms, 0.99),
                claim_ms.empty() ? 0.0 : *std::max_element(claim_ms.begin(), claim_ms.end()),
                percentile(done_ms, 0.50), percentile(done_ms, 0.99));
    std::printf("  %.0f jobs/s through the queue (claim + done), %.2f s wall; per claimer %d..%d jobs\n", jobs_per_s,
                wall_s, per_claimer.empty() ? 0 : *std::min_element(per_claimer.begin(), per_claimer.end()),
                per_claimer.empty() ? 0 : *std::max_element(per_claimer.begin(), per_claimer.end()));
    std::printf("  store afterwards: %lld done, %lld queued, %lld running; claimed twice %d, misrouted %d, "
                "store errors retried %d: %s\n",
                static_cast<long long>(done_jobs), static_cast<long long>(queued_left),
                static_cast<long long>(running_left), duplicates, misrouted, errors, ok ? "ok" : "FAILED");

    nlohmann::json report = {
        {"tool", "qgate-claim-bench"},
        {"engine", engine},
        {"claimers", options.claimers},
        {"jobs", options.jobs},
        {"queue_s", queue_s},
        {"wall_s", wall_s},
        {"jobs_per_s", jobs_per_s},
        {"claim_ms",
         {{"p50", percentile(claim_ms, 0.50)},
          {"p90", percentile(claim_ms, 0.90)},
          {"p99", percentile(claim_ms, 0.99)},
          {"max", claim_ms.empty() ? 0.0 : *std::max_element(claim_ms.begin(), claim_ms.end())}}},
        {"done_ms", {{"p50", percentile(done_ms, 0.50)}, {"p99", percentile(done_ms, 0.99)}}},
        {"jobs_per_claimer", per_claimer},
        {"store_errors_retried", errors},
        {"check",
         {{"done", done_jobs},
          {"queued_left", queued_left},
          {"running_left", running_left},
          {"claimed_twice", duplicates},
          {"misrouted", misrouted},
          {"host_mismatch", host_mismatch},
          {"attempts_nonzero", retried},
          {"not_claimed", unlogged},
          {"failed_claimers", failed_children},
          {"ok", ok}}}};
    if (!options.json_out.empty()) std::ofstream(options.json_out) << report.dump(2) << "\n";
    store.reset();
    std::filesystem::remove_all(temp_dir);
    return ok ? 0 : 1;
  } catch (const std::exception& error) {
    std::cerr << "qgate-claim-bench: " << error.what() << "\n";
    return 1;
  }
}
