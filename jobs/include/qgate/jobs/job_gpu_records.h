// What a job's runs say about the GPUs it ran on: which GPUs (ordinal, name, uuid), and for a split
// job (docs/two-gpus.md) the GPU effect and the stored A/A calibration of its pair. Everything is read
// back from the runs and verdicts in the store, so the runs stay the one home of these facts; the
// job runner uses the same reading when it judges a split job, and GetJob when it shows one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qgate/db/store.h"
#include "qgate/v1/harness.pb.h"

namespace qgate::jobs {

/// One finished timed run of an A/B arm, with its GPU.
struct GpuRun {
  std::string arm;  // "A" or "B"
  int pair_index = 0;
  double tokens_per_s = 0;
  v1::GpuRef gpu;
};

/// A split A/A of a pair: the same build on both arms, the verdict it reached and the GPU effect.
struct PairCalibration {
  int64_t job_id = 0;
  v1::GpuRef first;   // arm A's GPU in its even pairs
  v1::GpuRef second;
  double ratio = 1;
  double ci_low = 0;
  double ci_high = 0;
  v1::Comparison comparison = v1::COMPARISON_UNKNOWN;
  double gpu_ratio = 1;  // speed on `first` / speed on `second`
  int64_t finished_ms = 0;
};

class JobGpuRecords {
 public:
  explicit JobGpuRecords(db::Store& store) : store_(store) {}

  /// The job's finished A/B runs, oldest first: one indexed query for the job's runs, and one
  /// look-up per run.
  std::vector<GpuRun> runs(const db::Job& job) const;
  /// The distinct GPUs of those runs, by ordinal.
  static std::vector<v1::GpuRef> gpus(const std::vector<GpuRun>& runs);
  /// Whether the job is an A/A of a pair: a split job whose two arms run one and the same build.
  static bool is_calibration(const db::Job& job, const v1::JobSpec& spec);
  /// The newest split A/A of the pair {x, y} (matched by uuid, in either order) that finished before
  /// `before_ms`, other than `not_job`; none when there is none. Looks at the last `scan` jobs.
  std::optional<PairCalibration> calibration(const v1::GpuRef& x, const v1::GpuRef& y, int64_t before_ms,
                                             int64_t not_job, int scan = 500) const;
  /// A split job's SplitGpus as stored: the pair, blocks and GPU effect from its runs, and the
  /// calibration it was judged against. None for a job that is not split or has no complete block.
  std::optional<v1::SplitGpus> split(const db::Job& job, const v1::JobSpec& spec, const std::vector<GpuRun>& runs) const;
  /// Fills a split report's calibration fields from `cal` (oriented to the report's pair).
  static void describe_calibration(v1::SplitGpus& split, const std::optional<PairCalibration>& cal);

 private:
  db::Store& store_;
};

}  // namespace qgate::jobs
