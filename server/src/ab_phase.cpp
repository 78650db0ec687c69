// AbPhase: ABBA-interleaved timed runs of two arms, judged at the sequential design's looks.
#include "qgate/server/ab_phase.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <exception>
#include <map>
#include <thread>

#include "qgate/cotenant/periodic_sampling.h"
#include "qgate/server/leak_check.h"
#include "qgate/stats/sequential.h"
#include "qgate/stats/split_gpus.h"

namespace qgate::server {

namespace {

v1::Comparison to_proto(Comparison c) {
  switch (c) {
    case Comparison::Same: return v1::COMPARISON_SAME;
    case Comparison::Different: return v1::COMPARISON_DIFFERENT;
    default: return v1::COMPARISON_UNKNOWN;
  }
}

v1::Verdict to_proto(Verdict v) {
  switch (v) {
    case Verdict::Pass: return v1::VERDICT_PASS;
    case Verdict::Fail: return v1::VERDICT_FAIL;
    default: return v1::VERDICT_INCONCLUSIVE;
  }
}

/// One weight type's comparison (`e`, judged like the headline at the look the A/B stopped at) into
/// the report. The verdict is on the profile's summed tok/s, so a type that got slower inside a
/// faster sum would pass unsaid: under a PASS, a type whose own interval lies wholly below
/// 1 - threshold is named in the reasons.
void add_type_comparison(v1::VerdictReport& report, const std::string& type, const stats::LookResult& e,
                         const stats::SequentialDesign& design, double gemm_us_a, double gemm_us_b) {
  auto* t = report.add_per_type();
  t->set_weight_type(type);
  t->set_ratio(e.ratio);
  t->set_ci_low(e.lower);
  t->set_ci_high(e.upper);
  t->set_comparison(to_proto(e.comparison));
  t->set_gemm_us_a(gemm_us_a);
  t->set_gemm_us_b(gemm_us_b);
  if (report.verdict() == v1::VERDICT_PASS && e.upper < 1 - design.slowdown_threshold)
    report.add_reasons(fmt::format(
        "{} alone is slower: {:.3f} [{:.3f}, {:.3f}] is a slowdown beyond {:.1f}% ({:.1f} us against {:.1f}); "
        "the verdict is on the profile's summed tok/s",
        type, e.ratio, e.lower, e.upper, 100 * design.slowdown_threshold, gemm_us_a, gemm_us_b));
}

std::map<std::string, double> time_by_type(const v1::ProfileRun& run) {
  std::map<std::string, double> out;
  for (const auto& g : run.gemms()) out[g.gemm().type()] += g.median_us() * g.gemm().count();
  return out;
}

/// The pairs of the A/B so far, whole-profile and per weight type.
struct PairBook {
  std::vector<stats::AbPair> pairs;
  std::map<std::string, std::vector<stats::AbPair>> by_type;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> type_us;
  std::vector<double> tokens_a, tokens_b;
  int contended = 0;

  void add(const v1::ProfileRun& a, std::optional<bool> load_a, const v1::ProfileRun& b, std::optional<bool> load_b) {
    // Flagged when the sampler saw different load on the two runs of the pair.
    const bool mismatch = load_a.has_value() && load_b.has_value() && *load_a != *load_b;
    contended += (load_a.value_or(false) || load_b.value_or(false)) ? 1 : 0;
    pairs.push_back({a.tokens_per_s(), b.tokens_per_s(), mismatch});
    tokens_a.push_back(a.tokens_per_s());
    tokens_b.push_back(b.tokens_per_s());
    auto ta = time_by_type(a), tb = time_by_type(b);
    for (const auto& [type, us] : ta) {
      if (!tb.count(type) || us <= 0 || tb[type] <= 0) continue;
      by_type[type].push_back({1.0 / us, 1.0 / tb[type], false});
      type_us[type].first.push_back(us);
      type_us[type].second.push_back(tb[type]);
    }
  }
};

/// A planned look into the job's progress (its ratio and interval) and its line: "look 2 of 4 at 10
/// pairs: PASS (SAME), stop", where `judged` says what the look judged ("10 pairs", "5 blocks (10 pairs)").
std::string show_look(const stats::LookResult& look, size_t next_look, size_t looks, const std::string& judged,
                      v1::JobProgress& progress) {
  progress.set_ratio(look.ratio);
  progress.set_ci_low(look.lower);
  progress.set_ci_high(look.upper);
  return "look " + std::to_string(next_look + 1) + " of " + std::to_string(looks) + " at " + judged + ": " +
         std::string(to_string(look.verdict)) + " (" + std::string(to_string(look.comparison)) + "), " +
         std::string(stats::to_string(look.decision));
}

}  // namespace

AbPhase::AbPhase(AbSetup setup, WorkerLauncher& launcher, JobRecorder& recorder, const JobControl& control,
                 cotenant::Sampler& sampler)
    : setup_(std::move(setup)), launcher_(launcher), recorder_(recorder), control_(control), sampler_(sampler) {}

std::optional<v1::ProfileRun> AbPhase::sampled_run(ArmSession& arm, int64_t run_id, RunFailure* failure,
                                                   std::vector<cotenant::Sample>* samples) {
  own_pids_.insert(arm.pid());
  return sampled_run_on(sampler_, arm, run_id, failure, samples);
}

std::optional<v1::ProfileRun> AbPhase::sampled_run_on(cotenant::Sampler& sampler, ArmSession& arm, int64_t run_id,
                                                      RunFailure* failure, std::vector<cotenant::Sample>* samples) {
  // The sampler reads the GPU while the run's worker works. The job's own workers are not
  // foreign: the other arm's worker is idle during this run, but NVML's per-process samples look
  // back a few hundred ms and would carry its previous run into this one.
  cotenant::PeriodicSampling sampling(sampler);
  sampling.start(own_pids_);
  auto result = arm.run(run_id, failure);
  *samples = sampling.stop();
  return result;
}

db::RowId AbPhase::start_recorded_run(ArmSession& arm, int pair_index) {
  RunPlacement where;
  where.arm = arm.spec().name;
  where.build_id = arm.spec().build.id;
  where.path = arm.path();
  where.pair_index = pair_index;
  where.seq = seq_++;
  where.worker_pid = arm.pid();
  where.repetitions = setup_.arms.run.repetitions();
  where.fresh_process = setup_.fresh_process;
  return recorder_.start_run(where, arm.context(), setup_.profile, setup_.tokens);
}

v1::ProfileRun AbPhase::timed_run(ArmSession& arm, int pair_index) {
  control_.check();
  if (setup_.fresh_process || !arm.started()) {
    if (arm.started()) arm.shutdown();
    arm.start();
    own_pids_.insert(arm.pid());
  }
  const db::RowId run_id = start_recorded_run(arm, pair_index);
  RunFailure failure;
  std::vector<cotenant::Sample> samples;
  // The other arm's worker is idle now: frozen, its threads (a build's background thread
  // included) cannot take the CPU or the GPU from this run (docs/security.md).
  struct IdleArmsFrozen {
    std::vector<ArmSession*> idle;
    explicit IdleArmsFrozen(std::vector<ArmSession*> arms) : idle(std::move(arms)) {
      for (ArmSession* a : idle) a->freeze(true);
    }
    ~IdleArmsFrozen() {
      for (ArmSession* a : idle) a->freeze(false);
    }
  };
  std::vector<ArmSession*> idle;
  for (ArmSession* other : arms_)
    if (other != &arm) idle.push_back(other);
  IdleArmsFrozen frozen(std::move(idle));
  auto result = sampled_run(arm, run_id, &failure, &samples);
  if (!result) {
    // One restart and one retry; a second failure ends the job with both reasons.
    recorder_.publish(*progress_, "arm " + arm.spec().name + ": run failed (" + failure.why +
                                      "); restarting its worker and retrying once");
    arm.restart();
    own_pids_.insert(arm.pid());
    RunFailure again;
    result = sampled_run(arm, run_id, &again, &samples);
    if (!result) {
      recorder_.fail_run(run_id, setup_.tokens);
      throw JobFailure("arm " + arm.spec().name + " failed twice: " + failure.why + "; then: " + again.why,
                       again.fault);
    }
    recovered_.push_back("arm " + arm.spec().name + ": worker restarted once after " + failure.fault.detail);
  }
  recorder_.finish_run(run_id, *result, setup_.tokens);
  identity_.add(arm.spec().name, runs_per_arm_[arm.spec().name]++, *result);
  last_contended_ = recorder_.record_cotenant(run_id, samples, setup_.quiet_max_foreign_sm_percent,
                                              sampler_.available() ? "" : sampler_.unavailable_reason());
  if (setup_.fresh_process) arm.shutdown();
  return *result;
}

std::pair<AbPhase::TimedRun, AbPhase::TimedRun> AbPhase::timed_runs_at_once(ArmSession& x, cotenant::Sampler& sx,
                                                                            ArmSession& y, cotenant::Sampler& sy,
                                                                            int pair_index) {
  control_.check();
  struct Side {
    ArmSession* arm;
    cotenant::Sampler* sampler;
    db::RowId run_id = 0;
    std::optional<v1::ProfileRun> result;
    RunFailure failure;
    std::vector<cotenant::Sample> samples;
    std::exception_ptr error;
  };
  Side sides[2] = {{&x, &sx}, {&y, &sy}};
  for (Side& side : sides) {
    ArmSession& arm = *side.arm;
    if (setup_.fresh_process || !arm.started()) {
      if (arm.started()) arm.shutdown();
      arm.start();
    }
    own_pids_.insert(arm.pid());
    side.run_id = start_recorded_run(arm, pair_index);
  }
  // Both runs at once, one on each GPU: the other arm's worker is on the other GPU, never a co-tenant.
  auto time_one = [this](Side& side) {
    try {
      side.result = sampled_run_on(*side.sampler, *side.arm, side.run_id, &side.failure, &side.samples);
    } catch (...) {
      side.error = std::current_exception();
    }
  };
  std::thread other([&] { time_one(sides[1]); });
  time_one(sides[0]);
  other.join();
  for (Side& side : sides)
    if (side.error) std::rethrow_exception(side.error);
  TimedRun out[2];
  for (int i = 0; i < 2; ++i) {
    Side& side = sides[i];
    ArmSession& arm = *side.arm;
    if (!side.result) {
      recorder_.publish(*progress_, "arm " + arm.spec().name + ": run failed (" + side.failure.why +
                                        "); restarting its worker and retrying once, alone");
      arm.restart();
      own_pids_.insert(arm.pid());
      RunFailure again;
      side.result = sampled_run_on(*side.sampler, arm, side.run_id, &again, &side.samples);
      if (!side.result) {
        recorder_.fail_run(side.run_id, setup_.tokens);
        throw JobFailure("arm " + arm.spec().name + " failed twice: " + side.failure.why + "; then: " + again.why,
                         again.fault);
      }
      recovered_.push_back("arm " + arm.spec().name + ": worker restarted once after " + side.failure.fault.detail);
    }
    recorder_.finish_run(side.run_id, *side.result, setup_.tokens);
    identity_.add(arm.spec().name, runs_per_arm_[arm.spec().name]++, *side.result);
    out[i].contended = recorder_.record_cotenant(side.run_id, side.samples, setup_.quiet_max_foreign_sm_percent,
                                                 side.sampler->available() ? "" : side.sampler->unavailable_reason());
    out[i].run = *side.result;
    if (setup_.fresh_process) arm.shutdown();
  }
  return {out[0], out[1]};
}

AbOutcome AbPhase::run_split(v1::JobProgress& progress) {
  const SplitSetup& split = *setup_.split;
  const stats::GatePolicy& policy = setup_.policy;
  // Looks are in blocks of two pairs (split_gpus.h); the pair budget stays the policy's.
  const stats::SequentialDesign design = stats::SequentialDesign::from_policy(stats::split_block_policy(policy));
  auto on = [](ArmSpec spec, const std::vector<std::string>& args, const std::string& where) {
    spec.device_args = args;
    spec.log_name = spec.name + where;
    return spec;
  };
  // Each arm has a worker on each GPU: A1 and B2 time even pairs, A2 and B1 odd ones.
  ArmSession a1(on(setup_.a, split.first_args, ""), setup_.arms, launcher_, control_);
  ArmSession b2(on(setup_.b, split.second_args, ""), setup_.arms, launcher_, control_);
  ArmSession a2(on(setup_.a, split.second_args, "-gpu2"), setup_.arms, launcher_, control_);
  ArmSession b1(on(setup_.b, split.first_args, "-gpu2"), setup_.arms, launcher_, control_);
  cotenant::Sampler& s1 = split.first_sampler ? *split.first_sampler : sampler_;
  cotenant::Sampler& s2 = split.second_sampler ? *split.second_sampler : sampler_;

  progress.set_phase("ab");
  progress.set_pairs_max(2 * design.looks.back());
  recorder_.publish(progress, "split across two GPUs: A = " + setup_.a.label + ", B = " + setup_.b.label +
                                  "; GPU " + std::to_string(split.first.ordinal()) + " (" + split.first.name() +
                                  ") and GPU " + std::to_string(split.second.ordinal()) + " (" +
                                  split.second.name() + "), the arms swapping GPUs every pair");
  // Runs that belong to arm "A" and "B" whichever GPU they ran on: the identity check and the store
  // see the arm, the run's context the GPU.
  PairBook book;
  std::optional<stats::LookResult> look;
  std::vector<stats::AbPair> blocks;
  size_t next_look = 0;
  while (true) {
    const int index = int(book.pairs.size());
    const bool a_first = stats::split_a_on_first(index);
    ArmSession& a = a_first ? a1 : a2;
    ArmSession& b = a_first ? b2 : b1;
    auto [ra, rb] = timed_runs_at_once(a, a_first ? s1 : s2, b, a_first ? s2 : s1, index);
    book.add(ra.run, ra.contended, rb.run, rb.contended);
    progress.set_pairs_done(int32_t(book.pairs.size()));
    if (book.pairs.size() % 2 != 0 || int(book.pairs.size() / 2) < design.looks[next_look]) {
      recorder_.publish(progress);
      continue;
    }
    blocks = stats::split_blocks(book.pairs);
    look = stats::evaluate_look(blocks, design, next_look);
    recorder_.publish(progress, show_look(*look, next_look, design.looks.size(),
                                          std::to_string(blocks.size()) + " blocks (" +
                                              std::to_string(book.pairs.size()) + " pairs)",
                                          progress));
    if (look->decision == stats::LookDecision::stop) break;
    ++next_look;
  }
  AbOutcome out;
  for (ArmSession* arm : {&a1, &b2, &a2, &b1}) arm->shutdown();
  for (const ArmSession* arm : {&a1, &b2, &a2, &b1})
    for (const ArmMemory& life : arm->memory())
      if (auto leak = judge_arm_memory(life)) {
        out.leaks.push_back(*leak);
        break;
      }
  const stats::LookResult& decision = look.value();
  fill_report(out, decision, blocks, int(book.pairs.size()), book.contended, book.tokens_a, book.tokens_b);
  v1::VerdictReport& report = out.report;
  const stats::GpuEffect gpu = stats::split_gpu_effect(book.pairs);
  v1::SplitGpus* s = report.mutable_split();
  *s->mutable_first() = split.first;
  *s->mutable_second() = split.second;
  s->set_blocks(int32_t(gpu.blocks));
  s->set_gpu_ratio(gpu.ratio);
  s->set_gpu_ci_low(gpu.lower);
  s->set_gpu_ci_high(gpu.upper);
  *report.add_gpus() = split.first;
  *report.add_gpus() = split.second;
  report.add_reasons("split across GPU " + std::to_string(split.first.ordinal()) + " and GPU " +
                     std::to_string(split.second.ordinal()) + ": judged on " + std::to_string(blocks.size()) +
                     " blocks of two pairs with the arms on swapped GPUs, so the GPUs' own speed cancels");
  for (const auto& [type, tp] : book.by_type) {
    if (tp.size() != book.pairs.size()) continue;
    const auto type_blocks = stats::split_blocks(tp);
    add_type_comparison(report, type, stats::judge_look(type_blocks, design, decision.look_index), design,
                        stats::geometric_mean(book.type_us[type].first),
                        stats::geometric_mean(book.type_us[type].second));
  }
  out.recovered = recovered_;
  return out;
}

void AbPhase::fill_report(AbOutcome& out, const stats::LookResult& decision, std::span<const stats::AbPair> judged,
                          int pairs, int contended, const std::vector<double>& tokens_a,
                          const std::vector<double>& tokens_b) {
  std::vector<double> log_ratios;
  for (const auto& p : judged) log_ratios.push_back(std::log(p.a) - std::log(p.b));
  v1::VerdictReport& report = out.report;
  report.set_verdict(to_proto(decision.verdict));
  report.set_comparison(to_proto(decision.comparison));
  report.set_ratio(decision.ratio);
  report.set_ci_low(decision.lower);
  report.set_ci_high(decision.upper);
  report.set_p_value(stats::wilcoxon_signed_rank_p(log_ratios));
  report.set_pairs(int32_t(pairs));
  report.set_contended_pairs(contended);
  report.set_profile(setup_.profile);
  report.set_tokens(setup_.tokens);
  if (!sampler_.available())
    report.add_reasons("co-tenant load unknown (cotenant=unavailable: " + sampler_.unavailable_reason() + ")");
  else if (contended > 0)
    report.add_reasons(std::to_string(contended) + " of " + std::to_string(pairs) +
                       " pairs ran under co-tenant load; " + std::to_string(decision.contention_mismatches) +
                       " saw different load on their two runs");
  report.mutable_arm_a()->set_label(setup_.a.label);
  report.mutable_arm_a()->set_build_id(setup_.a.build.id);
  report.mutable_arm_a()->set_tokens_per_s(stats::geometric_mean(tokens_a));
  report.mutable_arm_a()->set_runs(int32_t(tokens_a.size()));
  report.mutable_arm_b()->set_label(setup_.b.label);
  report.mutable_arm_b()->set_build_id(setup_.b.build.id);
  report.mutable_arm_b()->set_tokens_per_s(stats::geometric_mean(tokens_b));
  report.mutable_arm_b()->set_runs(int32_t(tokens_b.size()));
  for (const auto& r : decision.reasons) report.add_reasons(r);
  if (!setup_.throughput_note.empty())
    report.add_reasons(setup_.throughput_note);
  else
    report.add_reasons("tok/s is prefill throughput of " + setup_.profile + "'s linear layers at " +
                       std::to_string(setup_.tokens) + " tokens (" +
                       (setup_.arms.run.whole_pass() ? "median whole pass" : "summed GEMM time") + ", cold L2)");
  *report.mutable_identity() = identity_.result();
  if (report.identity().checked() && !report.identity().identical()) {
    report.set_verdict(v1::VERDICT_FAIL);
    report.add_reasons("the arms' outputs are not identical: " + report.identity().detail());
  }
}

AbOutcome AbPhase::run(v1::JobProgress& progress) {
  progress_ = &progress;
  if (setup_.split) return run_split(progress);
  const stats::GatePolicy& policy = setup_.policy;
  // Pairs are judged only at the design's planned looks (docs/ab-statistics.md).
  const stats::SequentialDesign design = stats::SequentialDesign::from_policy(policy);
  ArmSession a(setup_.a, setup_.arms, launcher_, control_);
  ArmSession b(setup_.b, setup_.arms, launcher_, control_);
  arms_ = {&a, &b};
  struct ForgetArms {
    std::vector<ArmSession*>& arms;
    ~ForgetArms() { arms.clear(); }
  } forget{arms_};

  progress.set_phase("ab");
  progress.set_pairs_max(policy.max_pairs);
  recorder_.publish(progress, "starting the arms: A = " + setup_.a.label + ", B = " + setup_.b.label + ", profile " +
                                  setup_.profile + ", " + std::to_string(setup_.tokens) + " tokens");
  if (!setup_.fresh_process) {
    a.start();
    own_pids_.insert(a.pid());
    b.start();
    own_pids_.insert(b.pid());
  }

  PairBook book;
  std::optional<stats::LookResult> look;
  AbOutcome out;
  if (setup_.order == v1::RUN_ORDER_SEQUENTIAL) {
    // Every A run, then every B run: the order llama.cpp's compare-commits uses, kept only to show
    // what a co-tenant or drift does to it. No early stop: both arms get max_pairs runs.
    std::vector<v1::ProfileRun> runs_a, runs_b;
    std::vector<std::optional<bool>> load_a, load_b;
    for (int i = 0; i < policy.max_pairs; ++i) {
      runs_a.push_back(timed_run(a, i));
      load_a.push_back(last_contended_);
      recorder_.publish(progress, "sequential: A run " + std::to_string(i + 1) + " of " +
                                      std::to_string(policy.max_pairs));
    }
    for (int i = 0; i < policy.max_pairs; ++i) {
      runs_b.push_back(timed_run(b, i));
      load_b.push_back(last_contended_);
      recorder_.publish(progress, "sequential: B run " + std::to_string(i + 1) + " of " +
                                      std::to_string(policy.max_pairs));
    }
    for (int i = 0; i < policy.max_pairs; ++i) book.add(runs_a[i], load_a[i], runs_b[i], load_b[i]);
    progress.set_pairs_done(int32_t(book.pairs.size()));
    look = stats::evaluate_look(book.pairs, design, design.last_look());
    out.report.add_reasons(
        "sequential order (all A runs, then all B runs): drift and co-tenant phases are not balanced");
  } else {
    // ABBA: each block yields two pairs, (A, B) then (B, A), so drift hits both arms alike.
    size_t next_look = 0;
    while (true) {
      const int index = int(book.pairs.size());
      if (index % 2 == 0) {
        auto ra = timed_run(a, index);
        const auto ca = last_contended_;
        auto rb = timed_run(b, index);
        book.add(ra, ca, rb, last_contended_);
      } else {
        auto rb = timed_run(b, index);
        const auto cb = last_contended_;
        auto ra = timed_run(a, index);
        book.add(ra, last_contended_, rb, cb);
      }
      progress.set_pairs_done(int32_t(book.pairs.size()));
      if (int(book.pairs.size()) < design.looks[next_look]) {
        recorder_.publish(progress);
        continue;
      }
      // A planned look: the interval, verdict and comparison are read here and only here.
      look = stats::evaluate_look(book.pairs, design, next_look);
      recorder_.publish(progress, show_look(*look, next_look, design.looks.size(),
                                            std::to_string(book.pairs.size()) + " pairs", progress));
      if (look->decision == stats::LookDecision::stop) break;
      ++next_look;
    }
  }
  a.shutdown();
  b.shutdown();
  for (const ArmSession* arm : {&a, &b})
    for (const ArmMemory& life : arm->memory())
      if (auto leak = judge_arm_memory(life)) {
        out.leaks.push_back(*leak);
        break;
      }

  const stats::LookResult& decision = look.value();
  fill_report(out, decision, book.pairs, int(book.pairs.size()), book.contended, book.tokens_a, book.tokens_b);
  v1::VerdictReport& report = out.report;
  // The GPU both arms ran on, as their worker saw it.
  v1::GpuRef gpu;
  gpu.set_ordinal(a.context().device_ordinal());
  gpu.set_name(a.context().device_name());
  gpu.set_uuid(a.context().device_uuid());
  *report.add_gpus() = gpu;
  for (const auto& [type, tp] : book.by_type) {
    // The same interval as the headline, at the look the A/B stopped at (a type missing from some
    // runs has fewer pairs and gets none).
    if (tp.size() != book.pairs.size()) continue;
    add_type_comparison(report, type, stats::judge_look(tp, design, decision.look_index), design,
                        stats::geometric_mean(book.type_us[type].first),
                        stats::geometric_mean(book.type_us[type].second));
  }
  out.recovered = recovered_;
  return out;
}

}  // namespace qgate::server
