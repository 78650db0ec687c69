// The declarations of the stored records (record_declarations.h): each table's columns, once.
#include "record_declarations.h"

#include <memory>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "qgate/db/store_error.h"

namespace qgate::db {

namespace stored {

namespace {
[[noreturn]] void wrong_kind(std::string_view column, std::string_view wanted) {
  throw StoreError(StoreErrorKind::InvalidValue, fmt::format("column {} holds no {}", column, wanted));
}
}  // namespace

std::int64_t as_int(const StoredValue& value, std::string_view column) {
  if (const auto* i = std::get_if<std::int64_t>(&value)) return *i;
  wrong_kind(column, "integer");
}

double as_real(const StoredValue& value, std::string_view column) {
  if (const auto* d = std::get_if<double>(&value)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&value)) return static_cast<double>(*i);  // 2.0 may come back as 2
  wrong_kind(column, "number");
}

std::string as_text(const StoredValue& value, std::string_view column) {
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  wrong_kind(column, "text");
}

}  // namespace stored

template <class Row>
std::string RecordDeclaration<Row>::column_list(std::string_view alias) const {
  std::string list;
  for (const auto& column : columns) {
    if (!list.empty()) list += ", ";
    list += alias.empty() ? std::string(column.name) : fmt::format("{}.{}", alias, column.name);
  }
  return list;
}

template <class Row>
std::vector<const ColumnDeclaration<Row>*> RecordDeclaration<Row>::inserted() const {
  std::vector<const ColumnDeclaration<Row>*> out;
  for (const auto& column : columns) {
    if (!(generated_key && column.name == key)) out.push_back(&column);
  }
  return out;
}

using stored::column;
using stored::word;

const std::vector<SeriesDimension>& series_dimensions() {
  using S = SeriesFields;
  using enum SeriesKeyPart;
  static const std::vector<SeriesDimension> dimensions{
      {column("profile", &S::profile), fixed},
      {column("weight_type", &S::weight_type), fixed},
      {column("path", &S::path), fixed},
      {column("tokens", &S::tokens), apart},
      {column("backend", &S::backend), fixed},
      {column("gpu_name", &S::gpu_name), fixed},
      {column("settings", &S::settings), appended_when_set},
      {column("host", &S::host), apart}};
  return dimensions;
}

std::vector<SeriesFieldValue> series_field_values(const SeriesFields& fields) {
  std::vector<SeriesFieldValue> values;
  for (const auto& dimension : series_dimensions()) values.push_back({dimension.column.name, dimension.column.store(fields)});
  return values;
}

void set_series_field(SeriesFields& fields, std::string_view name, const StoredValue& value) {
  for (const auto& dimension : series_dimensions()) {
    if (dimension.column.name != name) continue;
    const auto* text = std::get_if<std::string>(&value);
    if (dimension.column.nullable && text && text->empty()) dimension.column.load(fields, std::monostate{});
    else dimension.column.load(fields, value);
    return;
  }
  throw StoreError(StoreErrorKind::InvalidValue, fmt::format("no series field '{}'", name));
}

namespace {
/// "alias.name", kept for the life of the process: a declaration holds its names as views.
std::string_view qualified(std::string_view alias, std::string_view name) {
  if (alias.empty()) return name;
  static std::mutex mutex;
  static std::set<std::string, std::less<>> names;
  const std::string full = fmt::format("{}.{}", alias, name);
  std::lock_guard lock(mutex);
  return *names.insert(full).first;
}
}  // namespace

std::string series_column_list(std::string_view alias) {
  std::string list;
  for (const auto& dimension : series_dimensions()) {
    if (!list.empty()) list += ", ";
    list += qualified(alias, dimension.column.name);
  }
  return list;
}

template <class Row>
std::vector<ColumnDeclaration<Row>> series_columns(std::string_view alias) {
  static_assert(std::is_base_of_v<SeriesFields, Row>);
  std::vector<ColumnDeclaration<Row>> columns;
  for (const auto& dimension : series_dimensions()) {
    const ColumnDeclaration<SeriesFields>& field = dimension.column;
    columns.push_back({qualified(alias, field.name),
                       [store = field.store](const Row& row) { return store(row); },
                       [load = field.load](Row& row, const StoredValue& value) { load(row, value); }});
  }
  return columns;
}

namespace {
/// A declaration's own columns followed by the series fields.
template <class Row>
std::vector<ColumnDeclaration<Row>> with_series(std::vector<ColumnDeclaration<Row>> own, std::string_view alias = {}) {
  for (auto& column : series_columns<Row>(alias)) own.push_back(std::move(column));
  return own;
}
}  // namespace

const RecordDeclaration<Build>& build_record() {
  static const RecordDeclaration<Build> record{
      "builds", "build", "id", true,
      {column("id", &Build::id), column("sha256", &Build::sha256), column("name", &Build::name),
       column("commit_sha", &Build::commit_sha), column("branch", &Build::branch), column("flags", &Build::flags),
       column("size_bytes", &Build::size_bytes), column("artifact_path", &Build::artifact_path),
       column("abi_version", &Build::abi_version), column("build_name", &Build::build_name),
       column("build_version", &Build::build_version), column("external", &Build::external),
       column("created_ms", &Build::created_ms)}};
  return record;
}

const RecordDeclaration<Job>& job_record() {
  static const RecordDeclaration<Job> record{
      "jobs", "job", "id", true,
      {column("id", &Job::id), column("kind", &Job::kind),
       word("state", &Job::state, &qgate::to_string, &stored_job_state), column("build_id", &Job::build_id),
       column("baseline_build_id", &Job::baseline_build_id), column("profile", &Job::profile),
       column("spec_json", &Job::spec_json), column("backend", &Job::backend), column("device", &Job::device),
       column("quiet_only", &Job::quiet_only), column("deadline_ms", &Job::deadline_ms),
       column("attempts", &Job::attempts), column("error", &Job::error), column("created_ms", &Job::created_ms),
       column("started_ms", &Job::started_ms), column("finished_ms", &Job::finished_ms),
       column("progress_json", &Job::progress_json),
       word("disposition", &Job::disposition, &qgate::to_string, &stored_disposition),
       column("disposition_detail", &Job::disposition_detail), column("tokens", &Job::tokens),
       word("run_order", &Job::order, &qgate::to_string, &stored_run_order),
       word("timing", &Job::timing, &qgate::to_string, &stored_timing_mode),
       word("parity_shapes", &Job::parity_shapes, &qgate::to_string, &stored_shape_set), column("path", &Job::path),
       column("numerics", &Job::numerics), column("wait_for_quiet", &Job::wait_for_quiet),
       column("run_contended_on_expiry", &Job::run_contended_on_expiry),
       column("remeasure_of", &Job::remeasure_of), column("timeout_s", &Job::timeout_s),
       column("gpu_model", &Job::gpu_model), column("gpu_uuid", &Job::gpu_uuid),
       column("gpus_needed", &Job::gpus_needed), column("host", &Job::host),
       column("cancel_requested", &Job::cancel_requested)}};
  return record;
}

const RecordDeclaration<Run>& run_record() {
  static const RecordDeclaration<Run> record{
      "runs", "run", "id", true,
      with_series<Run>(
          {column("id", &Run::id), column("job_id", &Run::job_id), column("build_id", &Run::build_id),
           column("arm", &Run::arm), column("pair_index", &Run::pair_index), column("seq", &Run::seq),
           column("started_ms", &Run::started_ms), column("finished_ms", &Run::finished_ms),
           word("state", &Run::state, &qgate::to_string, &stored_run_state),
           column("gpu_uuid", &Run::gpu_uuid), column("driver_version", &Run::driver_version),
           column("cuda_version", &Run::cuda_version), column("qgate_version", &Run::qgate_version),
           column("options_json", &Run::options_json), column("series_key", &Run::series_key),
           column("tokens_per_s", &Run::tokens_per_s), column("gemm_ms", &Run::gemm_ms),
           column("contended", &Run::contended), column("part_of", &Run::part_of)})};
  return record;
}

const RecordDeclaration<ParityCaseRecord>& parity_case_record() {
  using P = ParityCaseRecord;
  // The seed is a uint64; SQL integers are signed 64-bit, so it is stored bit for bit.
  static const RecordDeclaration<P> record{
      "parity_cases", "parity case", "id", true,
      {column("id", &P::id), column("job_id", &P::job_id), column("build_id", &P::build_id), column("path", &P::path),
       column("weight_type", &P::weight_type), column("nt", &P::nt), column("od", &P::od), column("k", &P::k),
       column("seed", &P::seed), column("outcome", &P::outcome), column("reference", &P::reference),
       column("tolerance", &P::tolerance), column("max_abs_diff", &P::max_abs_diff), column("nmse", &P::nmse),
       column("nan_count", &P::nan_count), column("inf_count", &P::inf_count),
       column("unwritten_count", &P::unwritten_count), column("message", &P::message),
       column("created_ms", &P::created_ms), column("numerics", &P::numerics), column("activation", &P::activation),
       column("atol", &P::atol), column("rtol", &P::rtol),
       column("worst_tolerance_fraction", &P::worst_tolerance_fraction), column("max_rel_diff", &P::max_rel_diff),
       column("exact_nmse", &P::exact_nmse), column("exact_nmse_limit", &P::exact_nmse_limit),
       column("weights_source", &P::weights_source)}};
  return record;
}

const RecordDeclaration<Verdict>& verdict_record() {
  // The verdict's reasons: a JSON list of strings.
  ColumnDeclaration<Verdict> reasons{
      "reasons", [](const Verdict& v) -> StoredValue { return nlohmann::json(v.reasons).dump(); },
      [](Verdict& v, const StoredValue& value) {
        v.reasons = nlohmann::json::parse(stored::as_text(value, "reasons")).get<std::vector<std::string>>();
      }};
  static const RecordDeclaration<Verdict> record{
      "verdicts", "verdict of job", "job_id", false,
      {column("job_id", &Verdict::job_id), word("verdict", &Verdict::verdict, &qgate::to_string, &stored_verdict),
       word("comparison", &Verdict::comparison, &qgate::to_string, &stored_comparison), column("ratio", &Verdict::ratio),
       column("ci_low", &Verdict::ci_low), column("ci_high", &Verdict::ci_high), column("pairs", &Verdict::pairs),
       column("contended_pairs", &Verdict::contended_pairs), column("mismatched_pairs", &Verdict::mismatched_pairs),
       column("tokens_per_s_a", &Verdict::tokens_per_s_a), column("tokens_per_s_b", &Verdict::tokens_per_s_b),
       reasons, column("created_ms", &Verdict::created_ms), column("p_value", &Verdict::p_value),
       column("profile", &Verdict::profile), column("tokens", &Verdict::tokens), column("backend", &Verdict::backend),
       column("parity_passed", &Verdict::parity_passed), column("parity_failed", &Verdict::parity_failed),
       column("arm_a_label", &Verdict::arm_a_label), column("arm_a_runs", &Verdict::arm_a_runs),
       column("arm_b_label", &Verdict::arm_b_label), column("arm_b_runs", &Verdict::arm_b_runs),
       column("arm_a_build_id", &Verdict::arm_a_build_id), column("arm_b_build_id", &Verdict::arm_b_build_id)}};
  return record;
}

const RecordDeclaration<CotenantSummary>& cotenant_record() {
  using C = CotenantSummary;
  static const RecordDeclaration<C> record{
      "cotenant", "co-tenant load of run", "run_id", false,
      {column("run_id", &C::run_id), column("available", &C::available),
       column("sample_period_ms", &C::sample_period_ms), column("max_foreign_sm", &C::max_foreign_sm),
       column("mean_foreign_sm", &C::mean_foreign_sm), column("device_util_mean", &C::device_util_mean),
       column("top_processes", &C::top_processes), column("throttle_reasons", &C::throttle_reasons),
       column("min_sm_clock_mhz", &C::min_sm_clock_mhz), column("median_sm_clock_mhz", &C::median_sm_clock_mhz),
       column("max_sm_clock_mhz", &C::max_sm_clock_mhz), column("temperature_max_c", &C::temperature_max_c),
       column("power_max_w", &C::power_max_w), column("contended", &C::contended), column("policy", &C::policy)}};
  return record;
}

using stored::optional_word;

const RecordDeclaration<TypeRatioRow>& type_ratio_record() {
  using T = TypeRatioRow;
  static const RecordDeclaration<T> record{
      "verdict_type_ratios", "type ratio of job", "job_id", false,
      {column("weight_type", &T::weight_type), column("ratio", &T::ratio), column("ci_low", &T::ci_low),
       column("ci_high", &T::ci_high), word("comparison", &T::comparison, &qgate::to_string, &stored_comparison),
       column("gemm_us_a", &T::gemm_us_a), column("gemm_us_b", &T::gemm_us_b)},
      true};
  return record;
}

const RecordDeclaration<MemoryLeakRow>& leak_record() {
  using L = MemoryLeakRow;
  static const RecordDeclaration<L> record{
      "verdict_leaks", "leak of job", "job_id", false,
      {column("location", &L::where), column("device_bytes", &L::device_bytes), column("host_bytes", &L::host_bytes),
       column("detail", &L::detail), column("kept_once", &L::kept_once)},
      true};
  return record;
}

const RecordDeclaration<OutputIdentityRow>& output_identity_record() {
  using O = OutputIdentityRow;
  static const RecordDeclaration<O> record{
      "verdict_output_identity", "output identity of job", "job_id", false,
      {column("identical", &O::identical), column("compared_runs", &O::compared_runs),
       column("output_length", &O::length), column("first_difference", &O::first_difference),
       column("unit", &O::unit), column("detail", &O::detail)}};
  return record;
}

const RecordDeclaration<Sample>& sample_record() {
  static const RecordDeclaration<Sample> record{
      "samples", "sample of run", "run_id", false,
      {column("metric", &Sample::metric), column("unit", &Sample::unit), column("value", &Sample::value)}};
  return record;
}

const RecordDeclaration<CotenantSample>& cotenant_sample_record() {
  using C = CotenantSample;
  static const RecordDeclaration<C> record{
      "cotenant_samples", "co-tenant sample of run", "run_id", false,
      {column("t_ms", &C::t_ms), column("foreign_sm", &C::foreign_sm), column("device_util", &C::device_util),
       column("sm_clock_mhz", &C::sm_clock_mhz), column("throttle_reasons", &C::throttle_reasons),
       column("foreign_processes", &C::foreign_processes)}};
  return record;
}

const RecordDeclaration<TrendRow>& trend_row_projection() {
  using T = TrendRow;
  static const RecordDeclaration<T> projection{
      "runs", "trend row of run", "r.id", false,
      with_series<T>({column("r.id", &T::run_id), column("r.build_id", &T::build_id), column("b.name", &T::build_name),
                      column("b.sha256", &T::build_sha256), column("r.started_ms", &T::started_ms),
                      column("r.tokens_per_s", &T::tokens_per_s), column("r.contended", &T::contended),
                      column("r.series_key", &T::series_key), column("r.job_id", &T::job_id),
                      column("b.commit_sha", &T::commit_sha),
                      optional_word("j.timing", &T::timing, &qgate::to_string, &stored_timing_mode)},
                     "r")};
  return projection;
}

namespace {
/// The build_rollups columns of one co-tenant set ("quiet", "open" or "all"): literals, since a
/// declaration keeps string_views.
struct TrendSetColumns {
  std::string_view last_job, runs, median, low, high;
};

RecordDeclaration<TrendSummary> make_trend_summary_projection(const TrendSetColumns& set) {
  using T = TrendSummary;
  // The newest job is stored as 0 for a point of imported runs alone.
  ColumnDeclaration<T> last_job{set.last_job,
                                [](const T& row) -> StoredValue { return row.last_job_id.value_or(0); },
                                [](T& row, const StoredValue& value) {
                                  const std::int64_t id = stored::as_int(value, "last_job");
                                  if (id != 0) row.last_job_id = id;
                                  else row.last_job_id.reset();
                                }};
  return {"build_rollups", "trend point", "id", false,
          with_series<T>({column("id", &T::id), last_job, column("jobs", &T::jobs), column("build_id", &T::build_id),
                          column("build_name", &T::build_name), column("build_sha256", &T::build_sha256),
                          column("commit_sha", &T::commit_sha), column("series_key", &T::series_key),
                          column("first_ms", &T::first_ms), column("last_ms", &T::last_ms),
                          column("runs", &T::total_runs), column("contended_runs", &T::contended_runs),
                          column("unknown_runs", &T::unknown_runs), column(set.runs, &T::runs),
                          column(set.median, &T::median_tokens_per_s), column(set.low, &T::low_tokens_per_s),
                          column(set.high, &T::high_tokens_per_s),
                          optional_word("timing", &T::timing, &qgate::to_string, &stored_timing_mode)})};
}
}  // namespace

const RecordDeclaration<TrendSummary>& trend_summary_projection(std::string_view set) {
  // The "all" set's run count is the total (runs); the others keep their own (quiet_runs, open_runs).
  static const RecordDeclaration<TrendSummary> quiet = make_trend_summary_projection(
      {"quiet_last_job", "quiet_runs", "quiet_median", "quiet_low", "quiet_high"});
  static const RecordDeclaration<TrendSummary> open = make_trend_summary_projection(
      {"open_last_job", "open_runs", "open_median", "open_low", "open_high"});
  static const RecordDeclaration<TrendSummary> all = make_trend_summary_projection(
      {"all_last_job", "runs", "all_median", "all_low", "all_high"});
  if (set == "quiet") return quiet;
  if (set == "open") return open;
  if (set == "all") return all;
  throw StoreError(StoreErrorKind::InvalidValue, fmt::format("no co-tenant set '{}' in a trend point", set));
}

const RecordDeclaration<CompareRun>& compare_run_projection() {
  using C = CompareRun;
  static const RecordDeclaration<C> projection{
      "runs", "compare run", "r.id", false,
      with_series<C>({column("r.id", &C::run_id), column("r.job_id", &C::job_id), column("r.build_id", &C::build_id),
                      column("r.arm", &C::arm), column("r.pair_index", &C::pair_index),
                      column("r.gpu_uuid", &C::gpu_uuid), column("r.started_ms", &C::started_ms),
                      column("r.tokens_per_s", &C::tokens_per_s), column("r.contended", &C::contended),
                      optional_word("j.timing", &C::job_timing, &qgate::to_string, &stored_timing_mode)},
                     "r")};
  return projection;
}

template std::vector<ColumnDeclaration<Run>> series_columns<Run>(std::string_view);
template std::vector<ColumnDeclaration<TrendRow>> series_columns<TrendRow>(std::string_view);
template std::vector<ColumnDeclaration<TrendSummary>> series_columns<TrendSummary>(std::string_view);
template std::vector<ColumnDeclaration<CompareRun>> series_columns<CompareRun>(std::string_view);
template struct RecordDeclaration<Build>;
template struct RecordDeclaration<Job>;
template struct RecordDeclaration<Run>;
template struct RecordDeclaration<ParityCaseRecord>;
template struct RecordDeclaration<Verdict>;
template struct RecordDeclaration<CotenantSummary>;
template struct RecordDeclaration<TypeRatioRow>;
template struct RecordDeclaration<MemoryLeakRow>;
template struct RecordDeclaration<OutputIdentityRow>;
template struct RecordDeclaration<Sample>;
template struct RecordDeclaration<CotenantSample>;
template struct RecordDeclaration<TrendRow>;
template struct RecordDeclaration<TrendSummary>;
template struct RecordDeclaration<CompareRun>;

}  // namespace qgate::db
