// Everything the qgate CLI prints, as pure functions of the messages it got and the time "now":
// tables, durations, sizes, sparklines, CSV, the progress line and the verdict report. Kept apart
// from the RPC code so each piece is unit-tested without a server.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qgate/v1/harness.pb.h"

namespace qgate::client {

// ---- generic pieces ----

/// A text table: columns separated by two spaces, each as wide as its widest cell (in code points,
/// so sparklines and other UTF-8 text align), right-aligned where `right_align` says so (numbers).
struct Table {
  std::vector<std::string> headers;
  std::vector<bool> right_align;  // per column; missing entries mean left-aligned
  std::vector<std::vector<std::string>> rows;
};
/// Header line then one line per row, each ending in '\n', no trailing spaces.
std::string format_table(const Table& table);

/// "key   value" lines with the values aligned; for single-object views (device, show).
std::string format_fields(const std::vector<std::pair<std::string, std::string>>& fields);

/// Number of code points of UTF-8 text (what a terminal shows for the characters the CLI prints).
std::size_t display_width(const std::string& text);

/// 42 -> "42s", 312 -> "5m 12s", 7380 -> "2h 3m", 183600 -> "2d 3h"; negative -> "0s".
std::string format_duration(std::int64_t seconds);
/// Age of `then_ms` at `now_ms` ("5m 12s"); "-" when then_ms is 0 (never set).
std::string format_age(std::int64_t now_ms, std::int64_t then_ms);
/// 512 -> "512 B", 1536 -> "1.5 KiB", up to TiB.
std::string format_bytes(std::int64_t bytes);
/// UTC "2026-11-30 02:00:00Z"; UTC because the daemon and its clients may sit in different zones.
/// "-" for 0.
std::string format_timestamp(std::int64_t unix_ms);
/// "1.023"; "-" for 0 (not measured yet).
std::string format_ratio(double ratio);
/// "[0.998, 1.049]"; "-" when both ends are 0.
std::string format_interval(double low, double high);
/// "412.3"; "-" for 0.
std::string format_tokens_per_s(double tokens_per_s);

/// One bar per value (▁▂▃▄▅▆▇█), scaled so `low` is ▁ and `high` is █. A flat series (high <= low)
/// is all ▄: there is no trend to show, and a row of ▁ would read as "at the minimum".
std::string sparkline(const std::vector<double>& values, double low, double high);
/// The same, scaled to the series' own min and max.
std::string sparkline(const std::vector<double>& values);

/// One CSV field (RFC 4180): quoted when it holds a comma, quote, CR or LF, or starts or ends with
/// a space; quotes inside are doubled.
std::string csv_field(const std::string& field);
/// Fields joined with ',' and ended with '\n' (not RFC 4180's CRLF: every CSV reader accepts LF,
/// and the files diff cleanly).
std::string csv_row(const std::vector<std::string>& fields);

/// Median of a copy of `values` (mean of the middle two for an even count); 0 for none.
double median(std::vector<double> values);

// ---- enums ----

std::string state_name(v1::JobState state);       // "queued" ... "cancelled"
std::string verdict_name(v1::Verdict verdict);    // "PASS", "FAIL", "INCONCLUSIVE", "-"
std::string comparison_name(v1::Comparison c);    // "SAME", "DIFFERENT", "UNKNOWN", "-"
std::string disposition_name(v1::Disposition d);  // "OK", "CRASHED", "TIMEOUT", ..., "-"
/// " (CRASHED: SIGSEGV in gemm_prepare)" for a job with a disposition, "" for one without.
std::string disposition_suffix(const v1::Job& job);

// ---- exit codes ----

/// PASS 0, FAIL 1, INCONCLUSIVE 2, no verdict 3.
int exit_code_for(v1::Verdict verdict);
/// A finished job's exit code: DONE -> its verdict's; FAILED, CANCELLED and a job that has not
/// finished -> 3.
int exit_code_for(const v1::Job& job);

// ---- JSON ----

/// The message as JSON with proto field names, every scalar field present (defaults included, so
/// scripts need no fallbacks), 64-bit integers as numbers (not proto3 JSON's strings) and enums as
/// their names.
nlohmann::json to_json(const google::protobuf::Message& message);

// ---- views of qgate's messages ----

/// The live line of a watched job:
/// "job 12 running (ab): parity 64/64, pairs 6/40, ratio 1.023 [0.998, 1.049]".
std::string progress_line(std::int64_t job_id, v1::JobState state, const v1::JobProgress& progress);

/// The say-so that goes wherever tok/s is shown (docs/measurement.md, "Figures"): what a run's tok/s
/// was timed over, its GEMMs each timed alone and summed, or whole passes (TIMING_MODE_PASS).
std::string tokens_per_s_note(v1::TimingMode timing = v1::TIMING_MODE_GEMM);

/// The verdict report: verdict and comparison, overall ratio with its interval, both arms' tok/s,
/// pairs and contended pairs, parity counts, the per-type ratio table and the reasons, and what the
/// job's tok/s was timed over. On pass timing the per-type figures are still each GEMM timed alone,
/// and the report says so: what a build gains between its GEMMs shows in the overall ratio only.
std::string format_verdict_report(const v1::VerdictReport& report, v1::JobKind kind = v1::JOB_KIND_AB,
                                  v1::TimingMode timing = v1::TIMING_MODE_GEMM);

/// Which daemon of a fleet may take a job, as its spec asks (--gpu-model, --gpu-uuid, --label):
/// "an H200 GPU with labels rack2, sm90", "a GPU with uuid GPU-5a8e and label rack2"; "" when the spec
/// names no model, uuid or label.
std::string format_gpu_routing(const v1::JobSpec& spec);
/// Where a job may run, as asked: "any GPU free", "GPU 1", "GPU 0, 1, split across two (--split-gpus)",
/// "an H200 GPU with label rack2", "GPU 1, which must be an H200 GPU with label rack2".
std::string format_gpu_choice(const v1::JobSpec& spec);

/// `qgate jobs`: id, kind, state, build, profile, verdict, ratio, created, age, disposition, and the
/// host whose daemon claimed it ("-" until claimed).
std::string format_jobs_table(const std::vector<v1::Job>& jobs, std::int64_t now_ms);

/// `qgate show`: the job, its spec, phase and progress, the error and the verdict report.
std::string format_job_details(const v1::Job& job, std::int64_t now_ms);

/// `qgate builds`: id, name, sha256 (12), size, commit, created.
std::string format_builds_table(const std::vector<v1::Build>& builds);

/// `qgate device` of one GPU: its fields, and its labels when the daemon has any. A GPU of another
/// daemon of the fleet (published_unix_ms set) shows what that daemon published and how long ago,
/// at `now_ms`, instead of the fields only a live read has (memory, driver, queues, uptime, clocks).
std::string format_device(const v1::DeviceStatus& device, std::int64_t now_ms = 0);
/// `qgate device` of several GPUs: a table of them (GPU, name, uuid, queue, the job running, the split
/// job holding it, co-tenant state), then each one's details. GPUs of several hosts, or any GPU of
/// another daemon (published_unix_ms set), make it the fleet's table: HOST and LABELS columns, "-"
/// for the queues another daemon does not publish, and SEEN ("live", or "12s ago" at `now_ms`).
std::string format_devices(const std::vector<v1::DeviceStatus>& devices, std::int64_t now_ms = 0);
/// "GPU 1 (NVIDIA H200, GPU-1111...)" for a verdict or a job.
std::string format_gpu(const v1::GpuRef& gpu);
/// The live co-tenant part of `qgate device`: state, foreign processes, clocks, last quiet window.
std::string format_cotenant_now(const v1::CotenantNow& now);

/// Trend points of one build on one path and backend, in time order. The backend is part of the
/// key because CPU figures are never mixed with GPU ones; the path because mmq and f16 are two
/// different series of the same build.
struct TrendGroup {
  std::string build;
  std::string path;
  std::string weight_type;           // "" for whole runs; a type's runs (or runs' parts) are another group
  std::int64_t tokens = 0;           // tokens per run: runs of another count are another group
  std::string backend;
  v1::TimingMode timing = v1::TIMING_MODE_UNSPECIFIED;  // runs timed the other way are another group
  std::vector<double> tokens_per_s;  // each point's (a job's median, or one run's figure)
  std::vector<bool> contended;       // each point's
  std::int64_t last_unix_ms = 0;
  std::string gpu_name;
  std::string settings;             // an imported series' own settings (n_batch=..., ...): others are another group
  std::string host;                 // the host that measured the runs: another host is another group
  std::int64_t runs = 0;            // the runs behind the points (a point without a count is one run)
  std::int64_t contended_runs = 0;
  double low = 0, high = 0;         // the lowest and highest run behind the points
};
/// A trend point's timing as `qgate trend` and its CSV write it: gemm, pass, or - (imported results).
std::string trend_timing_name(v1::TimingMode timing);
/// Groups (build, path, weight type, tokens, timing, backend, GPU, settings) in order of each group's first point.
std::vector<TrendGroup> group_trend(const std::vector<v1::TrendPoint>& points);
/// `qgate trend`: build, path, tokens, timing (gemm, pass, or - for imported results), backend, GPU, runs, median, min, max, last, sparkline; contended runs
/// counted with a '*' and a legend under the table. Points are jobs' summaries (their median, the
/// runs' min and max); MEDIAN is the median of the points, the sparkline one mark per point.
/// What `qgate import` stored: runs, builds, and the trend command that shows them.
std::string format_import(const v1::ImportResultsResponse& response, const std::string& format, std::size_t skipped);
std::string format_trend(const std::vector<v1::TrendPoint>& points);

/// `qgate trend --changes`: per series, where its level moved (the first build of the new level and the
/// last of the old), the ratio with its 95% interval and the permutation p-value; "no changes" when none.
std::string format_changes(const v1::QueryChangesResponse& response);
/// `qgate regressions`: one row per slowdown across series, oldest first.
std::string format_regressions(const v1::QueryChangesResponse& response);

/// `qgate compare`: per matched series, each side's runs and jobs, the unpaired ratio with its Welch
/// interval and Mann-Whitney p across jobs, and the paired result of jobs that ran both builds.
std::string format_compare(const v1::CompareResponse& response);

/// `qgate export --format csv`: a header row and one row per point.
std::string trend_csv(const std::vector<v1::TrendPoint>& points);

}  // namespace qgate::client
