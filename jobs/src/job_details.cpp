// JobDetails: one job's A/B pairs and looks, parity cases and co-tenant readings, read from the store
// and mapped to the Dashboard messages.
#include "qgate/jobs/job_details.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "qgate/cotenant/sample.h"
#include "qgate/jobs/job_messages.h"
#include "qgate/stats/sequential.h"
#include "qgate/stats/split_gpus.h"

namespace qgate::jobs {
namespace {

db::Job job_or_refuse(db::Store& store, db::RowId job_id) {
  if (auto job = store.find_job(job_id)) return *job;
  throw ApplicationError(ApplicationErrorKind::NotFound, "no job " + std::to_string(job_id));
}

/// The job's finished timed runs of an arm, oldest first (started_ms, then run id): its build's runs
/// and, for a gate, its baseline's. Read through runs_by_job (Store::job_compare_runs), so the rows
/// read are the job's own (2 x its pair budget at most), never its builds' whole history.
std::vector<db::CompareRun> arm_runs(db::Store& store, const db::Job& job) {
  std::vector<db::CompareRun> runs;
  for (db::CompareRun& run : store.job_compare_runs(job.id)) {
    const bool of_its_builds =
        run.build_id == job.build_id || (job.baseline_build_id && run.build_id == *job.baseline_build_id);
    if (of_its_builds && run.arm) runs.push_back(std::move(run));
  }
  return runs;
}

std::vector<std::string> reason_names(std::optional<std::int64_t> mask) {
  std::vector<std::string> names;
  if (!mask) return names;
  for (std::uint64_t bit = 1; bit != 0; bit <<= 1)
    if (static_cast<std::uint64_t>(*mask) & bit) names.push_back(cotenant::clock_event_name(bit));
  return names;
}

}  // namespace

v1::AbDetail JobDetails::ab(db::RowId job_id) const {
  const db::Job job = job_or_refuse(store_, job_id);
  v1::AbDetail out;
  out.set_job_id(job_id);
  if (auto listing = store_.find_job_listing(job_id)) {
    const v1::Job api = to_proto(*listing);
    if (api.has_verdict()) {
      *out.mutable_verdict() = api.verdict();
      out.set_arm_a(api.verdict().arm_a().label());
      out.set_arm_b(api.verdict().arm_b().label());
    }
  }

  struct Halves {
    std::optional<double> a, b;
    std::optional<bool> load_a, load_b;
  };
  std::map<int, Halves> by_index;
  for (const db::CompareRun& run : arm_runs(store_, job)) {
    v1::AbRun* r = out.add_runs();
    r->set_run_id(run.run_id);
    r->set_arm(*run.arm);
    r->set_pair_index(run.pair_index);
    r->set_path(run.path);
    r->set_tokens_per_s(run.tokens_per_s);
    r->set_started_unix_ms(run.started_ms);
    r->set_contended(run.contended.value_or(false));
    r->set_cotenant_known(run.contended.has_value());
    Halves& h = by_index[run.pair_index];
    if (*run.arm == "A") {
      h.a = run.tokens_per_s;
      h.load_a = run.contended;
    } else if (*run.arm == "B") {
      h.b = run.tokens_per_s;
      h.load_b = run.contended;
    }
  }

  // The pairs as the A/B phase judged them: A / B per pair index, a mismatch where the sampler saw
  // different load on the two runs.
  std::vector<stats::AbPair> pairs;
  for (const auto& [index, h] : by_index) {
    if (!h.a || !h.b || *h.a <= 0 || *h.b <= 0) continue;
    v1::AbPair* p = out.add_pairs();
    p->set_index(index);
    p->set_tokens_per_s_a(*h.a);
    p->set_tokens_per_s_b(*h.b);
    p->set_ratio(*h.a / *h.b);
    p->set_contended(h.load_a.value_or(false) || h.load_b.value_or(false));
    const bool mismatch = h.load_a && h.load_b && *h.load_a != *h.load_b;
    pairs.push_back({*h.a, *h.b, mismatch});
  }

  const v1::JobSpec spec = spec_of(job);
  const stats::GatePolicy policy = gate_policy(spec.policy());
  out.set_slowdown_threshold(policy.slowdown_threshold);
  out.set_max_pairs(policy.max_pairs);
  // A split job's looks judge blocks of two pairs, as its A/B phase did (split_gpus.h).
  const bool split = spec.split_gpus();
  out.set_split_gpus(split);
  const stats::SequentialDesign design =
      stats::SequentialDesign::from_policy(split ? stats::split_block_policy(policy) : policy);
  const size_t pairs_per_unit = split ? 2 : 1;
  for (size_t i = 0; i < design.looks.size(); ++i) {
    v1::AbLook* look = out.add_looks();
    look->set_look(static_cast<std::int32_t>(i + 1));
    const size_t needed = pairs_per_unit * static_cast<size_t>(design.looks[i]);
    look->set_pairs(static_cast<std::int32_t>(needed));
    if (pairs.size() < needed) continue;
    const std::span<const stats::AbPair> judged(pairs.data(), needed);
    const stats::LookResult r = split ? stats::judge_look(stats::split_blocks(judged), design, i)
                                      : stats::judge_look(judged, design, i);
    look->set_reached(true);
    look->set_ratio(r.ratio);
    const bool bounded = r.lower > 0 && std::isfinite(r.upper);
    look->set_bounded(bounded);
    look->set_ci_low(bounded ? r.lower : 0);
    look->set_ci_high(bounded ? r.upper : 0);
    look->set_verdict(r.verdict == Verdict::Pass   ? v1::VERDICT_PASS
                      : r.verdict == Verdict::Fail ? v1::VERDICT_FAIL
                                                          : v1::VERDICT_INCONCLUSIVE);
    look->set_comparison(r.comparison == Comparison::Same        ? v1::COMPARISON_SAME
                         : r.comparison == Comparison::Different ? v1::COMPARISON_DIFFERENT
                                                                        : v1::COMPARISON_UNKNOWN);
    look->set_decision(std::string(stats::to_string(r.decision)));
  }
  return out;
}

v1::ParityResults JobDetails::parity(db::RowId job_id) const {
  job_or_refuse(store_, job_id);
  v1::ParityResults out;
  out.set_job_id(job_id);
  for (const db::ParityCaseRecord& c : store_.parity_cases(job_id)) {
    v1::ParityResult* r = out.add_cases();
    r->set_weight_type(c.weight_type);
    r->set_path(c.path);
    r->set_nt(c.nt);
    r->set_od(c.od);
    r->set_k(c.k);
    r->set_activation(c.activation);
    r->set_outcome(c.outcome);
    if (c.max_abs_diff) r->set_max_abs_diff(*c.max_abs_diff);
    if (c.tolerance) r->set_tolerance(*c.tolerance);
    if (c.worst_tolerance_fraction) r->set_worst_tolerance_fraction(*c.worst_tolerance_fraction);
    if (c.nmse) r->set_nmse(*c.nmse);
    r->set_reference(c.reference);
    r->set_numerics(c.numerics);
    r->set_seed(c.seed);
    r->set_message(c.message);
  }
  return out;
}

v1::CotenantTimeline JobDetails::cotenant(db::RowId job_id) const {
  const db::Job job = job_or_refuse(store_, job_id);
  v1::CotenantTimeline out;
  out.set_job_id(job_id);
  std::vector<v1::CotenantReading> readings;
  for (const db::CompareRun& run : arm_runs(store_, job)) {
    v1::CotenantRunLoad* load = out.add_runs();
    load->set_run_id(run.run_id);
    load->set_arm(run.arm.value_or(""));
    load->set_pair_index(run.pair_index);
    if (auto summary = store_.find_cotenant(run.run_id)) {
      load->set_available(summary->available);
      load->set_contended(summary->contended.value_or(false));
      if (summary->max_foreign_sm) load->set_max_foreign_sm_percent(*summary->max_foreign_sm);
      load->set_throttle_reasons(summary->throttle_reasons);
      load->set_top_processes(summary->top_processes);
    }
    for (const db::CotenantSample& s : store_.cotenant_samples(run.run_id)) {
      v1::CotenantReading r;
      r.set_run_id(run.run_id);
      r.set_arm(run.arm.value_or(""));
      r.set_pair_index(run.pair_index);
      r.set_t_unix_ms(s.t_ms);
      if (s.foreign_sm) r.set_foreign_sm_percent(*s.foreign_sm);
      if (s.device_util) r.set_device_util_percent(*s.device_util);
      if (s.sm_clock_mhz) r.set_sm_clock_mhz(*s.sm_clock_mhz);
      for (std::string& name : reason_names(s.throttle_reasons)) r.add_throttle_reasons(std::move(name));
      r.set_foreign_processes(s.foreign_processes);
      readings.push_back(std::move(r));
    }
  }
  std::stable_sort(readings.begin(), readings.end(), [](const v1::CotenantReading& a, const v1::CotenantReading& b) {
    return a.t_unix_ms() < b.t_unix_ms();
  });
  for (v1::CotenantReading& r : readings) *out.add_readings() = std::move(r);
  return out;
}

}  // namespace qgate::jobs
