// ImportResults: external results checked, grouped into builds and stored in one transaction.
#include "qgate/jobs/result_import.h"

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

db::Build build_of(const v1::ExternalResult& r, const std::string& source) {
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
  if (request.results().empty())
    throw ApplicationError(ApplicationErrorKind::InvalidArgument, "no results to import");
  db::ExternalImport batch;
  std::map<std::string, std::size_t> build_index;  // by sha256
  std::set<std::string> profiles;
  for (const auto& result : request.results()) {
    check(result);
    db::Build build = build_of(result, request.source());
    auto [it, added] = build_index.try_emplace(build.sha256, batch.builds.size());
    if (added) batch.builds.push_back(std::move(build));
    batch.runs.push_back(run_of(result, it->second));
    profiles.insert(result.profile());
  }
  const db::ImportOutcome outcome = store_.import_external(batch);
  v1::ImportResultsResponse response;
  for (db::RowId id : outcome.build_ids)
    if (auto build = store_.find_build(id)) *response.add_builds() = to_proto(*build);
  response.set_builds_added(outcome.builds_added);
  response.set_runs_added(static_cast<int>(outcome.run_ids.size()));
  response.set_runs_already_stored(outcome.runs_already_stored);
  for (const auto& p : profiles) response.add_profiles(p);
  return response;
}

}  // namespace qgate::jobs
