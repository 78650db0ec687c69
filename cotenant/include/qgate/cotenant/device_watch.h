// Watches the device between runs as well as during them: a background thread that reads the
// sampler, keeps the latest reading and a QuietWindow, and answers "is the GPU quiet now?" for the
// scheduler's quiet-window jobs and for `qgate device`.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "qgate/cotenant/clock.h"
#include "qgate/cotenant/quiet_window.h"
#include "qgate/cotenant/sample.h"
#include "qgate/cotenant/sampler.h"
#include "qgate/cotenant/summary.h"

namespace qgate::cotenant {

/// The pids of this process and its children (qgated and its workers): never a co-tenant of
/// themselves. Read from <proc_root>/<pid>/stat.
std::set<int> own_process_family(const std::string& proc_root = "/proc");

struct DeviceWatchOptions {
  QuietWindowOptions window;  // the quiet policy and its hold time
  /// 250 ms: a quarter of the window's 1 s gap limit, so a late reading never breaks a quiet
  /// stretch, and cheap enough (a handful of NVML calls) to run all day.
  std::int64_t period_ms = 250;
  std::function<std::set<int>()> own_pids = [] { return own_process_family(); };
};

/// What the device looks like now.
struct DeviceNow {
  bool available = false;
  std::string unavailable_reason;
  std::optional<Sample> latest;
  /// "quiet" (held for the hold time), "settling" (quiet, not yet for the hold time), "contended",
  /// "unknown" (the reading is incomplete) or "unavailable" (no sampler).
  std::string state = "unavailable";
  std::string reason;                         // why it is what it is, in words
  std::int64_t quiet_for_ms = 0;              // the current quiet stretch; 0 when not quiet
  std::optional<std::int64_t> ms_since_quiet; // 0 while quiet; none when never quiet since the start
  std::string policy;                         // the quiet policy and hold in words
};

class DeviceWatch {
 public:
  DeviceWatch(Sampler& sampler, const Clock& clock = system_clock(), DeviceWatchOptions options = {});
  ~DeviceWatch();
  DeviceWatch(const DeviceWatch&) = delete;
  DeviceWatch& operator=(const DeviceWatch&) = delete;

  /// Starts the reading thread (none for an unavailable sampler); stop() joins it. Idempotent.
  void start();
  void stop();
  /// One synchronous reading fed to the window (tests drive the watch with it on a ManualClock).
  std::optional<Sample> sample_once();

  DeviceNow now() const;
  /// Quiet for the hold time at the clock's now.
  bool quiet_now() const;
  const DeviceWatchOptions& options() const { return options_; }

 private:
  void loop();
  Sampler& sampler_;
  const Clock& clock_;
  DeviceWatchOptions options_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  QuietWindow window_;
  std::optional<Sample> latest_;
  std::thread thread_;
};

}  // namespace qgate::cotenant
