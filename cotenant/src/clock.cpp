// The wall clock behind sample times.
#include "qgate/cotenant/clock.h"

#include <chrono>

namespace qgate::cotenant {

std::int64_t SystemClock::now_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const Clock& system_clock() {
  static const SystemClock clock;
  return clock;
}

}  // namespace qgate::cotenant
