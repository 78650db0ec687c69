// DeviceWatch: the daemon's always-on reading of the device, for quiet windows and `qgate device`.
#include "qgate/cotenant/device_watch.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace qgate::cotenant {

std::set<int> own_process_family(const std::string& proc_root) {
  const int self = static_cast<int>(getpid());
  std::set<int> family = {self};
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(proc_root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so parse after the last ')'.
    const auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 1));
    std::string state;
    int ppid = 0;
    if (rest >> state >> ppid && ppid == self) family.insert(std::stoi(name));
  }
  return family;
}

namespace {

std::string seconds_text(std::int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", double(ms) / 1000.0);
  return buf;
}

std::string busy_reason(const Sample& s, const QuietPolicy& policy) {
  std::string why;
  for (const ForeignProcess& p : s.foreign) {
    if (p.sm_percent && *p.sm_percent > policy.max_foreign_sm_percent) {
      why = "foreign compute: " + foreign_processes_text(s.foreign);
      break;
    }
  }
  if (s.clock_event_reasons && (*s.clock_event_reasons & policy.slowdown_mask)) {
    if (!why.empty()) why += "; ";
    why += "slowdown: " + decode_clock_event_reasons(*s.clock_event_reasons & policy.slowdown_mask);
  }
  return why.empty() ? "busy" : why;
}

}  // namespace

DeviceWatch::DeviceWatch(Sampler& sampler, const Clock& clock, DeviceWatchOptions options)
    : sampler_(sampler), clock_(clock), options_(std::move(options)), window_(options_.window) {}

DeviceWatch::~DeviceWatch() { stop(); }

void DeviceWatch::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || !sampler_.available()) return;
  stopping_ = false;
  thread_ = std::thread([this] { loop(); });
}

void DeviceWatch::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<Sample> DeviceWatch::sample_once() {
  std::optional<Sample> s = sampler_.read(options_.own_pids ? options_.own_pids() : std::set<int>{});
  if (!s) return s;
  std::lock_guard<std::mutex> lock(mu_);
  window_.add(*s);
  latest_ = *s;
  return s;
}

void DeviceWatch::loop() {
  auto next = std::chrono::steady_clock::now();
  while (true) {
    try {
      sample_once();
    } catch (const std::exception&) {
      // A failed reading is a gap: the window goes stale after max_sample_gap_ms, never quiet.
    }
    next += std::chrono::milliseconds(options_.period_ms);
    std::unique_lock<std::mutex> lock(mu_);
    if (wake_.wait_until(lock, next, [this] { return stopping_; })) return;
  }
}

bool DeviceWatch::quiet_now() const {
  std::lock_guard<std::mutex> lock(mu_);
  return window_.is_quiet(clock_.now_ms());
}

DeviceNow DeviceWatch::now() const {
  DeviceNow n;
  n.available = sampler_.available();
  n.unavailable_reason = sampler_.unavailable_reason();
  n.policy = options_.window.policy.describe() + "; held for " + seconds_text(options_.window.hold_ms);
  if (!n.available) {
    n.reason = n.unavailable_reason;
    return n;
  }
  const std::int64_t t = clock_.now_ms();
  std::lock_guard<std::mutex> lock(mu_);
  n.latest = latest_;
  n.ms_since_quiet = window_.ms_since_quiet(t);
  if (!latest_) {
    n.state = "unknown";
    n.reason = "no reading yet";
    return n;
  }
  if (t - latest_->t_ms > options_.window.max_sample_gap_ms) {
    n.state = "unknown";
    n.reason = "the last reading is " + seconds_text(t - latest_->t_ms) + " old";
    return n;
  }
  if (auto since = window_.quiet_since_ms()) n.quiet_for_ms = std::max<std::int64_t>(0, t - *since);
  if (window_.is_quiet(t)) {
    n.state = "quiet";
    n.reason = "quiet for " + seconds_text(n.quiet_for_ms);
    return n;
  }
  switch (classify(*latest_, options_.window.policy)) {
    case SampleLoad::kQuiet:
      n.state = "settling";
      n.reason = "quiet for " + seconds_text(n.quiet_for_ms) + " of the " + seconds_text(options_.window.hold_ms) +
                 " hold";
      break;
    case SampleLoad::kBusy:
      n.state = "contended";
      n.reason = busy_reason(*latest_, options_.window.policy);
      break;
    case SampleLoad::kUnknown:
      n.state = "unknown";
      n.reason = "the reading is incomplete (process list, per-process SM% or clock reasons unknown)";
      break;
  }
  return n;
}

}  // namespace qgate::cotenant
