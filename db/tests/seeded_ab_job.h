// A finished A/B job written straight into a store, for the tests of the dashboard's reads: a build,
// a job with a 4..10-pair policy, ten ABBA pairs whose ratio is known (arm A 10% faster, pair 3's
// runs contended), a co-tenant summary and two readings per run, and a small parity sweep.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qgate/db/records.h"
#include "qgate/db/store.h"

namespace qgate::testing {

struct SeededAbJob {
  db::RowId job_id = 0;
  db::RowId build_id = 0;
  int pairs = 10;
  int parity_cases = 0;
  int readings = 0;        // co-tenant readings over all runs
  int contended_pair = 3;  // both runs of this pair index are contended
  std::int64_t start_ms = 1'780'000'000'000;
};

inline double seeded_tokens_per_s(char arm, int pair_index) {
  const double b = 1000.0 + 5.0 * pair_index;
  return arm == 'A' ? b * 1.10 : b;
}

inline SeededAbJob seed_ab_job(db::Store& store) {
  SeededAbJob seeded;
  db::Build build;
  build.name = "mmq-tile128";
  build.sha256 = std::string(63, '0') + "1";
  build.commit_sha = "abc1234";
  seeded.build_id = store.insert_build(build).id;

  db::Job job;
  job.kind = "ab";
  job.build_id = seeded.build_id;
  job.profile = "cpu-tiny";
  job.backend = "cpu";
  job.tokens = 32;
  job.spec_json = R"({"kind":"JOB_KIND_AB","profile":"cpu-tiny","policy":{"min_pairs":4,"max_pairs":10}})";
  seeded.job_id = store.create_job(job);
  store.update_job_state(seeded.job_id, db::JobState::Running, std::nullopt, std::nullopt);

  std::vector<db::RunBundle> bundles;
  for (int i = 0; i < seeded.pairs; ++i) {
    // ABBA: A first in even pairs, B first in odd ones.
    const std::string order = i % 2 == 0 ? "AB" : "BA";
    for (char arm : order) {
      db::RunBundle bundle;
      db::Run& r = bundle.run;
      r.job_id = seeded.job_id;
      r.build_id = seeded.build_id;
      r.arm = std::string(1, arm);
      r.path = arm == 'A' ? "mmq" : "f16";
      r.pair_index = i;
      r.seq = static_cast<int>(bundles.size());
      r.started_ms = seeded.start_ms + 1000 * static_cast<std::int64_t>(bundles.size());
      r.finished_ms = r.started_ms + 500;
      r.state = db::RunState::Done;
      r.backend = "cpu";
      r.profile = "cpu-tiny";
      r.tokens = 32;
      r.tokens_per_s = seeded_tokens_per_s(arm, i);
      const bool busy = i == seeded.contended_pair;
      r.contended = busy;
      db::CotenantSummary summary;
      summary.available = true;
      summary.max_foreign_sm = busy ? 96.0 : 0.0;
      summary.top_processes = busy ? "sglang@96%" : "";
      summary.throttle_reasons = busy ? "sw_thermal" : "";
      summary.contended = busy;
      bundle.cotenant = summary;
      for (int k = 0; k < 2; ++k) {
        db::CotenantSample s;
        s.t_ms = r.started_ms + 100 * k;
        s.foreign_sm = busy ? 96.0 : 0.0;
        s.device_util = busy ? 99.0 : 40.0;
        s.sm_clock_mhz = busy ? 1500 : 1980;
        s.throttle_reasons = busy ? 0x20 : 0;  // sw_thermal
        s.foreign_processes = busy ? "sglang@96%" : "";
        bundle.cotenant_samples.push_back(s);
        ++seeded.readings;
      }
      bundles.push_back(std::move(bundle));
    }
  }
  store.record_runs(bundles);

  std::vector<db::ParityCaseRecord> cases;
  for (const char* type : {"q4_0", "q4_K", "q6_K"}) {
    for (std::int64_t od : {256, 512}) {
      db::ParityCaseRecord c;
      c.job_id = seeded.job_id;
      c.build_id = seeded.build_id;
      c.path = "mmq";
      c.weight_type = type;
      c.nt = 32;
      c.od = od;
      c.k = 256;
      c.outcome = "passed";
      c.reference = "mmq-qgate";
      c.tolerance = 1e-2;
      c.max_abs_diff = 1e-3 * static_cast<double>(od) / 256.0;
      c.worst_tolerance_fraction = 0.1 * static_cast<double>(od) / 256.0;
      cases.push_back(c);
    }
  }
  store.add_parity_cases(cases);
  seeded.parity_cases = static_cast<int>(cases.size());
  return seeded;
}

}  // namespace qgate::testing
