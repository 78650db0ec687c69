// ImportResults: external results checked, grouped into builds and stored in one transaction.
#include "qgate/jobs/result_import.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "qgate/common/sha256.h"
#include "qgate/jobs/application_error.h"
#include "qgate/jobs/job_messages.h"
#include "qgate/jobs/series_fields_message.h"

namespace qgate::jobs {

std::string external_build_name(const std::string& commit, const std::string& backend, const std::string& gpu_name) {
  std::string name = "llama.cpp@" + (commit.empty() ? std::string("unknown") : commit);
  if (!backend.empty()) name += "/" + backend;
  if (!gpu_name.empty()) name += "/" + gpu_name;
  return name;
}

namespace {

[[noreturn]] void refuse(const v1::ExternalResult& result, const std::string& field, const std::string& why) {
  throw ApplicationError(ApplicationErrorKind::InvalidArgument,
                         fmt::format("line {}, field {}: {}", result.line(), field, why));
}

void check(const v1::ExternalResult& r) {
  if (r.tool().empty()) refuse(r, "tool", "is empty");
  if (r.profile().empty()) refuse(r, "profile", "is empty");
  if (r.tokens() <= 0) refuse(r, "tokens", fmt::format("{} is not a positive count", r.tokens()));
  if (!std::isfinite(r.tokens_per_s()) || r.tokens_per_s() <= 0)
    refuse(r, "tokens_per_s", fmt::format("{} is not a positive speed", r.tokens_per_s()));
  if (!std::isfinite(r.gemm_ms()) || r.gemm_ms() < 0) refuse(r, "gemm_ms", "is negative");
  if (r.started_unix_ms() <= 0) refuse(r, "started_unix_ms", "is not a time");
  for (const auto& s : r.samples()) {
    if (s.metric().empty()) refuse(r, "samples", "a sample has no metric");
    if (!std::isfinite(s.value())) refuse(r, "samples", fmt::format("{} is not finite", s.metric()));
  }
}

/// An external build: llama.cpp at a commit on a backend and GPU, as a tool's results name it.
template <class Message>
db::Build build_of(const Message& r, const std::string& source) {
  db::Build build;
  build.name = external_build_name(r.build_commit(), r.backend(), r.gpu_name());
  // The identity of an external build: llama.cpp at that commit on that backend and GPU.
  const std::string identity = "external\n" + r.build_commit() + "\n" + r.backend() + "\n" + r.gpu_name();
  build.sha256 = common::sha256_hex(identity.data(), identity.size());
  build.commit_sha = r.build_commit();
  build.build_name = "llama.cpp";
  build.build_version = r.build_commit();
  build.flags = r.tool();
  build.artifact_path = source;  // no artifact: where the results came from
  build.external = true;
  return build;
}

[[noreturn]] void refuse(const v1::ExternalCheck& c, const std::string& field, const std::string& why) {
  throw ApplicationError(ApplicationErrorKind::InvalidArgument,
                         fmt::format("line {}, field {}: {}", c.line(), field, why));
}

/// A check's outcome as a parity case's: what test-backend-ops says of a case against the CPU backend.
const std::set<std::string>& check_outcomes() {
  static const std::set<std::string> outcomes = {"passed", "incorrect", "not_supported"};
  return outcomes;
}

void check(const v1::ExternalCheck& c) {
  if (c.tool().empty()) refuse(c, "tool", "is empty");
  if (c.op().empty()) refuse(c, "op", "is empty");
  if (!check_outcomes().count(c.outcome()))
    refuse(c, "outcome", fmt::format("'{}' is not passed, incorrect or not_supported", c.outcome()));
  if (!std::isfinite(c.error()) || c.error() < 0) refuse(c, "error", fmt::format("{} is not an error", c.error()));
  if (!std::isfinite(c.error_bound()) || c.error_bound() < 0)
    refuse(c, "error_bound", fmt::format("{} is not a bound", c.error_bound()));
  for (const auto& [name, value] : {std::pair{"m", c.m()}, std::pair{"n", c.n()}, std::pair{"k", c.k()}})
    if (value < 0) refuse(c, name, fmt::format("{} is negative", value));
  if (c.checked_unix_ms() <= 0) refuse(c, "checked_unix_ms", "is not a time");
}

/// A check as a parity case of the build's import job: the op as the path, MUL_MAT's n, m and k as
/// the shape (tokens, outputs, inner), the tool's printed error and bound.
db::ParityCaseRecord parity_case_of(const v1::ExternalCheck& c) {
  db::ParityCaseRecord parity;
  parity.path = c.op();
  parity.weight_type = c.weight_type();
  parity.nt = c.n();
  parity.od = c.m();
  parity.k = c.k();
  parity.outcome = c.outcome();
  parity.reference = c.backend().empty() ? "cpu" : "cpu vs " + c.backend();  // the tool checks against its CPU backend
  parity.numerics = c.tool();  // judged by the tool's own bound, not a qgate profile
  parity.activation = "tool";
  parity.weights_source = "tool";
  if (c.error() > 0 || c.error_bound() > 0) parity.nmse = c.error();
  if (c.error_bound() > 0) parity.tolerance = c.error_bound();
  parity.message = c.message().empty() ? c.params() : c.params() + ": " + c.message();
  parity.created_ms = c.checked_unix_ms();
  return parity;
}

/// One build's checks as a finished parity job with its verdict: PASS when no case was incorrect.
db::ImportedChecks imported_checks(std::size_t build_index, const std::vector<const v1::ExternalCheck*>& checks,
                                   const std::string& source) {
  db::ImportedChecks out;
  out.build_index = build_index;
  const v1::ExternalCheck& first = *checks.front();
  v1::JobSpec spec;
  spec.set_kind(v1::JOB_KIND_PARITY);
  spec.set_profile(first.tool());
  out.job = job_row(spec);
  out.job.backend = first.backend();
  std::int64_t checked = first.checked_unix_ms();
  int passed = 0, failed = 0;
  for (const v1::ExternalCheck* c : checks) {
    out.cases.push_back(parity_case_of(*c));
    checked = std::min(checked, c->checked_unix_ms());
    if (c->outcome() == "passed") ++passed;
    if (c->outcome() == "incorrect") ++failed;
  }
  out.job.created_ms = checked;
  out.job.disposition = failed > 0 ? db::Disposition::Incorrect : db::Disposition::Ok;
  out.job.disposition_detail = fmt::format("imported from {}", source);
  out.verdict.verdict = failed > 0 ? qgate::Verdict::Fail : qgate::Verdict::Pass;
  out.verdict.comparison = Comparison::Unknown;
  out.verdict.profile = first.tool();
  out.verdict.backend = first.backend();
  out.verdict.parity_passed = passed;
  out.verdict.parity_failed = failed;
  out.verdict.created_ms = checked;
  out.verdict.reasons.push_back(fmt::format("{} of {} cases checked by {} against its CPU backend were incorrect",
                                            failed, checks.size(), first.tool()));
  return out;
}

db::ImportedRun run_of(const v1::ExternalResult& r, std::size_t build_index) {
  db::ImportedRun imported;
  imported.build_index = build_index;
  db::Run& run = imported.bundle.run;
  static_cast<db::SeriesFields&>(run) = read_series_fields(r);  // profile, path, weight type, tokens, ...
  run.started_ms = r.started_unix_ms();
  run.finished_ms = r.started_unix_ms();
  run.state = db::RunState::Done;
  run.qgate_version = r.tool();
  run.options_json = r.options_json().empty() ? "{}" : r.options_json();
  run.tokens_per_s = r.tokens_per_s();
  if (r.gemm_ms() > 0) run.gemm_ms = r.gemm_ms();
  // contended stays unknown: the tool did not sample co-tenant load.
  for (const auto& s : r.samples()) imported.bundle.samples.push_back({s.metric(), s.unit(), s.value()});
  return imported;
}

}  // namespace

v1::ImportResultsResponse ResultImporter::import(const v1::ImportResultsRequest& request) {
  if (request.results().empty() && request.checks().empty())
    throw ApplicationError(ApplicationErrorKind::InvalidArgument, "no results to import");
  db::ExternalImport batch;
  std::map<std::string, std::size_t> build_index;  // by sha256
  auto index_of = [&](db::Build build) {
    auto [it, added] = build_index.try_emplace(build.sha256, batch.builds.size());
    if (added) batch.builds.push_back(std::move(build));
    return it->second;
  };
  std::set<std::string> profiles;
  for (const auto& result : request.results()) {
    check(result);
    batch.runs.push_back(run_of(result, index_of(build_of(result, request.source()))));
    profiles.insert(result.profile());
  }
  // Checks: one parity job per build and tool, every check validated before anything is stored.
  std::map<std::pair<std::size_t, std::string>, std::vector<const v1::ExternalCheck*>> checks_by_build;
  for (const auto& c : request.checks()) {
    check(c);
    checks_by_build[{index_of(build_of(c, request.source())), c.tool()}].push_back(&c);
  }
  for (const auto& [key, checks] : checks_by_build)
    batch.checks.push_back(imported_checks(key.first, checks, request.source()));
  const db::ImportOutcome outcome = store_.import_external(batch);
  v1::ImportResultsResponse response;
  for (db::RowId id : outcome.build_ids)
    if (auto build = store_.find_build(id)) *response.add_builds() = to_proto(*build);
  response.set_builds_added(outcome.builds_added);
  response.set_runs_added(static_cast<int>(outcome.run_ids.size()));
  response.set_runs_already_stored(outcome.runs_already_stored);
  for (const auto& p : profiles) response.add_profiles(p);
  for (std::size_t i = 0; i < outcome.check_jobs.size(); ++i) {
    if (!outcome.check_jobs[i]) {
      response.set_check_jobs_already_stored(response.check_jobs_already_stored() + 1);
      continue;
    }
    response.add_check_job_ids(*outcome.check_jobs[i]);
    response.set_checks_added(response.checks_added() + static_cast<int>(batch.checks[i].cases.size()));
    response.set_checks_failed(response.checks_failed() + batch.checks[i].verdict.parity_failed);
  }
  return response;
}

}  // namespace qgate::jobs
