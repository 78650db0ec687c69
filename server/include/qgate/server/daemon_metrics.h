// DaemonMetrics: the counters qgated keeps about its own work, for /metrics (docs/operations.md):
// how long a job waited from submit to a GPU claiming it, how long it ran once claimed, and how many
// jobs were claimed and finished, by the state they ended in; and how long each claim statement the
// scheduler sends to the store took, and whether it found a job. The scheduler records; /metrics reads
// a snapshot. Thread-safe: every GPU's lane records from its own thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace qgate::server {

/// Observations counted into fixed buckets, as a Prometheus histogram holds them.
struct LatencyHistogram {
  std::vector<double> bounds;             // upper bounds in seconds, increasing
  std::vector<std::uint64_t> cumulative;  // observations <= bounds[i]
  std::uint64_t count = 0;
  double sum_s = 0;
};

class DaemonMetrics {
 public:
  /// The claim latency's buckets: from a job claimed at once to one that waited hours in the queue.
  static const std::vector<double>& claim_bounds();
  /// The run latency's buckets: from a parity job of seconds to a long A/B gate.
  static const std::vector<double>& run_bounds();
  /// The claim statement's buckets: from a local SQLite read to a PostgreSQL server under load.
  static const std::vector<double>& statement_bounds();

  DaemonMetrics();

  /// A lane claimed a job `waited_s` after it was submitted.
  void job_claimed(double waited_s);
  /// A claimed job came back from its runner after `ran_s`, in `end_state` ("done", "failed", ...,
  /// or "interrupted" when the daemon stopped under it).
  void job_finished(const std::string& end_state, double ran_s);
  /// One claim statement (Store::claim_next_job) answered after `took_s`, with a job or without.
  void claim_statement(double took_s, bool found_job);
  /// One claim statement failed (the store did not answer); its time is not observed.
  void claim_statement_failed();

  struct Snapshot {
    double uptime_s = 0;
    std::uint64_t claimed = 0;
    std::map<std::string, std::uint64_t> finished;  // by end state
    LatencyHistogram claim;
    LatencyHistogram run;
    LatencyHistogram statement_job;    // claim statements that claimed a job
    LatencyHistogram statement_empty;  // those that found none
    std::uint64_t statements_failed = 0;
  };
  Snapshot snapshot() const;

 private:
  static void observe(LatencyHistogram& h, double seconds);

  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  mutable std::mutex mu_;
  std::uint64_t claimed_ = 0;
  std::map<std::string, std::uint64_t> finished_;
  LatencyHistogram claim_;
  LatencyHistogram run_;
  LatencyHistogram statement_job_;
  LatencyHistogram statement_empty_;
  std::uint64_t statements_failed_ = 0;
};

}  // namespace qgate::server
