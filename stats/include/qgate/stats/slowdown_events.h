// Slowdowns in a build history as events: each drop the change-point detector found, and, when the
// level came back by about as much within a few builds, the change that fixed it. A dip that recovers is
// one regression with a start and an end, not a slowdown plus an unrelated speedup (docs/change-points.md).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "qgate/stats/change_points.h"

namespace qgate::stats {

struct RecoveryOptions {
  /// The next change fixes a drop only when it comes at most this many builds after the drop's first
  /// slow build (the dip's length).
  size_t max_dip_builds = 20;
  /// ... and when it undoes the drop to within this share of the drop's size on the log scale:
  /// |log(drop ratio) + log(recovery ratio)| <= tolerance * |log(drop ratio)|.
  double tolerance = 0.5;
};

/// One slowdown: `drop` indexes a change with ratio < 1; `recovery`, when the level came back, the change
/// right after it that fixed it (ratio > 1). Both index the `changes` given to slowdown_events.
struct SlowdownEvent {
  size_t drop = 0;
  std::optional<size_t> recovery;
  /// Set by label_transient_slowdowns: the builds on the slow level (from the drop up to the next change)
  /// that are slower than halfway between the level before and the slow level's mean.
  size_t slow_builds = 0;
  /// ... and whether they are fewer than the minimum for a sustained slowdown: a slowdown carried by one
  /// or two builds, which a short real regression and a burst of contention the co-tenant sampler missed
  /// both produce (docs/change-points.md, "Transient slowdowns").
  bool transient = false;
};

/// The slowdowns among `changes` (sorted by index, as detect_change_points returns them), oldest first,
/// each with its recovery when the next change is one. Throws std::invalid_argument on a tolerance
/// outside [0, 1).
std::vector<SlowdownEvent> slowdown_events(std::span<const ChangePoint> changes, const RecoveryOptions& options = {});

/// Fills `slow_builds` and `transient` of each event from the series the changes were found in
/// (`log_values`, as given to detect_change_points): transient when fewer than `min_slow_builds` builds are
/// slow. Throws std::invalid_argument when an event or change does not fit the series.
void label_transient_slowdowns(std::span<const double> log_values, std::span<const ChangePoint> changes,
                               std::vector<SlowdownEvent>& events, size_t min_slow_builds);

}  // namespace qgate::stats
