// A drop paired with the change that fixed it (slowdown_events.h).
#include "qgate/stats/slowdown_events.h"

#include <cmath>
#include <stdexcept>

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

}  // namespace qgate::stats
