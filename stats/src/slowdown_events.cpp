// A drop paired with the change that fixed it, and a slowdown carried by too few slow builds labelled
// transient (slowdown_events.h).
#include "qgate/stats/slowdown_events.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace qgate::stats {

std::vector<SlowdownEvent> slowdown_events(std::span<const ChangePoint> changes, const RecoveryOptions& options) {
  if (!(options.tolerance >= 0 && options.tolerance < 1))
    throw std::invalid_argument("the recovery tolerance must be in [0, 1)");
  std::vector<SlowdownEvent> events;
  for (size_t c = 0; c < changes.size(); ++c) {
    if (!(changes[c].ratio < 1)) continue;
    SlowdownEvent event{c, std::nullopt};
    if (c + 1 < changes.size()) {
      const ChangePoint& drop = changes[c];
      const ChangePoint& next = changes[c + 1];
      const double drop_size = std::log(drop.ratio);  // < 0
      const bool soon = next.index - drop.index <= options.max_dip_builds;
      const bool undoes_it = next.ratio > 1 && std::fabs(drop_size + std::log(next.ratio)) <= options.tolerance * -drop_size;
      if (soon && undoes_it) event.recovery = c + 1;
    }
    events.push_back(event);
  }
  return events;
}

void label_transient_slowdowns(std::span<const double> log_values, std::span<const ChangePoint> changes,
                               std::vector<SlowdownEvent>& events, size_t min_slow_builds) {
  const auto mean = [&](size_t begin, size_t end) {
    double sum = 0;
    for (size_t i = begin; i < end; ++i) sum += log_values[i];
    return sum / static_cast<double>(end - begin);
  };
  for (SlowdownEvent& event : events) {
    if (event.drop >= changes.size()) throw std::invalid_argument("a slowdown names no change");
    const size_t first_slow = changes[event.drop].index;
    const size_t level_begin = event.drop == 0 ? 0 : changes[event.drop - 1].index;
    const size_t slow_end = event.drop + 1 < changes.size() ? changes[event.drop + 1].index : log_values.size();
    if (!(level_begin < first_slow && first_slow < slow_end && slow_end <= log_values.size()))
      throw std::invalid_argument("the change at " + std::to_string(first_slow) + " does not fit a series of " +
                                  std::to_string(log_values.size()) + " builds");
    const double halfway = (mean(level_begin, first_slow) + mean(first_slow, slow_end)) / 2;
    event.slow_builds = 0;
    for (size_t i = first_slow; i < slow_end; ++i) event.slow_builds += log_values[i] < halfway ? 1 : 0;
    event.transient = event.slow_builds < min_slow_builds;
  }
}

}  // namespace qgate::stats
