// JobRecorder: the worker protocol's records and the job's progress and end, as the store's rows.
#include "qgate/server/job_recorder.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "qgate/cotenant/sampler.h"
#include "qgate/cotenant/summary.h"
#include "qgate/jobs/job_messages.h"
#include "qgate/v1/record_words.h"

namespace qgate::server {

// The application layer (jobs/) this file uses.
using jobs::from_proto;
using jobs::progress_json;
using jobs::to_proto;
using jobs::verdict_row;

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// The run's parts, one per weight type in the order the profile first names it: the type's GEMMs'
/// time in one pass (count x median, as gemm_ms sums over every type) and the tokens per second
/// that time alone gives. A run whose timings are missing has none.
std::vector<db::RunPart> run_parts(const v1::ProfileRun& result, int64_t tokens) {
  std::vector<db::RunPart> parts;
  for (const v1::ProfileGemmTiming& g : result.gemms()) {
    auto part = std::find_if(parts.begin(), parts.end(),
                             [&](const db::RunPart& p) { return p.weight_type == g.gemm().type(); });
    if (part == parts.end()) part = parts.insert(parts.end(), db::RunPart{g.gemm().type(), 0.0, 0.0});
    part->gemm_ms += g.gemm().count() * g.median_us() / 1000.0;
  }
  std::erase_if(parts, [](const db::RunPart& p) { return !(p.gemm_ms > 0.0); });
  for (db::RunPart& p : parts) p.tokens_per_s = double(tokens) / (p.gemm_ms / 1000.0);
  return parts;
}

}  // namespace

JobRecorder::JobRecorder(db::Store& store, EventHub& events, const db::Job& job, std::string backend,
                         std::string host)
    : store_(store), events_(events), job_(job), backend_(std::move(backend)), host_(std::move(host)) {}

void JobRecorder::publish(const v1::JobProgress& progress, const std::string& message) {
  v1::JobEvent e;
  e.set_job_id(job_.id);
  e.set_unix_ms(now_ms());
  e.set_state(v1::JOB_STATE_RUNNING);
  *e.mutable_progress() = progress;
  e.set_message(message);
  store_.update_job_progress(job_.id, progress_json(progress));
  events_.publish(e);
}

void JobRecorder::add_parity_cases(db::RowId build_id, const std::vector<v1::ParityCase>& cases) {
  std::vector<db::ParityCaseRecord> rows;
  rows.reserve(cases.size());
  for (const v1::ParityCase& p : cases) {
    db::ParityCaseRecord c;
    c.job_id = job_.id;
    c.build_id = build_id;
    c.path = words::word(p.path());
    c.weight_type = p.type();
    c.nt = p.shape().nt();
    c.od = p.shape().od();
    c.k = p.shape().k();
    c.seed = p.seed();
    c.outcome = words::word(p.outcome());
    c.reference = p.reference();
    c.tolerance = p.tolerance();
    c.max_abs_diff = p.max_abs_diff();
    c.nmse = p.nmse();
    c.nan_count = p.nan_count();
    c.inf_count = p.inf_count();
    c.unwritten_count = p.unwritten_count();
    c.message = p.message();
    c.numerics = p.numerics() == v1::NUMERICS_PROFILE_UNSPECIFIED ? "qgate" : std::string(words::word(p.numerics()));  // as judged
    c.activation = words::word(p.activation());
    c.atol = p.atol();
    c.rtol = p.rtol();
    c.worst_tolerance_fraction = p.worst_tolerance_fraction();
    c.max_rel_diff = p.max_rel_diff();
    c.exact_nmse = p.exact_nmse();
    c.exact_nmse_limit = p.exact_nmse_limit();
    c.weights_source = p.weights_source();
    rows.push_back(std::move(c));
  }
  store_.add_parity_cases(rows);
}

db::RowId JobRecorder::start_run(const RunPlacement& where, const v1::RunContext& context, const std::string& profile,
                                 int64_t tokens) {
  db::Run run;
  run.job_id = job_.id;
  run.build_id = where.build_id;
  run.arm = where.arm;
  run.path = where.path;
  run.pair_index = where.pair_index;
  run.seq = where.seq;
  run.host = host_.empty() ? context.host() : host_;
  run.gpu_name = context.device_name();
  run.gpu_uuid = context.device_uuid();
  run.driver_version = context.driver_version();
  run.cuda_version = context.cuda_runtime_version();
  run.backend = backend_;
  run.qgate_version = context.qgate_version();
  run.profile = profile;
  run.tokens = tokens;
  const nlohmann::json options = {{"repetitions", where.repetitions},
                                  {"fresh_process", where.fresh_process},
                                  {"cold_l2", true},
                                  {"worker_pid", where.worker_pid},
                                  {"device", context.device_ordinal()}};
  run.options_json = options.dump();
  return store_.add_run(run);
}

void JobRecorder::finish_run(db::RowId run_id, const v1::ProfileRun& result, int64_t tokens) {
  std::vector<db::Sample> samples = {{"tokens_per_s", "tok/s", result.tokens_per_s()},
                                     {"gemm_ms", "ms", result.gemm_ms()}};
  for (const auto& g : result.gemms())
    samples.push_back({"gemm_us:" + g.gemm().type() + ":" + std::to_string(g.gemm().od()) + "x" +
                           std::to_string(g.gemm().k()) + ":" + g.gemm().role(),
                       "us", g.median_us()});
  db::RunResult done;
  done.state = db::RunState::Done;
  done.tokens = tokens;
  done.tokens_per_s = result.tokens_per_s();
  done.gemm_ms = result.gemm_ms();
  done.parts = run_parts(result, tokens);
  store_.finish_run(run_id, done, samples);
}

void JobRecorder::fail_run(db::RowId run_id, int64_t tokens) {
  db::RunResult failed;
  failed.state = db::RunState::Failed;
  failed.tokens = tokens;
  store_.finish_run(run_id, failed, {});
}

std::optional<bool> JobRecorder::record_cotenant(db::RowId run_id, const std::vector<cotenant::Sample>& samples,
                                                 double quiet_max_foreign_sm_percent,
                                                 const std::string& unavailable_reason) {
  cotenant::QuietPolicy policy;
  policy.max_foreign_sm_percent = quiet_max_foreign_sm_percent;
  const cotenant::RunCotenant c = cotenant::summarize(samples, policy, cotenant::kDefaultSamplePeriodMs);
  db::CotenantSummary row;
  row.run_id = run_id;
  row.available = c.available;
  row.sample_period_ms = c.sample_period_ms;
  row.max_foreign_sm = c.max_foreign_sm;
  row.mean_foreign_sm = c.mean_foreign_sm;
  row.device_util_mean = c.device_util_mean;
  row.top_processes = c.top_processes;
  row.throttle_reasons = c.available ? c.throttle_reasons : "cotenant=unavailable: " + unavailable_reason;
  row.min_sm_clock_mhz = c.min_sm_clock_mhz;
  row.median_sm_clock_mhz = c.median_sm_clock_mhz;
  row.max_sm_clock_mhz = c.max_sm_clock_mhz;
  row.temperature_max_c = c.temperature_max_c;
  row.power_max_w = c.power_max_w;
  row.contended = c.contended;
  row.policy = c.policy;
  std::vector<db::CotenantSample> rows;
  for (const auto& r : cotenant::to_rows(samples)) {
    db::CotenantSample d;
    d.t_ms = r.t_ms;
    d.foreign_sm = r.foreign_sm;
    d.device_util = r.device_util;
    d.sm_clock_mhz = r.sm_clock_mhz;
    d.throttle_reasons = r.throttle_reasons;
    d.foreign_processes = r.foreign_processes;
    rows.push_back(d);
  }
  store_.put_cotenant(row, rows);
  return c.contended;
}

void JobRecorder::finish(const v1::VerdictReport& report, v1::JobProgress progress, const Fault& disposition) {
  progress.set_phase("done");
  store_.finish_job_with_verdict(verdict_row(job_.id, report),
                                 db::JobEnding{from_proto(disposition.disposition), disposition.detail},
                                 progress_json(progress));
  v1::JobEvent e;
  e.set_job_id(job_.id);
  e.set_unix_ms(now_ms());
  e.set_state(v1::JOB_STATE_DONE);
  *e.mutable_progress() = progress;
  *e.mutable_verdict() = report;
  events_.publish(e);
}

void JobRecorder::end(db::JobState state, const std::string& error, const std::optional<Fault>& fault) {
  try {
    const db::JobEnding ending = fault ? db::JobEnding{from_proto(fault->disposition), fault->detail}
                                       : db::JobEnding{db::Disposition::Unspecified, ""};
    store_.end_job(job_.id, state, error, ending, db::JobState::Running);
  } catch (const std::exception& e) {
    // The store refused (disk full, read-only): the job stays running and is re-run at restart.
    spdlog::error("job {} ended ({}) but the database refused to record it: {}; it stays unfinished and is run "
                  "again at the next start",
                  job_.id, error, e.what());
  }
  v1::JobEvent e;
  e.set_job_id(job_.id);
  e.set_unix_ms(now_ms());
  e.set_state(to_proto(state));
  e.set_message(error);
  events_.publish(e);
}

}  // namespace qgate::server
