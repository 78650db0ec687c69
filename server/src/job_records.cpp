// Store rows to API messages and back; the job spec and the final report travel as protobuf JSON.
#include "qgate/server/job_records.h"

#include <google/protobuf/util/json_util.h>

#include <nlohmann/json.hpp>

namespace qgate::server {
namespace {

std::string message_json(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, options);
  return out;
}

template <typename M>
bool parse_json(const std::string& json, M* m) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  return google::protobuf::util::JsonStringToMessage(json, m, options).ok();
}

}  // namespace

std::string spec_to_json(const v1::JobSpec& spec) { return message_json(spec); }

v1::JobSpec spec_from_json(const std::string& json) {
  v1::JobSpec spec;
  parse_json(json, &spec);
  return spec;
}

std::string report_to_json(const v1::VerdictReport& report) { return message_json(report); }

std::optional<v1::VerdictReport> report_from_json(const std::string& json) {
  v1::VerdictReport r;
  if (!parse_json(json, &r)) return std::nullopt;
  return r;
}

std::string progress_json(const v1::JobProgress& progress, const v1::VerdictReport* report,
                          v1::Disposition disposition, const std::string& detail) {
  nlohmann::json j;
  j["progress"] = nlohmann::json::parse(message_json(progress));
  if (report) j["report"] = nlohmann::json::parse(message_json(*report));
  return disposition == v1::DISPOSITION_UNSPECIFIED ? j.dump() : with_disposition(j.dump(), disposition, detail);
}

std::string with_disposition(const std::string& progress_json, v1::Disposition disposition, const std::string& detail) {
  nlohmann::json j = nlohmann::json::parse(progress_json, nullptr, false);
  if (!j.is_object()) j = nlohmann::json::object();
  j["disposition"] = v1::Disposition_Name(disposition);
  j["disposition_detail"] = detail;
  return j.dump();
}

v1::JobState to_proto(db::JobState state) {
  switch (state) {
    case db::JobState::Queued: return v1::JOB_STATE_QUEUED;
    case db::JobState::Running: return v1::JOB_STATE_RUNNING;
    case db::JobState::Done: return v1::JOB_STATE_DONE;
    case db::JobState::Failed: return v1::JOB_STATE_FAILED;
    case db::JobState::Cancelled: return v1::JOB_STATE_CANCELLED;
    case db::JobState::Expired: return v1::JOB_STATE_EXPIRED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

std::optional<db::JobState> from_proto(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_QUEUED: return db::JobState::Queued;
    case v1::JOB_STATE_RUNNING: return db::JobState::Running;
    case v1::JOB_STATE_DONE: return db::JobState::Done;
    case v1::JOB_STATE_FAILED: return db::JobState::Failed;
    case v1::JOB_STATE_CANCELLED: return db::JobState::Cancelled;
    case v1::JOB_STATE_WAITING_QUIET: return db::JobState::Queued;
    case v1::JOB_STATE_EXPIRED: return db::JobState::Expired;
    default: return std::nullopt;
  }
}

const char* kind_name(v1::JobKind kind) {
  switch (kind) {
    case v1::JOB_KIND_GATE: return "gate";
    case v1::JOB_KIND_AB: return "ab";
    case v1::JOB_KIND_PARITY: return "parity";
    default: return "unknown";
  }
}

v1::Build to_proto(const db::Build& b) {
  v1::Build out;
  out.set_id(b.id);
  out.set_sha256(b.sha256);
  out.mutable_metadata()->set_name(b.name);
  out.mutable_metadata()->set_commit(b.commit_sha);
  out.mutable_metadata()->set_branch(b.branch);
  out.mutable_metadata()->set_flags(b.flags);
  out.set_size_bytes(b.size_bytes);
  out.set_created_unix_ms(b.created_ms);
  if (!b.build_name.empty()) {
    out.mutable_info()->set_name(b.build_name);
    out.mutable_info()->set_version(b.build_version);
    out.mutable_info()->set_abi_version(uint32_t(b.abi_version));
  }
  return out;
}

v1::Job to_proto(db::Store& store, const db::Job& job) {
  v1::Job out;
  out.set_id(job.id);
  *out.mutable_spec() = spec_from_json(job.spec_json);
  out.set_state(job.state == db::JobState::Queued && job.quiet_only ? v1::JOB_STATE_WAITING_QUIET
                                                                      : to_proto(job.state));
  if (auto b = store.find_build(job.build_id)) *out.mutable_build() = to_proto(*b);
  if (job.baseline_build_id)
    if (auto b = store.find_build(*job.baseline_build_id)) *out.mutable_baseline() = to_proto(*b);
  out.set_created_unix_ms(job.created_ms);
  out.set_started_unix_ms(job.started_ms.value_or(0));
  out.set_finished_unix_ms(job.finished_ms.value_or(0));
  out.set_error(job.error.value_or(""));
  out.set_attempts(job.attempts);
  try {
    auto j = nlohmann::json::parse(job.progress_json);
    if (j.contains("progress")) parse_json(j["progress"].dump(), out.mutable_progress());
    if (j.contains("report")) parse_json(j["report"].dump(), out.mutable_verdict());
    v1::Disposition disposition;
    if (j.contains("disposition") && j["disposition"].is_string() &&
        v1::Disposition_Parse(j["disposition"].get<std::string>(), &disposition)) {
      out.set_disposition(disposition);
      out.set_disposition_detail(j.value("disposition_detail", ""));
    }
  } catch (const std::exception&) {
    // A progress blob that does not parse is shown as no progress rather than failing the read.
  }
  out.set_phase(out.progress().phase().empty() ? std::string(db::to_string(job.state)) : out.progress().phase());
  return out;
}

}  // namespace qgate::server
