// `qgate compare`: two builds' history, compared only where it is comparable. Runs pair only inside
// one job (when both builds were its two arms); across jobs each build's runs are an independent
// sample of one series (profile, tokens, backend, GPU model and uuid, path, weight type, timing mode),
// compared with Welch's interval on log tok/s and a Mann-Whitney test. The gRPC handler delegates here
// and keeps only the status codes.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "qgate/db/records.h"
#include "qgate/db/store.h"
#include "qgate/stats/unpaired.h"
#include "qgate/v1/harness.pb.h"

namespace qgate::jobs {

/// What makes two runs comparable. Two builds' runs are compared only on equal keys.
/// The series fields (db::SeriesFields: profile, weight type, path, tokens, backend, GPU model,
/// settings) and the GPU itself and the timing.
struct SeriesKey : db::SeriesFields {
  std::string gpu_uuid;
  std::string timing;  // "gemm" | "pass"; "" for imported runs (no job)

  auto operator<=>(const SeriesKey&) const = default;
  /// The series a stored run belongs to: its fields, its job's timing and its settings.
  static SeriesKey of(const db::CompareRun& run);
  /// "profile llama-7b-q4_K_M, 512 tokens, cuda on NVIDIA H200 (GPU-...), path mmq, timing gemm".
  std::string describe() const;
};

struct CompareOptions {
  bool include_contended = false;
  std::optional<std::string> profile;
  std::optional<std::int64_t> tokens;
  std::optional<std::string> weight_type;
  std::optional<std::string> host;  // only runs measured on this host
  double same_margin = 0.02;  // SAME: the interval lies within [1 - margin, 1 + margin]
  double confidence = 0.95;
};

enum class Answer { same, different, unknown };

/// One build's side of one series.
struct SeriesSide {
  std::vector<double> tokens_per_s;  // the runs, oldest first
  // The units a verdict is judged on: each job's runs summarised by their geometric mean (an imported
  // run, which no job measured, is a unit of its own). Runs of one job share its conditions, so only
  // the spread between jobs says how far a build's figure moves (docs/ab-statistics.md).
  std::vector<double> unit_tokens_per_s;
  std::vector<std::int64_t> job_ids; // the distinct jobs they come from
  int contended_runs = 0;            // included (include_contended)
  int contended_left_out = 0;
  int unknown_load_runs = 0;
  double geomean = 0;
};

/// A job in which both builds were the arms: the verdict the job reached on its pairs, as A / B.
struct PairedJob {
  std::int64_t job_id = 0;
  int quiet_pairs = 0;      // pairs of this series with both runs in the comparison
  int pairs = 0;            // the pairs the job judged (its verdict's)
  int contended_pairs = 0;
  double ratio = 0;         // 0 when the job has no verdict with a ratio (failed, cancelled)
  double lower = 0;
  double upper = 0;
  Answer answer = Answer::unknown;
};

struct SeriesComparison {
  SeriesKey key;
  SeriesSide a, b;
  // On the units when each side has kMinUnitsPerSide; else on the runs, shown but never a verdict;
  // none with fewer than 2 runs on a side.
  std::optional<stats::UnpairedRatio> unpaired;
  bool on_units = false;   // unpaired is on the units, and answer may be SAME or DIFFERENT
  bool significant = false;  // its Welch p survives Holm's correction across the series judged
  Answer answer = Answer::unknown;
  std::vector<PairedJob> paired_jobs;
  std::vector<std::string> notes;
};

struct BuildComparison {
  db::Build a, b;
  double same_margin = 0.02;
  std::vector<SeriesComparison> series;  // at least one
  std::vector<std::string> notes;
};

/// Thrown when the two histories have no series in common; the message says what each has.
class NothingComparable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The fewest units (jobs) a side that a series needs for a verdict.
inline constexpr std::size_t kMinUnitsPerSide = 3;

/// SAME when the interval lies within the margin, else DIFFERENT when it excludes 1 and `significant`
/// (the series' Welch p survives Holm's correction across every series judged), else UNKNOWN.
Answer judge_unpaired(const stats::UnpairedRatio& r, double same_margin, bool significant);

class CompareBuilds {
 public:
  explicit CompareBuilds(db::Store& store) : store_(store) {}

  /// Reads each build's runs in one store query and compares them series by series. Throws
  /// std::invalid_argument when a and b are the same build or an option is out of range, and
  /// NothingComparable when no series has runs of both.
  BuildComparison compare(const db::Build& a, const db::Build& b, const CompareOptions& options) const;

 private:
  db::Store& store_;
};

v1::CompareResponse to_proto(const BuildComparison& comparison);

}  // namespace qgate::jobs
