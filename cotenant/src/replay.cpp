// Traces: reading and writing JSON-lines samples, and playing them back on an injected clock.
#include "qgate/cotenant/replay.h"

#include <algorithm>
#include <istream>
#include <stdexcept>

namespace qgate::cotenant {

std::vector<Sample> read_trace(std::istream& in) {
  std::vector<Sample> samples;
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    try {
      samples.push_back(sample_from_json_line(line));
    } catch (const std::invalid_argument& error) {
      throw std::invalid_argument("trace line " + std::to_string(number) + ": " + error.what());
    }
  }
  return samples;
}

std::vector<Sample> load_trace(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open trace " + path.string());
  return read_trace(in);
}

TraceRecorder::TraceRecorder(std::ostream& out) : out_(&out) {}

TraceRecorder::TraceRecorder(const std::filesystem::path& path) : file_(path, std::ios::app), out_(&file_) {
  if (!file_) throw std::runtime_error("cannot open trace " + path.string() + " for writing");
}

void TraceRecorder::write(const Sample& sample) {
  const std::string line = to_json_line(sample);
  std::lock_guard lock(mutex_);
  *out_ << line << '\n';
  out_->flush();
  ++lines_;
}

std::size_t TraceRecorder::lines_written() const {
  std::lock_guard lock(mutex_);
  return lines_;
}

ReplaySampler::ReplaySampler(std::vector<Sample> trace, const Clock& clock, ReplayOptions options)
    : trace_(std::move(trace)), clock_(clock), options_(options), start_ms_(clock.now_ms()) {
  std::stable_sort(trace_.begin(), trace_.end(), [](const Sample& a, const Sample& b) { return a.t_ms < b.t_ms; });
}

bool ReplaySampler::available() const { return !trace_.empty(); }

std::string ReplaySampler::unavailable_reason() const { return trace_.empty() ? "the replayed trace is empty" : ""; }

void ReplaySampler::restart() { start_ms_.store(clock_.now_ms()); }

std::int64_t ReplaySampler::offset_ms() const { return clock_.now_ms() - start_ms_.load(); }

std::optional<Sample> ReplaySampler::read(const std::set<int>& own_pids) {
  if (trace_.empty()) return std::nullopt;
  const std::int64_t now = clock_.now_ms();
  const std::int64_t offset = now - start_ms_.load();
  if (offset < 0) return std::nullopt;
  const std::int64_t t0 = trace_.front().t_ms;
  if (options_.stop_at_end && offset > trace_.back().t_ms - t0) return std::nullopt;
  // The last sample at or before the offset.
  const auto after = std::upper_bound(trace_.begin(), trace_.end(), t0 + offset,
                                      [](std::int64_t t, const Sample& s) { return t < s.t_ms; });
  Sample sample = *std::prev(after);
  sample.t_ms = now;
  std::erase_if(sample.foreign, [&](const ForeignProcess& p) { return own_pids.contains(p.pid); });
  return sample;
}

std::optional<Sample> RecordingSampler::read(const std::set<int>& own_pids) {
  auto sample = inner_.read(own_pids);
  if (sample) recorder_.write(*sample);
  return sample;
}

}  // namespace qgate::cotenant
