// DaemonMetrics: the scheduler's counters and latency histograms, under one mutex.
#include "qgate/server/daemon_metrics.h"

#include <algorithm>

namespace qgate::server {

const std::vector<double>& DaemonMetrics::claim_bounds() {
  static const std::vector<double> bounds = {0.1, 0.5, 1, 2.5, 5, 15, 60, 300, 900, 3600, 14400};
  return bounds;
}

const std::vector<double>& DaemonMetrics::run_bounds() {
  static const std::vector<double> bounds = {1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200};
  return bounds;
}

const std::vector<double>& DaemonMetrics::statement_bounds() {
  static const std::vector<double> bounds = {0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02,
                                             0.05,    0.1,    0.2,   0.5,   1,     2.5,  10};
  return bounds;
}

DaemonMetrics::DaemonMetrics() {
  claim_.bounds = claim_bounds();
  claim_.cumulative.assign(claim_.bounds.size(), 0);
  run_.bounds = run_bounds();
  run_.cumulative.assign(run_.bounds.size(), 0);
  for (LatencyHistogram* h : {&statement_job_, &statement_empty_}) {
    h->bounds = statement_bounds();
    h->cumulative.assign(h->bounds.size(), 0);
  }
}

void DaemonMetrics::observe(LatencyHistogram& h, double seconds) {
  seconds = std::max(0.0, seconds);  // a clock set back between submit and claim is not a negative wait
  for (size_t i = 0; i < h.bounds.size(); ++i)
    if (seconds <= h.bounds[i]) ++h.cumulative[i];
  ++h.count;
  h.sum_s += seconds;
}

void DaemonMetrics::job_claimed(double waited_s) {
  std::lock_guard lock(mu_);
  ++claimed_;
  observe(claim_, waited_s);
}

void DaemonMetrics::job_finished(const std::string& end_state, double ran_s) {
  std::lock_guard lock(mu_);
  ++finished_[end_state];
  observe(run_, ran_s);
}

void DaemonMetrics::claim_statement(double took_s, bool found_job) {
  std::lock_guard lock(mu_);
  observe(found_job ? statement_job_ : statement_empty_, took_s);
}

void DaemonMetrics::claim_statement_failed() {
  std::lock_guard lock(mu_);
  ++statements_failed_;
}

DaemonMetrics::Snapshot DaemonMetrics::snapshot() const {
  Snapshot s;
  s.uptime_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  std::lock_guard lock(mu_);
  s.claimed = claimed_;
  s.finished = finished_;
  s.claim = claim_;
  s.run = run_;
  s.statement_job = statement_job_;
  s.statement_empty = statement_empty_;
  s.statements_failed = statements_failed_;
  return s;
}

}  // namespace qgate::server
