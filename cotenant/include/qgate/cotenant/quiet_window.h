// Watches readings in time order and says whether the GPU has been quiet long enough to measure.
#pragma once

#include <cstdint>
#include <optional>

#include "qgate/cotenant/sample.h"
#include "qgate/cotenant/summary.h"

namespace qgate::cotenant {

struct QuietWindowOptions {
  QuietPolicy policy;             // what a quiet reading is (classify() == kQuiet)
  std::int64_t hold_ms = 30'000;  // quiet must hold this long: outlasts a server's idle gap between requests
  /// A gap between readings longer than this breaks a stretch (nobody watched), and a stretch whose
  /// last reading is older than this at `now` is stale: not quiet. 10 periods of 100 ms.
  std::int64_t max_sample_gap_ms = 1'000;
};

enum class QuietWait { kWaiting, kQuiet, kExpired };
std::string to_string(QuietWait state);

class QuietWindow {
 public:
  explicit QuietWindow(QuietWindowOptions options = {});

  /// Feed readings in time order; one older than the last is ignored (returns false).
  bool add(const Sample& sample);

  /// When the current quiet stretch began (the time of its first quiet reading); none when the
  /// latest reading was not quiet or there is none.
  std::optional<std::int64_t> quiet_since_ms() const;
  /// The stretch has held for hold_ms at now_ms and its latest reading is not stale.
  bool is_quiet_for(std::int64_t hold_ms, std::int64_t now_ms) const;
  bool is_quiet(std::int64_t now_ms) const { return is_quiet_for(options_.hold_ms, now_ms); }
  /// The time of the last quiet reading of the most recent stretch that had held for hold_ms and has
  /// since ended (by a non-quiet reading, a gap, or going stale); none if there was none.
  std::optional<std::int64_t> last_quiet_window_end_ms(std::int64_t now_ms) const;
  /// 0 while quiet (is_quiet), else now - last_quiet_window_end_ms; none when never quiet.
  std::optional<std::int64_t> ms_since_quiet(std::int64_t now_ms) const;
  /// For a re-measure request waiting until deadline_ms: quiet now, still waiting, or expired.
  QuietWait wait_state(std::int64_t now_ms, std::int64_t deadline_ms) const;

  void reset();
  const QuietWindowOptions& options() const { return options_; }

 private:
  void close_stretch();

  QuietWindowOptions options_;
  std::optional<std::int64_t> last_t_ms_;
  std::optional<std::int64_t> since_ms_;       // first reading of the current quiet stretch
  std::optional<std::int64_t> last_quiet_ms_;  // latest reading of the current quiet stretch
  std::optional<std::int64_t> closed_end_ms_;  // end of the last stretch that held, now closed
};

}  // namespace qgate::cotenant
