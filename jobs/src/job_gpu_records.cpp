// JobGpuRecords: a job's GPUs and its split report, read back from its runs and the pair's A/A.
#include "qgate/jobs/job_gpu_records.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "qgate/jobs/job_messages.h"
#include "qgate/stats/split_gpus.h"

namespace qgate::jobs {
namespace {

/// The ordinal a run's worker recorded (runs.options_json "device"); -1 when it did not.
int run_ordinal(const db::Run& run) {
  const auto options = nlohmann::json::parse(run.options_json, nullptr, false);
  if (options.is_object() && options.contains("device") && options["device"].is_number_integer())
    return options["device"].get<int>();
  return -1;
}

/// The A/B pairs of a job's runs, in pair order, and the GPU arm A used in pair 0.
struct JobPairs {
  std::vector<stats::AbPair> pairs;
  v1::GpuRef first, second;
};

std::optional<JobPairs> split_pairs(const std::vector<GpuRun>& runs) {
  std::map<int, std::pair<const GpuRun*, const GpuRun*>> by_index;
  for (const GpuRun& r : runs) (r.arm == "A" ? by_index[r.pair_index].first : by_index[r.pair_index].second) = &r;
  JobPairs out;
  int expected = 0;
  for (const auto& [index, ab] : by_index) {
    if (index != expected++ || !ab.first || !ab.second) break;
    if (ab.first->tokens_per_s <= 0 || ab.second->tokens_per_s <= 0) break;
    if (index == 0) {
      out.first = ab.first->gpu;
      out.second = ab.second->gpu;
    }
    out.pairs.push_back({ab.first->tokens_per_s, ab.second->tokens_per_s, false});
  }
  if (out.pairs.size() % 2 != 0) out.pairs.pop_back();
  if (out.pairs.empty()) return std::nullopt;
  return out;
}

}  // namespace

std::vector<GpuRun> JobGpuRecords::runs(const db::Job& job) const {
  // The job's finished runs through the runs_by_job index, then each run's arm, pair and GPU: bounded
  // by the job's own runs (2 x its pair budget), never by how many runs its builds have elsewhere.
  db::TrendQuery query;
  query.job_id = job.id;
  query.include_contended = true;
  query.include_unknown = true;
  std::vector<GpuRun> out;
  for (const db::TrendRow& row : store_.query_trend(query)) {
    const auto run = store_.find_run(row.run_id);
    if (!run || !run->arm || !run->tokens_per_s) continue;
    GpuRun r;
    r.arm = *run->arm;
    r.pair_index = run->pair_index;
    r.tokens_per_s = *run->tokens_per_s;
    r.gpu.set_ordinal(run_ordinal(*run));
    r.gpu.set_name(run->gpu_name);
    r.gpu.set_uuid(run->gpu_uuid);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<v1::GpuRef> JobGpuRecords::gpus(const std::vector<GpuRun>& runs) {
  std::map<std::tuple<int, std::string, std::string>, v1::GpuRef> distinct;
  for (const GpuRun& r : runs) distinct[{r.gpu.ordinal(), r.gpu.uuid(), r.gpu.name()}] = r.gpu;
  std::vector<v1::GpuRef> out;
  for (auto& [key, ref] : distinct) out.push_back(ref);
  return out;
}

bool JobGpuRecords::is_calibration(const db::Job& job, const v1::JobSpec& spec) {
  if (!spec.split_gpus()) return false;
  if (spec.kind() == v1::JOB_KIND_GATE) return job.baseline_build_id && *job.baseline_build_id == job.build_id;
  if (spec.kind() == v1::JOB_KIND_COMMAND) {
    const v1::CommandSpec& c = spec.command();
    switch (c.toggle()) {
      case v1::COMMAND_TOGGLE_BUILDS: return job.baseline_build_id && *job.baseline_build_id == job.build_id;
      case v1::COMMAND_TOGGLE_COMMANDS: return false;
      default: return c.value_a() == c.value_b() && !c.value_a().empty();
    }
  }
  return false;
}

std::optional<PairCalibration> JobGpuRecords::calibration(const v1::GpuRef& x, const v1::GpuRef& y, int64_t before_ms,
                                                          int64_t not_job, int scan) const {
  db::JobFilter filter;
  filter.state = db::JobState::Done;
  filter.limit = scan;
  std::vector<db::Job> done = store_.list_jobs(filter);
  std::sort(done.begin(), done.end(), [](const db::Job& a, const db::Job& b) {
    return a.finished_ms.value_or(0) != b.finished_ms.value_or(0) ? a.finished_ms.value_or(0) > b.finished_ms.value_or(0)
                                                                  : a.id > b.id;
  });
  const std::set<std::string> pair{x.uuid(), y.uuid()};
  for (const db::Job& job : done) {
    if (job.id == not_job || job.finished_ms.value_or(0) >= before_ms) continue;
    v1::JobSpec spec;
    try {
      spec = spec_of(job);
    } catch (const std::exception&) {
      continue;
    }
    if (!is_calibration(job, spec)) continue;
    const auto job_runs = runs(job);
    const auto pairs = split_pairs(job_runs);
    if (!pairs || std::set<std::string>{pairs->first.uuid(), pairs->second.uuid()} != pair) continue;
    if (pairs->first.uuid() == pairs->second.uuid()) continue;
    const auto verdict = store_.find_verdict(job.id);
    if (!verdict) continue;
    PairCalibration cal;
    cal.job_id = job.id;
    cal.first = pairs->first;
    cal.second = pairs->second;
    cal.ratio = verdict->ratio.value_or(1);
    cal.ci_low = verdict->ci_low.value_or(0);
    cal.ci_high = verdict->ci_high.value_or(0);
    cal.comparison = to_proto(verdict->comparison);
    cal.gpu_ratio = stats::split_gpu_effect(pairs->pairs).ratio;
    cal.finished_ms = job.finished_ms.value_or(0);
    return cal;
  }
  return std::nullopt;
}

void JobGpuRecords::describe_calibration(v1::SplitGpus& split, const std::optional<PairCalibration>& cal) {
  if (!cal) return;
  split.set_calibration_job_id(cal->job_id);
  split.set_calibration_ratio(cal->ratio);
  split.set_calibration_ci_low(cal->ci_low);
  split.set_calibration_ci_high(cal->ci_high);
  split.set_calibration_comparison(cal->comparison);
  // Oriented to this report's pair: the calibration's first GPU may be this job's second.
  const bool same_order = cal->first.uuid() == split.first().uuid();
  split.set_calibration_gpu_ratio(same_order ? cal->gpu_ratio : 1.0 / cal->gpu_ratio);
}

std::optional<v1::SplitGpus> JobGpuRecords::split(const db::Job& job, const v1::JobSpec& spec,
                                                  const std::vector<GpuRun>& runs) const {
  if (!spec.split_gpus()) return std::nullopt;
  const auto pairs = split_pairs(runs);
  if (!pairs) return std::nullopt;
  v1::SplitGpus out;
  *out.mutable_first() = pairs->first;
  *out.mutable_second() = pairs->second;
  const stats::GpuEffect gpu = stats::split_gpu_effect(pairs->pairs);
  out.set_blocks(int32_t(gpu.blocks));
  out.set_gpu_ratio(gpu.ratio);
  out.set_gpu_ci_low(gpu.lower);
  out.set_gpu_ci_high(gpu.upper);
  out.set_is_calibration(is_calibration(job, spec));
  if (!out.is_calibration())
    describe_calibration(out, calibration(pairs->first, pairs->second, job.started_ms.value_or(job.created_ms), job.id));
  return out;
}

}  // namespace qgate::jobs
