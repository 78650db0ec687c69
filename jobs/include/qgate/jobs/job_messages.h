// Every mapping between the store's rows (qgate::db) and the API's messages (qgate.v1): jobs and
// their spec columns, verdicts, progress, builds and the enumerations. No store lookups here.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include "qgate/db/records.h"
#include "qgate/stats/ab_statistics.h"
#include "qgate/v1/harness.pb.h"
#include "qgate/v1/spec_words.h"
#include "qgate/v1/state_words.h"
#include "qgate/v1/verdict_words.h"

namespace qgate::jobs {

// --- The spec ---

/// The spec as stored in jobs.spec_json (protobuf JSON, proto field names, enums by name).
std::string spec_to_json(const v1::JobSpec& spec);
/// A stored spec that does not parse: the job's id and why. Never read as an empty spec.
class JobSpecUnreadable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
/// The job's stored spec; unknown fields are ignored. Throws JobSpecUnreadable, naming the job,
/// when the stored JSON does not parse.
v1::JobSpec spec_of(const db::Job& job);
/// A new job's row from its spec: kind, profile, spec_json, the spec columns (tokens, order,
/// timing, parity shapes, path, numerics, quiet-window fields, remeasure_of, timeout_s), and
/// quiet_only/deadline_ms from the quiet-window fields. Build ids, backend and device are the
/// caller's.
db::Job job_row(const v1::JobSpec& spec);

// --- The gate's policy ---

/// The statistics' policy of a job's GatePolicy: defaults for unset fields, min_pairs clamped to
/// [2, max_pairs]. The A/B phase runs by it and the dashboard's looks are read from it.
stats::GatePolicy gate_policy(const v1::GatePolicy& policy);

// --- Verdicts and progress ---

/// The report as the verdict rows store it (the whole report: arms, per-type ratios, leaks).
db::Verdict verdict_row(db::RowId job_id, const v1::VerdictReport& report);
v1::VerdictReport to_proto(const db::Verdict& verdict);
/// jobs.progress_json: the live progress only.
std::string progress_json(const v1::JobProgress& progress);
/// A stored progress_json; empty progress when it does not parse.
v1::JobProgress progress_from_json(const std::string& json);

// --- Jobs and builds ---

/// The job with its builds, progress, disposition and (when finished) verdict report.
v1::Job to_proto(const db::JobListing& listing);
v1::Build to_proto(const db::Build& build);

// --- Enumerations ---

// Verdict and Comparison, a job's settings, and job states and dispositions cross at the API's one
// seam (qgate/v1/verdict_words.h, qgate/v1/spec_words.h, qgate/v1/state_words.h).
using words::from_proto;
using words::to_proto;

}  // namespace qgate::jobs
