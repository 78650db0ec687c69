// The rows the store keeps, as plain structs: builds, jobs, runs and their samples, parity cases,
// verdicts and co-tenant load. No protobuf here; the daemon converts from its messages.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "qgate/common/job_settings.h"
#include "qgate/common/job_states.h"
#include "qgate/common/verdicts.h"

namespace qgate::db {

using RowId = std::int64_t;

// --- Enumerations stored as text (the domain's, validated when read back) ---

// The stored enums are the domain's (qgate/common/: job_states.h, verdicts.h, job_settings.h), each
// with its one word list. A stored word that names none is StoreError(InvalidValue).
using qgate::Disposition;
using qgate::JobState;
using qgate::RunOrder;
using qgate::RunState;
using qgate::ShapeSet;
using qgate::TimingMode;
JobState stored_job_state(std::string_view text);
RunState stored_run_state(std::string_view text);
Disposition stored_disposition(std::string_view text);
qgate::Verdict stored_verdict(std::string_view text);
Comparison stored_comparison(std::string_view text);
RunOrder stored_run_order(std::string_view text);
TimingMode stored_timing_mode(std::string_view text);
ShapeSet stored_shape_set(std::string_view text);

/// One column's value as a store engine holds it: NULL, integer, real or text.
using StoredValue = std::variant<std::monostate, std::int64_t, double, std::string>;

// --- Rows ---

/// What places a run in a series beside its build: the fields that a trend point, a compare series
/// and a change-point series are told apart by, and that they carry to the API and the formats.
/// Declared once (series_dimensions() in db/src/record_declarations.h): a run's columns, the trend
/// projections, the rollups' key (build_rollups) and the API's messages, whose fields of the same name
/// are filled from it, all follow that declaration (docs/architecture.md, "One declaration per fact").
struct SeriesFields {
  std::string profile;
  std::optional<std::string> weight_type;  // none: every type of a whole run
  std::string path;                        // "mmq" | "f16" | a command arm | an imported path
  std::int64_t tokens = 0;
  std::string backend;
  std::string gpu_name;
  // What the run was measured with beyond the fields above, "name=value; ..." in a fixed order: an
  // imported llama-bench result's own series settings (n_batch, flash_attn, ...; migration 0011).
  // '' for qgate's runs. Part of the series key when not empty.
  std::string settings;
  // The host whose GPU measured the run (its hostname); '' for imported results. Runs of one GPU
  // model on two hosts are two series (migration 0012).
  std::string host;

  auto operator<=>(const SeriesFields&) const = default;
};

/// A series field by its declared name, for code that carries the fields without naming each (the
/// API's messages, whose fields of the same names they fill and read).
struct SeriesFieldValue {
  std::string_view name;
  StoredValue value;  // NULL for an optional field that is none
};
/// Every series field of `fields`, in the declared order.
std::vector<SeriesFieldValue> series_field_values(const SeriesFields& fields);
/// Sets the series field `name`; text '' sets an optional field to none (a message has no NULL).
/// Throws StoreError(InvalidValue) for a name that is no series field or a value of the wrong kind.
void set_series_field(SeriesFields& fields, std::string_view name, const StoredValue& value);

struct Build {
  RowId id = 0;                 // assigned by the store
  std::string sha256;           // of the .so; unique
  std::string name;             // shared by successive builds of one kernel
  std::string commit_sha;
  std::string branch;
  std::string flags;
  std::int64_t size_bytes = 0;
  std::string artifact_path;
  std::int64_t abi_version = 0;
  std::string build_name;       // what qgate_build_info() reports
  std::string build_version;
  bool external = false;        // imported (llama-bench, test-backend-ops), not run by qgate
  std::int64_t created_ms = 0;  // 0 = now
};

struct BuildInsert {
  RowId id = 0;
  bool inserted = false;  // false: a build with this sha256 was already stored; id is that one
};

struct Job {
  RowId id = 0;
  std::string kind = "gate";    // 'gate' | 'ab' | 'parity' | ... (open-ended)
  JobState state = JobState::Queued;
  RowId build_id = 0;
  std::optional<RowId> baseline_build_id;
  std::string profile;
  std::string spec_json = "{}";  // the full job spec as submitted
  std::string backend;
  int device = 0;
  bool quiet_only = false;
  std::optional<std::int64_t> deadline_ms;
  int attempts = 0;
  std::optional<std::string> error;
  std::int64_t created_ms = 0;   // 0 = now
  std::optional<std::int64_t> started_ms;
  std::optional<std::int64_t> finished_ms;
  std::string progress_json = "{}";  // live progress only
  // How the build behaved; set when the job ends (finish_job_with_verdict, end_job).
  Disposition disposition = Disposition::Unspecified;
  std::string disposition_detail;
  // Facts of the spec that code outside the job runner reads, so nobody parses spec_json for them.
  std::int64_t tokens = 0;        // 0 = the daemon's default
  RunOrder order = RunOrder::Abba;
  TimingMode timing = TimingMode::Gemm;
  ShapeSet parity_shapes = ShapeSet::Unspecified;
  std::string path = "mmq";       // "mmq" | "f16"
  std::string numerics;           // "" = what the build declares, else a profile's word (record_words.h)
  bool wait_for_quiet = false;    // as submitted; quiet_only is the live flag the scheduler clears
  bool run_contended_on_expiry = false;  // at the quiet deadline (deadline_ms): run, not expire
  std::optional<RowId> remeasure_of;     // the job this one measures again
  std::int64_t timeout_s = 0;     // 0 = the daemon's default
  // What the job asks of the GPU that runs it (docs/fleet.md): a model, matched against the words of
  // a GPU's name (normalized by normalize_gpu_model), a GPU uuid, labels the claiming daemon must all
  // carry, and how many GPUs it holds at once (two for a split A/B). '' and none: any.
  std::string gpu_model;
  std::string gpu_uuid;
  std::vector<std::string> labels;  // sorted, unique (job_labels)
  int gpus_needed = 1;
  std::string host;               // the host whose daemon claimed it last; '' until claimed
  bool cancel_requested = false;  // a cancel asked of a daemon that does not run it
};

/// How a job ended: its disposition and the detail for people ("SIGSEGV in gemm_prepare").
struct JobEnding {
  Disposition disposition = Disposition::Unspecified;
  std::string detail;
};

struct JobFilter {
  std::optional<JobState> state;  // none = every state
  int limit = 100;                // list calls only; count_jobs counts every match
  std::optional<bool> quiet_only;       // none = either
  std::optional<RowId> remeasure_of;    // only the re-measures of this job
  std::optional<std::string> host;      // only jobs claimed by this host's daemons
};

struct Run : SeriesFields {
  RowId id = 0;
  std::optional<RowId> job_id;   // none for imported results
  RowId build_id = 0;
  std::optional<std::string> arm;  // "A" | "B"; none outside an A/B
  int pair_index = 0;
  int seq = 0;
  std::int64_t started_ms = 0;   // 0 = now
  std::optional<std::int64_t> finished_ms;
  RunState state = RunState::Running;
  std::string gpu_uuid;
  std::string driver_version;
  std::string cuda_version;
  std::string qgate_version;
  std::string options_json = "{}";
  std::string series_key;        // empty = computed by the store (see make_series_key)
  std::optional<double> tokens_per_s;
  std::optional<double> gemm_ms;
  std::optional<bool> contended;  // none = co-tenant load unknown
  // Set on a part: the whole run this row is one weight type of (weight_type, gemm_ms and
  // tokens_per_s are then the type's GEMMs alone; migration 0010). None on a whole run.
  std::optional<RowId> part_of;
};

/// One weight type of a run: its GEMMs' time in one pass and the tokens per second they alone give.
struct RunPart {
  std::string weight_type;
  double gemm_ms = 0.0;
  double tokens_per_s = 0.0;
};

/// One generic measurement of a run: ("gemm_us", "us", 812.5), ("tokens_per_s", "tok/s", 412.0).
struct Sample {
  std::string metric;
  std::string unit;
  double value = 0.0;
};

/// What finish_run writes onto a run that add_run started.
struct RunResult {
  RunState state = RunState::Done;
  std::int64_t finished_ms = 0;  // 0 = now
  std::optional<std::int64_t> tokens;
  std::optional<double> tokens_per_s;
  std::optional<double> gemm_ms;
  std::optional<bool> contended;
  std::vector<RunPart> parts;  // stored as rows of their own, each part_of the run
};

struct ParityCaseRecord {
  RowId id = 0;
  RowId job_id = 0;
  RowId build_id = 0;
  std::string path;
  std::string weight_type;
  std::int64_t nt = 0;
  std::int64_t od = 0;
  std::int64_t k = 0;
  std::uint64_t seed = 0;
  std::string outcome;           // passed | incorrect | error | not_supported | invalid_problem
  std::string reference;         // "mmq-qgate" | "mmq-ggml" | "f16"
  std::optional<double> tolerance;  // the loosest element's bound
  std::optional<double> max_abs_diff;
  std::optional<double> nmse;
  std::int64_t nan_count = 0;
  std::int64_t inf_count = 0;
  std::int64_t unwritten_count = 0;
  std::string message;
  std::string numerics = "qgate";   // the profile the MMQ path was judged in
  std::string activation = "random";  // random | zero | outlier | tiny | ties | large
  std::optional<double> atol;
  std::optional<double> rtol;
  std::optional<double> worst_tolerance_fraction;
  std::optional<double> max_rel_diff;
  std::optional<double> exact_nmse;
  std::optional<double> exact_nmse_limit;  // 0: reported, not gated
  std::string weights_source = "seeded";
  std::int64_t created_ms = 0;   // 0 = now
};

/// One weight type's share of an A/B (v1::TypeRatio).
struct TypeRatioRow {
  std::string weight_type;
  std::optional<double> ratio;
  std::optional<double> ci_low;
  std::optional<double> ci_high;
  Comparison comparison = Comparison::Unknown;
  std::optional<double> gemm_us_a;
  std::optional<double> gemm_us_b;
};

/// Memory a build kept (v1::MemoryLeak).
struct MemoryLeakRow {
  std::string where;             // "arm A across runs", "arm B at release", "parity sweep"
  std::int64_t device_bytes = 0;
  std::int64_t host_bytes = 0;
  std::string detail;
  bool kept_once = false;        // kept once by a library, level across a second cycle: not a leak
};

/// The output-identity check of a verdict (VerdictReport.identity), when the runs had outputs.
struct OutputIdentityRow {
  bool identical = false;
  std::int64_t compared_runs = 0;
  std::int64_t length = 0;
  std::int64_t first_difference = -1;
  std::string unit;  // "token" or "byte"
  std::string detail;
};

/// A job's verdict: everything in v1::VerdictReport, as rows.
struct Verdict {
  RowId job_id = 0;
  qgate::Verdict verdict = qgate::Verdict::Inconclusive;
  Comparison comparison = Comparison::Unknown;
  std::optional<double> ratio;   // tok/s A / tok/s B
  std::optional<double> ci_low;
  std::optional<double> ci_high;
  int pairs = 0;
  int contended_pairs = 0;
  int mismatched_pairs = 0;
  std::optional<double> tokens_per_s_a;
  std::optional<double> tokens_per_s_b;
  std::vector<std::string> reasons;
  std::optional<double> p_value;
  std::string profile;
  std::int64_t tokens = 0;
  std::string backend;
  int parity_passed = 0;
  int parity_failed = 0;
  // Each arm's build, by id (none for an arm that ran no build), and its label. The store keeps a
  // label only where it says more than the build does ("mmq", "MINFER_MMQ=1"); a build's own label
  // (build_label) is read back from the build.
  std::optional<RowId> arm_a_build_id;
  std::string arm_a_label;
  int arm_a_runs = 0;
  std::optional<RowId> arm_b_build_id;
  std::string arm_b_label;
  int arm_b_runs = 0;
  std::vector<TypeRatioRow> per_type;  // in the report's order
  std::vector<MemoryLeakRow> leaks;    // in the report's order
  std::optional<OutputIdentityRow> identity;
  std::int64_t created_ms = 0;   // 0 = now
};

/// A job with what the API shows beside it: its build, its baseline and its verdict.
struct JobListing {
  Job job;
  Build build;
  std::optional<Build> baseline;
  std::optional<Verdict> verdict;  // none until the job has one
};

/// The sampler's summary of co-tenant load during one run.
struct CotenantSummary {
  RowId run_id = 0;
  bool available = false;        // false: NVML missing; the figures are unknown
  std::optional<std::int64_t> sample_period_ms;
  std::optional<double> max_foreign_sm;
  std::optional<double> mean_foreign_sm;
  std::optional<double> device_util_mean;
  std::string top_processes;     // "sglang@96%"
  std::string throttle_reasons;
  std::optional<std::int64_t> min_sm_clock_mhz;
  std::optional<std::int64_t> median_sm_clock_mhz;
  std::optional<std::int64_t> max_sm_clock_mhz;
  std::optional<std::int64_t> temperature_max_c;
  std::optional<double> power_max_w;
  std::optional<bool> contended;  // none when not available
  std::string policy;
};

struct CotenantSample {
  std::int64_t t_ms = 0;
  std::optional<double> foreign_sm;
  std::optional<double> device_util;
  std::optional<std::int64_t> sm_clock_mhz;
  std::optional<std::int64_t> throttle_reasons;  // NVML clock-event reason bit mask
  std::string foreign_processes;
};

/// A finished run with everything that belongs to it, for record_runs (imports, bulk loads).
struct RunBundle {
  Run run;
  std::vector<Sample> samples;
  std::optional<CotenantSummary> cotenant;  // run_id is filled in by the store
  std::vector<CotenantSample> cotenant_samples;
};

/// An import of external results (llama-bench, test-backend-ops): builds (external = true) and their
/// runs, stored together by Store::import_external.
struct ImportedRun {
  std::size_t build_index = 0;  // into ExternalImport::builds; bundle.run.build_id is ignored
  RunBundle bundle;
};

/// One external build's correctness checks (test-backend-ops' test mode), stored as a finished parity
/// job of that build: one parity case per check and the job's verdict, in the import's transaction.
struct ImportedChecks {
  std::size_t build_index = 0;        // into ExternalImport::builds
  Job job;                            // kind, profile, spec and times; id, build_id and state are the store's
  std::vector<ParityCaseRecord> cases;  // job_id and build_id are set by the store
  Verdict verdict;                    // job_id is set by the store
};

struct ExternalImport {
  std::vector<Build> builds;
  std::vector<ImportedRun> runs;
  std::vector<ImportedChecks> checks;
};

struct ImportOutcome {
  std::vector<RowId> build_ids;    // per ExternalImport::builds, new or already stored (by sha256)
  int builds_added = 0;
  std::vector<RowId> run_ids;      // the runs stored, in order
  int runs_already_stored = 0;     // the same run (build, start, profile, path, tokens, tok/s) was there
  // Per ExternalImport::checks: the parity job made, or none when the same build's checks of the same
  // time and tool were already there.
  std::vector<std::optional<RowId>> check_jobs;
};

// --- Queries ---

struct TrendQuery {
  std::optional<std::string> profile;
  std::optional<std::string> weight_type;
  std::optional<std::string> path;
  std::int64_t since_ms = 0;
  std::optional<std::string> build_name_glob;  // "mmq-*"; GLOB syntax, case-sensitive
  /// Default: only runs known to be quiet (contended = 0); unknown and contended ones are left out.
  bool include_contended = false;
  /// Also keep runs whose co-tenant load is unknown (no sampler: the CPU backend, no NVML).
  bool include_unknown = false;
  std::optional<int> limit;
  /// Only this job's runs (query_trend; query_trend_summaries refuses it).
  std::optional<RowId> job_id;
  /// Only runs measured on this host (its hostname).
  std::optional<std::string> host;
  /// A keyset cursor: only rows after this one in the read's order, so that a reader takes an
  /// answer in pages (limit rows each) and every page costs the same (docs/trends.md, "Pages").
  /// query_trend orders by (started_ms, run id), query_trend_summaries by (first_ms, point id).
  struct Position {
    std::int64_t ms = 0;
    RowId id = 0;
  };
  std::optional<Position> after;
};

struct TrendRow : SeriesFields {
  RowId run_id = 0;
  std::optional<RowId> job_id;  // none for imported results
  RowId build_id = 0;
  std::string build_name;
  std::string build_sha256;
  std::int64_t started_ms = 0;
  double tokens_per_s = 0.0;
  std::optional<bool> contended;
  std::string series_key;
  std::string commit_sha;  // the build's
  std::optional<TimingMode> timing;  // its job's; none for imported results
};

/// A trend point: one build's finished runs of one series (profile, path, weight type, tokens,
/// backend, GPU) in one week (Monday 00:00 UTC on) and of one timing, summarised, whichever jobs
/// measured them (or none: imported results). Kept at write time in build_rollups (migrations 0006,
/// 0007). The figures cover the runs the TrendQuery's co-tenant
/// filter keeps: quiet only, quiet or unknown (include_unknown), or all (include_contended).
struct TrendSummary : SeriesFields {
  RowId id = 0;
  std::optional<RowId> last_job_id;  // the newest job among the runs kept; none for imported results
  std::int64_t jobs = 0;             // how many jobs all its runs (whatever the filter) come from
  RowId build_id = 0;
  std::string build_name;
  std::string build_sha256;
  std::string commit_sha;
  std::string series_key;
  std::int64_t first_ms = 0;  // the first run's start (any run of the point)
  std::int64_t last_ms = 0;
  std::int64_t runs = 0;            // the runs the filter keeps, summarised below
  double median_tokens_per_s = 0.0;
  double low_tokens_per_s = 0.0;    // the interval: the minimum and maximum of the same runs
  double high_tokens_per_s = 0.0;
  std::int64_t total_runs = 0;      // every finished run with a tok/s, whatever the filter
  std::int64_t contended_runs = 0;  // of total_runs, measured while the GPU was contended
  std::int64_t unknown_runs = 0;    // of total_runs, co-tenant load unknown
  std::optional<TimingMode> timing;  // how its jobs timed the runs; none for imported results
};

/// Which of one build's runs `qgate compare` reads: finished runs with a tokens_per_s, optionally
/// narrowed to one profile, token count or weight type. Contended runs are returned too, flagged, so
/// the caller can say how many it left out.
struct CompareRunsQuery {
  RowId build_id = 0;
  std::optional<std::string> profile;
  std::optional<std::int64_t> tokens;
  std::optional<std::string> weight_type;
  std::optional<std::string> host;  // only runs measured on this host
};

/// One finished run of a build with what places it in a series (profile, tokens, backend, GPU, path,
/// weight type) and in its job (arm, pair index), for `qgate compare` (Store::compare_runs) and a
/// job's detail views (Store::job_compare_runs).
struct CompareRun : SeriesFields {
  RowId run_id = 0;
  std::optional<RowId> job_id;  // none for imported results
  RowId build_id = 0;
  std::optional<std::string> arm;
  int pair_index = 0;
  std::string gpu_uuid;
  std::int64_t started_ms = 0;
  double tokens_per_s = 0.0;
  std::optional<bool> contended;  // none = co-tenant load unknown
  /// What the job's tok/s was timed over; none for imported runs (no job).
  std::optional<TimingMode> job_timing;
};

/// The stable fingerprint of a run's series: build name, kernel path, profile, weight type, GPU model
/// and UUID, driver, CUDA and backend, and the run's settings when it has any. Never a clock or any other drifting reading. The build *name*
/// (not its sha256) is in the key so successive builds of one kernel form one series, as change-point
/// detection needs. Returned as 16 hex digits (FNV-1a 64) to keep the index small.
std::string make_series_key(std::string_view build_name, const Run& run);

/// How a report names a build: "<name>@<first 8 hex digits of its sha256>".
std::string build_label(std::string_view name, std::string_view sha256);

}  // namespace qgate::db
