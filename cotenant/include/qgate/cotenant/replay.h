// Recorded traces of samples (JSON lines) and a sampler that plays one back on an injected clock.
#pragma once

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iosfwd>
#include <mutex>
#include <vector>

#include "qgate/cotenant/clock.h"
#include "qgate/cotenant/sampler.h"

namespace qgate::cotenant {

/// Parses a trace: one to_json_line(Sample) per line; blank lines and lines starting with '#' are
/// skipped. Throws std::invalid_argument naming the line number of a bad line.
std::vector<Sample> read_trace(std::istream& in);
/// read_trace of a file; throws std::runtime_error when it cannot be opened.
std::vector<Sample> load_trace(const std::filesystem::path& path);

/// Writes samples as a trace (qgated --record-samples). Each line is flushed as it is written, so a
/// trace survives a crash of the writer up to its last sample. Thread-safe.
class TraceRecorder {
 public:
  explicit TraceRecorder(std::ostream& out);
  /// Appends to the file (creating it); throws std::runtime_error when it cannot be opened.
  explicit TraceRecorder(const std::filesystem::path& path);
  void write(const Sample& sample);
  std::size_t lines_written() const;

 private:
  std::ofstream file_;
  std::ostream* out_;
  mutable std::mutex mutex_;
  std::size_t lines_ = 0;
};

struct ReplayOptions {
  /// After the trace's last sample: false (default) keeps answering with the last sample (the state
  /// it recorded persists); true answers nullopt, as a sampler whose device went away.
  bool stop_at_end = false;
};

/// Plays a trace back: read() at clock time T answers the trace's last sample whose offset from the
/// trace's first sample is <= T - start, where start is the clock's time at construction or restart().
/// The answer's t_ms is T (the reader's time), and own_pids are filtered out again at read time.
class ReplaySampler final : public Sampler {
 public:
  ReplaySampler(std::vector<Sample> trace, const Clock& clock, ReplayOptions options = {});
  std::optional<Sample> read(const std::set<int>& own_pids) override;
  bool available() const override;
  std::string unavailable_reason() const override;
  /// Replays from the beginning, anchored at the clock's current time.
  void restart();
  /// How far into the trace the clock is (clock time - start).
  std::int64_t offset_ms() const;

 private:
  std::vector<Sample> trace_;  // sorted by t_ms
  const Clock& clock_;
  ReplayOptions options_;
  std::atomic<std::int64_t> start_ms_;
};

/// Passes reads through to another sampler and records every reading it returns.
class RecordingSampler final : public Sampler {
 public:
  RecordingSampler(Sampler& inner, TraceRecorder& recorder) : inner_(inner), recorder_(recorder) {}
  std::optional<Sample> read(const std::set<int>& own_pids) override;
  bool available() const override { return inner_.available(); }
  std::string unavailable_reason() const override { return inner_.unavailable_reason(); }

 private:
  Sampler& inner_;
  TraceRecorder& recorder_;
};

}  // namespace qgate::cotenant
