// Store rows to API messages and back. The spec and the live progress travel as protobuf JSON;
// everything else maps field by field.
#include "qgate/jobs/job_messages.h"

#include <algorithm>

#include <google/protobuf/util/json_util.h>

#include "qgate/v1/record_words.h"
#include "qgate/v1/spec_words.h"

namespace qgate::jobs {
namespace {

std::string message_json(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

/// "" when `json` parsed into `message`, else why not.
std::string parse_json(const std::string& json, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  const auto status = google::protobuf::util::JsonStringToMessage(json, message, options);
  return status.ok() ? std::string() : std::string(status.message());
}

/// Proto3 doubles have no presence: 0 is "not measured", stored as NULL.
std::optional<double> measured(double value) {
  if (value == 0) return std::nullopt;
  return value;
}

}  // namespace

stats::GatePolicy gate_policy(const v1::GatePolicy& p) {
  stats::GatePolicy policy;
  if (p.slowdown_threshold() > 0) policy.slowdown_threshold = p.slowdown_threshold();
  if (p.min_pairs() > 0) policy.min_pairs = p.min_pairs();
  if (p.max_pairs() > 0) policy.max_pairs = p.max_pairs();
  if (p.target_halfwidth() > 0) policy.target_halfwidth = p.target_halfwidth();
  policy.min_pairs = std::max(2, std::min(policy.min_pairs, policy.max_pairs));
  policy.max_pairs = std::max(policy.max_pairs, policy.min_pairs);
  return policy;
}

std::string spec_to_json(const v1::JobSpec& spec) { return message_json(spec); }

v1::JobSpec spec_of(const db::Job& job) {
  v1::JobSpec spec;
  if (const std::string why = parse_json(job.spec_json, &spec); !why.empty())
    throw JobSpecUnreadable("job " + std::to_string(job.id) + ": its stored spec does not parse (" + why + ")");
  return spec;
}

db::Job job_row(const v1::JobSpec& spec) {
  db::Job job;
  job.kind = std::string(words::spec_word(spec.kind()));
  job.profile = spec.profile();
  job.spec_json = spec_to_json(spec);
  job.tokens = spec.tokens();
  job.order = from_proto(spec.order());
  job.timing = from_proto(spec.timing());
  job.parity_shapes = from_proto(spec.parity_shapes());
  job.path = spec.path().empty() ? "mmq" : spec.path();
  job.numerics = std::string(words::word(spec.numerics()));  // "" = the build declares it
  job.wait_for_quiet = spec.wait_for_quiet();
  job.quiet_only = spec.wait_for_quiet();
  if (spec.quiet_deadline_unix_ms() > 0) job.deadline_ms = spec.quiet_deadline_unix_ms();
  job.run_contended_on_expiry = spec.run_contended_on_expiry();
  if (spec.remeasure_of() > 0) job.remeasure_of = spec.remeasure_of();
  job.timeout_s = spec.timeout_s();
  job.gpu_model = spec.gpu_model();
  job.gpu_uuid = spec.gpu_uuid();
  job.labels.assign(spec.labels().begin(), spec.labels().end());
  job.gpus_needed = spec.split_gpus() ? 2 : 1;
  return job;
}

db::Verdict verdict_row(db::RowId job_id, const v1::VerdictReport& report) {
  db::Verdict row;
  row.job_id = job_id;
  row.verdict = from_proto(report.verdict());
  row.comparison = from_proto(report.comparison());
  if (report.pairs() > 0) {
    row.ratio = report.ratio();
    row.ci_low = report.ci_low();
    row.ci_high = report.ci_high();
    row.tokens_per_s_a = report.arm_a().tokens_per_s();
    row.tokens_per_s_b = report.arm_b().tokens_per_s();
    row.p_value = report.p_value();
  }
  row.pairs = report.pairs();
  row.contended_pairs = report.contended_pairs();
  row.reasons.assign(report.reasons().begin(), report.reasons().end());
  row.profile = report.profile();
  row.tokens = report.tokens();
  row.backend = report.backend();
  row.parity_passed = report.parity_passed();
  row.parity_failed = report.parity_failed();
  row.arm_a_label = report.arm_a().label();
  if (report.arm_a().build_id() != 0) row.arm_a_build_id = report.arm_a().build_id();
  row.arm_a_runs = report.arm_a().runs();
  row.arm_b_label = report.arm_b().label();
  if (report.arm_b().build_id() != 0) row.arm_b_build_id = report.arm_b().build_id();
  row.arm_b_runs = report.arm_b().runs();
  for (const v1::TypeRatio& type : report.per_type()) {
    row.per_type.push_back({type.weight_type(), measured(type.ratio()), measured(type.ci_low()),
                            measured(type.ci_high()), from_proto(type.comparison()),
                            measured(type.gemm_us_a()), measured(type.gemm_us_b())});
  }
  for (const v1::MemoryLeak& leak : report.leaks()) {
    row.leaks.push_back({leak.where(), leak.device_bytes(), leak.host_bytes(), leak.detail(), leak.kept_once()});
  }
  if (const v1::OutputIdentity& identity = report.identity(); identity.checked()) {
    row.identity = db::OutputIdentityRow{identity.identical(), identity.compared_runs(), identity.length(),
                                         identity.first_difference(), identity.unit(), identity.detail()};
  }
  return row;
}

v1::VerdictReport to_proto(const db::Verdict& row) {
  v1::VerdictReport report;
  report.set_verdict(to_proto(row.verdict));
  report.set_comparison(to_proto(row.comparison));
  report.set_ratio(row.ratio.value_or(0));
  report.set_ci_low(row.ci_low.value_or(0));
  report.set_ci_high(row.ci_high.value_or(0));
  report.set_pairs(row.pairs);
  report.set_contended_pairs(row.contended_pairs);
  report.mutable_arm_a()->set_label(row.arm_a_label);
  report.mutable_arm_a()->set_build_id(row.arm_a_build_id.value_or(0));
  report.mutable_arm_a()->set_tokens_per_s(row.tokens_per_s_a.value_or(0));
  report.mutable_arm_a()->set_runs(row.arm_a_runs);
  report.mutable_arm_b()->set_label(row.arm_b_label);
  report.mutable_arm_b()->set_build_id(row.arm_b_build_id.value_or(0));
  report.mutable_arm_b()->set_tokens_per_s(row.tokens_per_s_b.value_or(0));
  report.mutable_arm_b()->set_runs(row.arm_b_runs);
  for (const std::string& reason : row.reasons) report.add_reasons(reason);
  report.set_parity_passed(row.parity_passed);
  report.set_parity_failed(row.parity_failed);
  report.set_profile(row.profile);
  report.set_tokens(row.tokens);
  report.set_backend(row.backend);
  report.set_p_value(row.p_value.value_or(0));
  for (const db::TypeRatioRow& type : row.per_type) {
    v1::TypeRatio* out = report.add_per_type();
    out->set_weight_type(type.weight_type);
    out->set_ratio(type.ratio.value_or(0));
    out->set_ci_low(type.ci_low.value_or(0));
    out->set_ci_high(type.ci_high.value_or(0));
    out->set_comparison(to_proto(type.comparison));
    out->set_gemm_us_a(type.gemm_us_a.value_or(0));
    out->set_gemm_us_b(type.gemm_us_b.value_or(0));
  }
  for (const db::MemoryLeakRow& leak : row.leaks) {
    v1::MemoryLeak* out = report.add_leaks();
    out->set_where(leak.where);
    out->set_device_bytes(leak.device_bytes);
    out->set_host_bytes(leak.host_bytes);
    out->set_detail(leak.detail);
    out->set_kept_once(leak.kept_once);
  }
  if (const auto& identity = row.identity) {
    v1::OutputIdentity* out = report.mutable_identity();
    out->set_checked(true);
    out->set_identical(identity->identical);
    out->set_compared_runs(identity->compared_runs);
    out->set_length(identity->length);
    out->set_first_difference(identity->first_difference);
    out->set_unit(identity->unit);
    out->set_detail(identity->detail);
  }
  return report;
}

std::string progress_json(const v1::JobProgress& progress) {
  return "{\"progress\":" + message_json(progress) + "}";
}

v1::JobProgress progress_from_json(const std::string& json) {
  // {"progress": {...}}: the message's one field is read with a wrapper of the same shape.
  v1::JobEvent wrapper;
  if (!parse_json(json, &wrapper).empty()) return {};  // progress is only shown: an unreadable one shows none
  return wrapper.progress();
}

v1::Job to_proto(const db::JobListing& listing) {
  const db::Job& job = listing.job;
  v1::Job out;
  out.set_id(job.id);
  std::string unreadable;  // a spec that does not parse is shown as an error, never as an empty spec
  try {
    *out.mutable_spec() = spec_of(job);
  } catch (const JobSpecUnreadable& e) {
    unreadable = e.what();
  }
  out.set_state(job.state == db::JobState::Queued && job.quiet_only ? v1::JOB_STATE_WAITING_QUIET
                                                                      : to_proto(job.state));
  *out.mutable_build() = to_proto(listing.build);
  if (listing.baseline) *out.mutable_baseline() = to_proto(*listing.baseline);
  out.set_created_unix_ms(job.created_ms);
  out.set_started_unix_ms(job.started_ms.value_or(0));
  out.set_finished_unix_ms(job.finished_ms.value_or(0));
  const std::string error = job.error.value_or("");
  out.set_error(unreadable.empty() ? error : error.empty() ? unreadable : error + "; " + unreadable);
  out.set_attempts(job.attempts);
  out.set_host(job.host);
  *out.mutable_progress() = progress_from_json(job.progress_json);
  if (listing.verdict) *out.mutable_verdict() = to_proto(*listing.verdict);
  out.set_disposition(to_proto(job.disposition));
  out.set_disposition_detail(job.disposition_detail);
  out.set_phase(out.progress().phase().empty() ? std::string(qgate::to_string(job.state))
                                                : out.progress().phase());
  return out;
}

v1::Build to_proto(const db::Build& build) {
  v1::Build out;
  out.set_id(build.id);
  out.set_sha256(build.sha256);
  out.mutable_metadata()->set_name(build.name);
  out.mutable_metadata()->set_commit(build.commit_sha);
  out.mutable_metadata()->set_branch(build.branch);
  out.mutable_metadata()->set_flags(build.flags);
  out.set_size_bytes(build.size_bytes);
  out.set_created_unix_ms(build.created_ms);
  if (!build.build_name.empty()) {
    out.mutable_info()->set_name(build.build_name);
    out.mutable_info()->set_version(build.build_version);
    out.mutable_info()->set_abi_version(uint32_t(build.abi_version));
  }
  return out;
}

}  // namespace qgate::jobs
