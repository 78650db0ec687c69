// QuietWindow: the current quiet stretch, its hold, and when the last held one ended.
#include "qgate/cotenant/quiet_window.h"

namespace qgate::cotenant {

std::string to_string(QuietWait state) {
  switch (state) {
    case QuietWait::kWaiting:
      return "waiting";
    case QuietWait::kQuiet:
      return "quiet";
    case QuietWait::kExpired:
      return "expired";
  }
  return "waiting";
}

QuietWindow::QuietWindow(QuietWindowOptions options) : options_(std::move(options)) {}

void QuietWindow::reset() {
  last_t_ms_.reset();
  since_ms_.reset();
  last_quiet_ms_.reset();
  closed_end_ms_.reset();
}

void QuietWindow::close_stretch() {
  if (since_ms_ && last_quiet_ms_ && *last_quiet_ms_ - *since_ms_ >= options_.hold_ms) closed_end_ms_ = *last_quiet_ms_;
  since_ms_.reset();
  last_quiet_ms_.reset();
}

bool QuietWindow::add(const Sample& sample) {
  if (last_t_ms_ && sample.t_ms < *last_t_ms_) return false;
  // Nobody watched during a long gap: whatever the stretch was, it ends at its last reading.
  if (last_t_ms_ && sample.t_ms - *last_t_ms_ > options_.max_sample_gap_ms) close_stretch();
  last_t_ms_ = sample.t_ms;
  if (classify(sample, options_.policy) != SampleLoad::kQuiet) {
    close_stretch();
    return true;
  }
  if (!since_ms_) since_ms_ = sample.t_ms;
  last_quiet_ms_ = sample.t_ms;
  return true;
}

std::optional<std::int64_t> QuietWindow::quiet_since_ms() const { return since_ms_; }

bool QuietWindow::is_quiet_for(std::int64_t hold_ms, std::int64_t now_ms) const {
  if (!since_ms_ || !last_quiet_ms_) return false;
  if (now_ms - *last_quiet_ms_ > options_.max_sample_gap_ms) return false;  // stale: the sampler stopped
  return now_ms - *since_ms_ >= hold_ms;
}

std::optional<std::int64_t> QuietWindow::last_quiet_window_end_ms(std::int64_t now_ms) const {
  // A stretch that held and then went stale has ended too, at its last reading.
  if (since_ms_ && last_quiet_ms_ && now_ms - *last_quiet_ms_ > options_.max_sample_gap_ms &&
      *last_quiet_ms_ - *since_ms_ >= options_.hold_ms) {
    return last_quiet_ms_;
  }
  return closed_end_ms_;
}

std::optional<std::int64_t> QuietWindow::ms_since_quiet(std::int64_t now_ms) const {
  if (is_quiet(now_ms)) return 0;
  const auto end = last_quiet_window_end_ms(now_ms);
  if (!end) return std::nullopt;
  return now_ms - *end;
}

QuietWait QuietWindow::wait_state(std::int64_t now_ms, std::int64_t deadline_ms) const {
  if (is_quiet(now_ms)) return QuietWait::kQuiet;
  return now_ms >= deadline_ms ? QuietWait::kExpired : QuietWait::kWaiting;
}

}  // namespace qgate::cotenant
