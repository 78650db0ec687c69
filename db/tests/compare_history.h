// A seeded history of runs for the `qgate compare` tests: two builds measured in several jobs on several
// series (tokens, backend, GPU, timing mode), with contended runs and one gate job that ran both builds.
// Build "tile64" is 5% faster than "tile128" on the series they share.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "qgate/db/records.h"
#include "qgate/db/store.h"

namespace qgate::testing {

inline constexpr const char* kH200 = "NVIDIA H200";
inline constexpr const char* kUuid1 = "GPU-11111111-aaaa-bbbb-cccc-000000000001";
inline constexpr const char* kUuid2 = "GPU-22222222-aaaa-bbbb-cccc-000000000002";
inline constexpr const char* kProfile = "llama-7b-q4_K_M";
// The gate job's stored verdict.
inline constexpr double kGateRatio = 1.052, kGateLow = 1.031, kGateHigh = 1.068;

struct SeededHistory {
  db::RowId tile64 = 0;   // A: 420 tok/s on the shared series
  db::RowId tile128 = 0;  // B: 400 tok/s on the shared series
  db::RowId cpu_only = 0;       // runs only on the CPU backend, at another token count than tile64's
  db::RowId contended_only = 0; // runs only under co-tenant load, on the shared series
  db::RowId no_runs = 0;
  db::RowId steady = 0;   // 400 tok/s with little noise: the SAME of tile128
  db::RowId gate_job = 0; // tile64 (arm A) against tile128 (arm B)
  std::vector<db::RowId> tile64_jobs, tile128_jobs;  // jobs with quiet runs on the shared series
  int tile64_runs = 0, tile128_runs = 0, tile64_contended = 0;
};

/// Where a seeded run was measured.
struct Where {
  std::string backend = "cuda";
  std::string gpu_name = kH200;
  std::string gpu_uuid = kUuid1;
  std::int64_t tokens = 512;
  std::string profile = kProfile;
  std::string path = "mmq";
};

class HistoryWriter {
 public:
  explicit HistoryWriter(db::Store& store, std::uint64_t seed) : store_(store), rng_(seed) {}

  db::RowId build(const std::string& name) {
    db::Build b;
    b.name = name;
    b.sha256 = std::string(64 - name.size(), '0') + name;
    return store_.insert_build(b).id;
  }

  /// A finished job of `kind` on `build` (baseline for a gate) timed in `timing` ("gemm" when empty).
  db::RowId job(db::RowId build, std::optional<db::RowId> baseline, const std::string& timing = "") {
    db::Job j;
    j.kind = baseline ? "gate" : "ab";
    j.build_id = build;
    j.baseline_build_id = baseline;
    j.profile = kProfile;
    j.timing = timing == "pass" ? db::TimingMode::Pass : db::TimingMode::Gemm;
    j.backend = "cuda";
    const db::RowId id = store_.create_job(j);
    store_.update_job_state(id, db::JobState::Running, std::nullopt, std::nullopt);
    store_.update_job_state(id, db::JobState::Done, std::nullopt, std::nullopt);
    return id;
  }

  /// `n` runs of `build` in `job` at a median of `median` tok/s with log-normal noise `sigma`.
  void runs(db::RowId build, std::optional<db::RowId> job, const Where& where, int n, double median, double sigma,
            std::optional<bool> contended, const std::string& arm = "A", int first_pair = 0) {
    std::normal_distribution<double> noise(0.0, sigma);
    std::vector<db::RunBundle> bundles;
    for (int i = 0; i < n; ++i) {
      db::RunBundle bundle;
      db::Run& r = bundle.run;
      r.job_id = job;
      r.build_id = build;
      r.arm = arm;
      r.path = where.path;
      r.pair_index = first_pair + i;
      r.seq = i;
      r.started_ms = clock_ms_ += 1000;
      r.finished_ms = r.started_ms + 500;
      r.state = db::RunState::Done;
      r.gpu_name = where.gpu_name;
      r.gpu_uuid = where.gpu_uuid;
      r.backend = where.backend;
      r.profile = where.profile;
      r.tokens = where.tokens;
      r.tokens_per_s = median * std::exp(noise(rng_));
      r.contended = contended;
      bundles.push_back(bundle);
    }
    store_.record_runs(bundles);
  }

 private:
  db::Store& store_;
  std::mt19937_64 rng_;
  std::int64_t clock_ms_ = 1'700'000'000'000;
};

inline SeededHistory seed_history(db::Store& store, std::uint64_t seed = 20261130) {
  HistoryWriter w(store, seed);
  SeededHistory h;
  h.tile64 = w.build("tile64");
  h.tile128 = w.build("tile128");
  h.cpu_only = w.build("cpu-only");
  h.contended_only = w.build("contended-only");
  h.no_runs = w.build("no-runs");
  h.steady = w.build("steady");
  const Where shared;

  // tile64: three A/B jobs of 8 quiet runs on the shared series; the second also has 3 runs under a
  // co-tenant at half speed, which a quiet comparison must leave out.
  for (int j = 0; j < 3; ++j) {
    const db::RowId job = w.job(h.tile64, std::nullopt);
    h.tile64_jobs.push_back(job);
    w.runs(h.tile64, job, shared, 8, 420.0, 0.015, false);
    h.tile64_runs += 8;
    if (j == 1) {
      w.runs(h.tile64, job, shared, 3, 210.0, 0.015, true, "A", 8);
      h.tile64_contended += 3;
    }
  }
  // tile128: two jobs of 10 quiet runs on the shared series.
  for (int j = 0; j < 2; ++j) {
    const db::RowId job = w.job(h.tile128, std::nullopt);
    h.tile128_jobs.push_back(job);
    w.runs(h.tile128, job, shared, 10, 400.0, 0.015, false, "A");
    h.tile128_runs += 10;
  }
  // A gate job with both builds as its arms: 6 pairs on the shared series.
  h.gate_job = w.job(h.tile64, h.tile128);
  w.runs(h.tile64, h.gate_job, shared, 6, 420.0, 0.015, false, "A");
  w.runs(h.tile128, h.gate_job, shared, 6, 400.0, 0.015, false, "B");
  db::Verdict verdict;  // what the job itself concluded on its pairs (tile64 / tile128)
  verdict.job_id = h.gate_job;
  verdict.verdict = qgate::Verdict::Pass;
  verdict.comparison = Comparison::Different;
  verdict.ratio = kGateRatio;
  verdict.ci_low = kGateLow;
  verdict.ci_high = kGateHigh;
  verdict.pairs = 6;
  store.put_verdict(verdict);
  h.tile64_jobs.push_back(h.gate_job);
  h.tile128_jobs.push_back(h.gate_job);
  h.tile64_runs += 6;
  h.tile128_runs += 6;

  // Series only one of them has: each differs from the shared one in one field.
  Where cpu;
  cpu.backend = "cpu";
  cpu.gpu_name = "";
  cpu.gpu_uuid = "";
  cpu.tokens = 64;
  cpu.profile = "cpu-tiny";
  w.runs(h.tile64, w.job(h.tile64, std::nullopt), cpu, 5, 90.0, 0.02, std::nullopt);
  Where other_gpu = shared;
  other_gpu.gpu_uuid = kUuid2;
  w.runs(h.tile128, w.job(h.tile128, std::nullopt), other_gpu, 5, 380.0, 0.015, false);
  Where other_tokens = shared;
  other_tokens.tokens = 256;
  w.runs(h.tile128, w.job(h.tile128, std::nullopt), other_tokens, 5, 350.0, 0.015, false);
  w.runs(h.tile64, w.job(h.tile64, std::nullopt, "pass"), shared, 5, 300.0, 0.03, false);
  w.runs(h.tile128, std::nullopt, shared, 4, 9999.0, 0.015, std::nullopt);  // imported: no job, not comparable

  Where cpu_128 = cpu;
  cpu_128.tokens = 128;
  w.runs(h.cpu_only, w.job(h.cpu_only, std::nullopt), cpu_128, 6, 80.0, 0.02, std::nullopt);
  w.runs(h.contended_only, w.job(h.contended_only, std::nullopt), shared, 6, 250.0, 0.05, true);
  for (int j = 0; j < 3; ++j) w.runs(h.steady, w.job(h.steady, std::nullopt), shared, 10, 400.0, 0.004, false);
  return h;
}

}  // namespace qgate::testing
