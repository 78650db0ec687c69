// The co-tenant sampler: what else is using the GPU while a run is timed.
//
// Design note.
// - Period: 100 ms (kDefaultSamplePeriodMs). NVML refreshes its per-process utilisation samples about
//   every 1/6 s on datacenter GPUs, and a timed run lasts from ~10 ms to seconds. Reading every 100 ms
//   (with a 250 ms look-back window on the per-process samples, so no refresh is missed between reads)
//   catches a co-tenant phase within one run; one reading is a handful of NVML calls and a /proc read,
//   well under a millisecond on a core the run does not use, so the overhead is not measurable.
//   A faster period would only re-read the same NVML sample; a slower one misses 0.5 s on/off phases.
// - Foreign: every compute process on the device except the pids the caller names as its own (the
//   run's worker), passed with each read. The pids must be in NVML's pid namespace (the host's when
//   qgated runs in a container without --pid=host); a worker NVML cannot map shows up as foreign,
//   which errs on the side of "contended", never "quiet".
// - Unavailable never means quiet: without NVML (the normal case in CI and on the CPU backend), a
//   sampler reports available() == false with the reason, reads nothing, and a run's summary says
//   available = false with contended unknown. Likewise a reading with an unknown figure (process list
//   or per-process SM% unreadable) can make a run contended but never quiet.
#pragma once

#include <optional>
#include <set>
#include <string>

#include "qgate/cotenant/sample.h"

namespace qgate::cotenant {

/// The default period of PeriodicSampling; see the design note above.
inline constexpr std::int64_t kDefaultSamplePeriodMs = 100;

class Sampler {
 public:
  virtual ~Sampler() = default;
  /// One reading now; nullopt when the sampler is unavailable or nothing could be read. Processes
  /// whose pid is in own_pids are left out of Sample::foreign.
  virtual std::optional<Sample> read(const std::set<int>& own_pids) = 0;
  virtual bool available() const { return true; }
  /// Why available() is false ("" when it is true).
  virtual std::string unavailable_reason() const { return {}; }
};

}  // namespace qgate::cotenant
