// A seeded build history for the change-point tests: successive builds of one kernel, each measured in
// its own job, with one 3% slowdown on the MMQ series in the last 30 days, contended runs that would look
// like a second slowdown if they counted, a flat f16 series, and an older step on another profile that
// `--since 30d` leaves out.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "qgate/db/records.h"
#include "qgate/db/store.h"

namespace qgate::testing {

inline constexpr const char* kChangeProfile = "llama-7b-q4_K_M";
inline constexpr const char* kOldProfile = "llama-13b-q4_K_M";
inline constexpr int kBuildsPerLevel = 12;

class ChangeHistoryWriter {
 public:
  ChangeHistoryWriter(db::Store& store, std::uint64_t seed, std::int64_t start_ms)
      : store_(store), rng_(seed), clock_ms_(start_ms) {}

  /// A build named `name`, one finished job of it, and `n` runs in that job around `median` tok/s
  /// (log-normal noise `sigma`), flagged `contended`.
  db::RowId measured_build(const std::string& name, const std::string& profile, const std::string& path, int n,
                           double median, double sigma, std::optional<bool> contended) {
    db::Build b;
    b.name = name;
    b.sha256 = std::string(64 - name.size(), '0') + name;
    const db::RowId build = store_.insert_build(b).id;
    runs(build, job(build, profile), profile, path, n, median, sigma, contended);
    return build;
  }

  db::RowId job(db::RowId build, const std::string& profile) {
    db::Job j;
    j.kind = "ab";
    j.build_id = build;
    j.profile = profile;
    j.timing = db::TimingMode::Gemm;
    j.backend = "cuda";
    const db::RowId id = store_.create_job(j);
    store_.update_job_state(id, db::JobState::Running, std::nullopt, std::nullopt);
    store_.update_job_state(id, db::JobState::Done, std::nullopt, std::nullopt);
    return id;
  }

  void runs(db::RowId build, db::RowId job, const std::string& profile, const std::string& path, int n, double median,
            double sigma, std::optional<bool> contended) {
    std::normal_distribution<double> noise(0.0, sigma);
    std::vector<db::RunBundle> bundles;
    for (int i = 0; i < n; ++i) {
      db::RunBundle bundle;
      db::Run& r = bundle.run;
      r.job_id = job;
      r.build_id = build;
      r.arm = "A";
      r.path = path;
      r.pair_index = i;
      r.seq = i;
      r.started_ms = clock_ms_ += 60'000;
      r.finished_ms = r.started_ms + 500;
      r.state = db::RunState::Done;
      r.gpu_name = "NVIDIA H200";
      r.gpu_uuid = "GPU-11111111-aaaa-bbbb-cccc-000000000001";
      r.backend = "cuda";
      r.profile = profile;
      r.tokens = 512;
      r.tokens_per_s = median * std::exp(noise(rng_));
      r.contended = contended;
      bundles.push_back(bundle);
    }
    store_.record_runs(bundles);
  }

  void set_clock(std::int64_t ms) { clock_ms_ = ms; }

 private:
  db::Store& store_;
  std::mt19937_64 rng_;
  std::int64_t clock_ms_;
};

struct ChangeHistory {
  std::string first_slow_build;  // the MMQ series' first build at the slower level
  std::string last_fast_build;
};

inline std::int64_t days_ago_ms(int days) {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count() - days * 86'400'000LL;
}

inline std::string numbered(const std::string& prefix, int i) {
  return prefix + (i < 10 ? "0" : "") + std::to_string(i);
}

inline ChangeHistory seed_change_history(db::Store& store, std::uint64_t seed = 20261201) {
  ChangeHistoryWriter w(store, seed, days_ago_ms(10));
  ChangeHistory h;
  // MMQ: 12 builds at 400 tok/s, then 12 at 388 (3% slower); 5 quiet runs each, 1% noise. Builds 3 to 6
  // of the first level also ran 4 times under a co-tenant at half speed.
  for (int i = 1; i <= 2 * kBuildsPerLevel; ++i) {
    const bool slow = i > kBuildsPerLevel;
    const std::string name = numbered("mmq-", i);
    const db::RowId build = w.measured_build(name, kChangeProfile, "mmq", 5, slow ? 388.0 : 400.0, 0.01, false);
    if (i >= 3 && i <= 6) w.runs(build, w.job(build, kChangeProfile), kChangeProfile, "mmq", 4, 200.0, 0.01, true);
    if (i == kBuildsPerLevel) h.last_fast_build = name;
    if (i == kBuildsPerLevel + 1) h.first_slow_build = name;
  }
  // f16: 16 builds at 300 tok/s, no change.
  for (int i = 1; i <= 16; ++i) w.measured_build(numbered("f16-", i), kChangeProfile, "f16", 5, 300.0, 0.01, false);
  // Another profile, 40-45 days ago: 10% slower from its 9th build on.
  w.set_clock(days_ago_ms(45));
  for (int i = 1; i <= 16; ++i)
    w.measured_build(numbered("old-", i), kOldProfile, "mmq", 5, i > 8 ? 180.0 : 200.0, 0.01, false);
  return h;
}

}  // namespace qgate::testing
