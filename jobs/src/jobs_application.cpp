// The application layer's read, cancel, re-measure and compare use cases (submit is in
// job_submission.cpp).
#include "qgate/jobs/jobs_application.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>

#include "qgate/common/gpu_routing.h"
#include "qgate/jobs/compare_builds.h"
#include "qgate/jobs/gpu_choice.h"
#include "qgate/jobs/job_gpu_records.h"
#include "qgate/jobs/job_profile.h"
#include "qgate/jobs/job_messages.h"

namespace qgate::jobs {

void require_profile_fits(const v1::JobSpec& job, const std::string& backend, uint64_t memory_bytes,
                          const std::string& memory_name) {
  if (job.kind() != v1::JOB_KIND_AB && job.kind() != v1::JOB_KIND_GATE) return;
  const auto profile = job_profile(job, backend);
  if (!profile || memory_bytes == 0) return;
  const uint64_t workers = job.split_gpus() ? 1 : 2;
  const uint64_t each = profile->prepared_bytes(job_tokens(job, *profile));
  if (each * workers <= memory_bytes) return;
  auto gib = [](uint64_t bytes) { return fmt::format("{:.1f} GiB", double(bytes) / double(1ull << 30)); };
  throw ApplicationError(ApplicationErrorKind::ResourceExhausted,
                         "profile '" + profile->name + "' needs about " + gib(each * workers) + " (" +
                             std::to_string(workers) + " worker(s), each up to " + gib(each) +
                             ": weights as f16, activations, output), more than " + memory_name + " " +
                             gib(memory_bytes));
}

void require_quiet_windows(const cotenant::DeviceNow& device, const std::string& purpose) {
  if (!device.available)
    throw ApplicationError(ApplicationErrorKind::FailedPrecondition,
                           "this daemon cannot see co-tenant load (" + device.unavailable_reason +
                               "), so it can never find a quiet window " + purpose);
}
namespace {

[[noreturn]] void refuse(const std::string& message) {
  throw ApplicationError(ApplicationErrorKind::InvalidArgument, message);
}

[[noreturn]] void no_job(db::RowId id) {
  throw ApplicationError(ApplicationErrorKind::NotFound, "no job " + std::to_string(id));
}

std::int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::optional<db::Build> resolve_build(db::Store& store, const std::string& name_or_id) {
  if (name_or_id.empty()) return std::nullopt;
  const bool all_digits = std::all_of(name_or_id.begin(), name_or_id.end(),
                                      [](unsigned char c) { return std::isdigit(c) != 0; });
  if (all_digits && name_or_id.size() < 18)
    if (auto build = store.find_build(std::stoll(name_or_id))) return build;
  if (name_or_id.size() == 64)
    if (auto build = store.find_build_by_sha256(name_or_id)) return build;
  return store.find_latest_build_by_name(name_or_id);
}

// --- JobQueries ---

v1::Job JobQueries::job(db::RowId id) const {
  auto listing = store_.find_job_listing(id);
  if (!listing) no_job(id);
  v1::Job job = to_proto(*listing);
  // The GPUs it ran on and, for a split job, the GPU as a factor: read back from its runs.
  if (auto row = store_.find_job(id); row && row->state != db::JobState::Queued) {
    const JobGpuRecords records(store_);
    const auto runs = records.runs(*row);
    for (const v1::GpuRef& gpu : JobGpuRecords::gpus(runs)) *job.add_gpus() = gpu;
    if (job.has_verdict()) {
      *job.mutable_verdict()->mutable_gpus() = job.gpus();
      if (auto split = records.split(*row, job.spec(), runs)) *job.mutable_verdict()->mutable_split() = *split;
    }
  }
  return job;
}

std::vector<v1::Job> JobQueries::list(v1::JobState state, int limit, const std::string& host) const {
  if (!v1::JobState_IsValid(state)) refuse("unknown job state " + std::to_string(state));
  if (limit < 0 || limit > 10000) refuse("limit must be in [0, 10000]");
  db::JobFilter filter;
  filter.state = from_proto(state);
  if (state == v1::JOB_STATE_WAITING_QUIET) filter.quiet_only = true;
  filter.limit = limit != 0 ? limit : 50;
  if (!host.empty()) filter.host = host;
  std::vector<v1::Job> jobs;
  for (const db::JobListing& listing : store_.list_job_listings(filter)) jobs.push_back(to_proto(listing));
  return jobs;
}

QueueCounts JobQueries::queue_counts() const {
  db::JobFilter filter;
  filter.state = db::JobState::Queued;
  QueueCounts counts;
  counts.queued = store_.count_jobs(filter);
  filter.quiet_only = true;
  counts.waiting_quiet = store_.count_jobs(filter);
  return counts;
}

std::map<db::JobState, std::int64_t> JobQueries::counts_by_state() const {
  std::map<db::JobState, std::int64_t> counts;
  for (const db::JobState state : {db::JobState::Queued, db::JobState::Running, db::JobState::Done,
                                   db::JobState::Failed, db::JobState::Cancelled, db::JobState::Expired}) {
    db::JobFilter filter;
    filter.state = state;
    counts[state] = store_.count_jobs(filter);
  }
  return counts;
}

// --- JobCancellation ---

v1::Job JobCancellation::cancel(db::RowId id) {
  const auto job = store_.find_job(id);
  if (!job) no_job(id);
  if (job->state == db::JobState::Queued) {
    const std::string why = "cancelled before it started";
    if (store_.end_job(id, db::JobState::Cancelled, why, db::JobEnding{}, db::JobState::Queued)) {
      v1::JobEvent event;
      event.set_job_id(id);
      event.set_unix_ms(now_unix_ms());
      event.set_state(v1::JOB_STATE_CANCELLED);
      event.set_message(why);
      daemon_.publish(event);
    }
  } else if (job->state == db::JobState::Running) {
    // Running here: stopped now. Running on another daemon of the fleet: asked through the job's
    // row, and that daemon stops it at its next lease renewal (docs/fleet.md).
    if (!daemon_.cancel_running(id)) store_.request_cancel(id);
  } else {
    throw ApplicationError(ApplicationErrorKind::FailedPrecondition,
                           "job " + std::to_string(id) + " has already ended (" +
                               std::string(qgate::to_string(job->state)) + ")");
  }
  auto listing = store_.find_job_listing(id);
  if (!listing) no_job(id);
  return to_proto(*listing);
}

// --- Remeasurement ---

v1::RemeasureResponse Remeasurement::remeasure(const v1::RemeasureRequest& request,
                                               const cotenant::DeviceNow& device) {
  if (request.job_id() < 0) refuse("job_id must be positive, got " + std::to_string(request.job_id()));
  if (request.job_id() > 0 && request.contended()) refuse("give a job id or contended, not both");
  if (request.job_id() == 0 && !request.contended())
    refuse("give a job id to re-measure, or contended to re-measure every contended job");
  if (request.since_unix_ms() < 0) refuse("since_unix_ms must not be negative");
  constexpr std::int64_t kMaxDeadlineS = 30LL * 24 * 3600;
  if (request.deadline_s() < 0 || request.deadline_s() > kMaxDeadlineS)
    refuse("deadline_s must be in [0, " + std::to_string(kMaxDeadlineS) + "], got " +
           std::to_string(request.deadline_s()));
  require_quiet_windows(device, "to re-measure in");

  std::vector<db::Job> targets;
  if (request.job_id() > 0) {
    auto job = store_.find_job(request.job_id());
    if (!job) no_job(request.job_id());
    if (!qgate::is_terminal(job->state))
      throw ApplicationError(ApplicationErrorKind::FailedPrecondition,
                             "job " + std::to_string(job->id) + " has not ended (" +
                                 std::string(qgate::to_string(job->state)) + "); re-measure it once it has");
    targets.push_back(*job);
  } else {
    for (db::RowId id : store_.jobs_with_contended_runs(request.since_unix_ms()))
      if (auto job = store_.find_job(id)) targets.push_back(*job);
  }

  // Each re-run's GPU choice (its own, or the request's) must still be one this daemon can honour.
  for (const db::Job& original : targets) {
    v1::JobSpec spec = spec_of(original);
    if (!request.gpus().empty()) *spec.mutable_gpus() = request.gpus();
    try {
      check_gpu_choice(spec, options_);
    } catch (const ApplicationError& e) {
      refuse("job " + std::to_string(original.id) + " cannot be re-measured here: " + e.what());
    }
  }
  const std::int64_t deadline_s = request.deadline_s() > 0 ? request.deadline_s() : 12 * 3600;
  const std::int64_t deadline_ms = now_unix_ms() + deadline_s * 1000;
  v1::RemeasureResponse response;
  std::lock_guard lock(mutex_);
  for (const db::Job& original : targets) {
    // A re-measure of a re-measure measures the original again.
    const db::RowId measured = original.remeasure_of.value_or(original.id);
    if (has_pending_remeasure(measured)) {
      response.add_skipped_job_ids(original.id);
      continue;
    }
    const db::RowId created = queue_remeasure(original, request, deadline_ms);
    if (auto listing = store_.find_job_listing(created)) *response.add_jobs() = to_proto(*listing);
  }
  daemon_.job_queued();
  return response;
}

bool Remeasurement::has_pending_remeasure(db::RowId job_id) {
  // One pending re-measure per job: read from the remeasure_of column, not from every spec.
  db::JobFilter filter;
  filter.remeasure_of = job_id;
  for (db::JobState open : {db::JobState::Queued, db::JobState::Running}) {
    filter.state = open;
    if (store_.count_jobs(filter) > 0) return true;
  }
  return false;
}

db::RowId Remeasurement::queue_remeasure(const db::Job& original, const v1::RemeasureRequest& request,
                                         std::int64_t deadline_ms) {
  // The stored spec is what the job runner reads, so the re-run's spec is the original's with the
  // quiet-window fields set.
  v1::JobSpec spec = spec_of(original);
  spec.set_remeasure_of(original.remeasure_of.value_or(original.id));
  spec.set_wait_for_quiet(true);
  spec.set_quiet_deadline_unix_ms(deadline_ms);
  spec.set_run_contended_on_expiry(request.run_contended_on_expiry());
  if (!request.gpus().empty()) *spec.mutable_gpus() = request.gpus();
  // On the same GPU model as the runs it measures again, whichever daemon of a fleet takes it.
  if (spec.gpu_model().empty() && spec.gpu_uuid().empty()) {
    for (const db::CompareRun& run : store_.job_compare_runs(original.id)) {
      if (!normalize_gpu_model(run.gpu_name).empty()) {
        spec.set_gpu_model(normalize_gpu_model(run.gpu_name));
        break;
      }
    }
  }
  db::Job job = job_row(spec);
  job.kind = original.kind;
  job.build_id = original.build_id;
  job.baseline_build_id = original.baseline_build_id;
  job.profile = original.profile;
  job.backend = options_.backend;
  job.device = queued_device(spec);
  return store_.create_job(job);
}

// --- BuildComparer ---

v1::CompareResponse BuildComparer::compare(const v1::CompareRequest& request) const {
  auto a = resolve_build(store_, request.build_a());
  auto b = resolve_build(store_, request.build_b());
  if (!a)
    throw ApplicationError(ApplicationErrorKind::NotFound, "no build named or numbered '" + request.build_a() + "'");
  if (!b)
    throw ApplicationError(ApplicationErrorKind::NotFound, "no build named or numbered '" + request.build_b() + "'");
  if (request.tokens() < 0) refuse("tokens must not be negative");
  if (request.same_margin() < 0) refuse("same_margin must not be negative");
  CompareOptions options;
  options.include_contended = request.include_contended();
  if (!request.profile().empty()) options.profile = request.profile();
  if (request.tokens() > 0) options.tokens = request.tokens();
  if (!request.weight_type().empty()) options.weight_type = request.weight_type();
  if (!request.host().empty()) options.host = request.host();
  if (request.same_margin() > 0) options.same_margin = request.same_margin();
  try {
    return to_proto(CompareBuilds(store_).compare(*a, *b, options));
  } catch (const NothingComparable& e) {
    throw ApplicationError(ApplicationErrorKind::FailedPrecondition, e.what());
  } catch (const std::invalid_argument& e) {
    refuse(e.what());
  }
}

}  // namespace qgate::jobs
