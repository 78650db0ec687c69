// MetricsExposition: the daemon's state now and its counters, as /metrics.
#include "qgate/server/metrics_exposition.h"

#include <filesystem>
#include <map>
#include <vector>

#include "qgate/common/job_states.h"
#include "qgate/dashboards/prometheus_text.h"
#include "qgate/db/sqlite_store.h"
#include "qgate/jobs/jobs_application.h"
#include "qgate/server/device_status.h"
#include "qgate_revision.h"

namespace qgate::server {
namespace {

using dashboards::MetricType;
using dashboards::PrometheusText;

/// A co-tenant state in the words /metrics uses: the watch's own, and "unknown" for one that was
/// not sampled (no NVML, the CPU backend, sampling off).
std::string cotenant_word(const std::string& state) {
  if (state == "quiet" || state == "settling" || state == "contended") return state;
  return "unknown";
}

std::uintmax_t size_or_zero(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  return ec ? 0 : size;
}

}  // namespace

std::string MetricsExposition::text() const {
  const DaemonMetrics::Snapshot counted = metrics_.snapshot();
  // What the store says, read before anything is written: when it does not answer, the page still
  // answers, without the families read from it and with qgate_store_reachable 0.
  std::map<db::JobState, std::int64_t> by_state;
  jobs::QueueCounts queue;
  std::vector<v1::DeviceStatus> devices;
  bool store_answers = true;
  try {
    const jobs::JobQueries queries(store_);
    by_state = queries.counts_by_state();
    queue = queries.queue_counts();
    devices = DeviceStatusReport(store_, options_, gpus_, scheduler_).all(int64_t(counted.uptime_s), QGATE_VERSION);
  } catch (const std::exception&) {
    store_answers = false;
  }
  const bool reachable = store_answers && (outage_ == nullptr || outage_->reachable());
  PrometheusText out;

  out.family("qgate_build_info", MetricType::Gauge,
             "Always 1; the labels say which qgated this is and the database schema it writes.");
  out.sample({{"version", QGATE_VERSION},
              {"commit", QGATE_COMMIT},
              {"schema_version", std::to_string(db::schema_version_known())}},
             1);
  out.family("qgate_uptime_seconds", MetricType::Gauge, "Seconds since qgated started.");
  out.sample({}, counted.uptime_s);

  // The jobs and the queue, read as ListJobs and GetDevice read them.
  if (store_answers) {
    out.family("qgate_jobs", MetricType::Gauge, "Jobs in the store, by state.");
    for (const auto& [state, count] : by_state)
      out.sample({{"state", std::string(qgate::to_string(state))}}, double(count));
    out.family("qgate_queue_depth", MetricType::Gauge, "Jobs queued, those waiting for a quiet window included.");
    out.sample({}, double(queue.queued));
    out.family("qgate_queue_waiting_quiet", MetricType::Gauge, "Queued jobs that wait for a quiet window.");
    out.sample({}, double(queue.waiting_quiet));
  }

  // What the scheduler counted since qgated started.
  out.family("qgate_jobs_claimed_total", MetricType::Counter, "Jobs a GPU's scheduler claimed from the queue.");
  out.sample({}, double(counted.claimed));
  out.family("qgate_jobs_finished_total", MetricType::Counter,
             "Claimed jobs that came back from their runner, by the state they ended in (interrupted: the daemon "
             "stopped under them).");
  for (const auto& [state, count] : counted.finished) out.sample({{"state", state}}, double(count));
  out.family("qgate_job_claim_latency_seconds", MetricType::Histogram,
             "Seconds from a job's submit to a GPU's scheduler claiming it.");
  out.histogram({}, counted.claim.bounds, counted.claim.cumulative, counted.claim.count, counted.claim.sum_s);
  out.family("qgate_job_run_duration_seconds", MetricType::Histogram,
             "Seconds from a job's claim to its end (parity, timed runs and verdict).");
  out.histogram({}, counted.run.bounds, counted.run.cumulative, counted.run.count, counted.run.sum_s);
  out.family("qgate_claim_statements_total", MetricType::Counter,
             "Claim statements the schedulers sent to the store, by what they found: a job, none (empty), or "
             "no answer (error). An idle GPU sends one or two a second.");
  out.sample({{"result", "job"}}, double(counted.statement_job.count));
  out.sample({{"result", "empty"}}, double(counted.statement_empty.count));
  out.sample({{"result", "error"}}, double(counted.statements_failed));
  out.family("qgate_claim_statement_duration_seconds", MetricType::Histogram,
             "Seconds one claim statement took the store to answer, by what it found (job or empty; failed ones "
             "left out).");
  const LatencyHistogram& job = counted.statement_job;
  const LatencyHistogram& empty = counted.statement_empty;
  out.histogram({{"result", "job"}}, job.bounds, job.cumulative, job.count, job.sum_s);
  out.histogram({{"result", "empty"}}, empty.bounds, empty.cumulative, empty.count, empty.sum_s);

  // Each served GPU, as ListDevices reports it (none while the store does not answer).
  if (store_answers) write_gpus(out, devices);

  out.family("qgate_store_reachable", MetricType::Gauge,
             "1 while the store answers the daemon (its reads here and the scheduler's claims), 0 while it does not.");
  out.sample({}, reachable ? 1 : 0);
  out.family("qgate_store_size_bytes", MetricType::Gauge,
             "Bytes on disk of the SQLite database (file=\"database\") and its write-ahead log (file=\"wal\").");
  out.sample({{"file", "database"}}, double(size_or_zero(options_.db_path)));
  out.sample({{"file", "wal"}}, double(size_or_zero(options_.db_path + "-wal")));
  return out.text();
}

void MetricsExposition::write_gpus(PrometheusText& out, const std::vector<v1::DeviceStatus>& devices) {
  out.family("qgate_gpu_info", MetricType::Gauge, "Always 1 for each GPU qgated serves; the labels describe it.");
  for (const v1::DeviceStatus& d : devices)
    out.sample({{"gpu", std::to_string(d.device())}, {"name", d.name()}, {"uuid", d.uuid()}}, 1);
  out.family("qgate_gpu_busy", MetricType::Gauge, "1 while a job runs on the GPU (or a split job holds it), else 0.");
  for (const v1::DeviceStatus& d : devices)
    out.sample({{"gpu", std::to_string(d.device())}}, d.running_job_id() != 0 || d.split_job_id() != 0 ? 1 : 0);
  out.family("qgate_gpu_cotenant_state", MetricType::Gauge,
             "1 for the GPU's co-tenant state now (quiet, settling, contended, unknown), 0 for the others.");
  for (const v1::DeviceStatus& d : devices) {
    const std::string now = cotenant_word(d.now().state());
    for (const char* state : {"quiet", "settling", "contended", "unknown"})
      out.sample({{"gpu", std::to_string(d.device())}, {"state", state}}, now == state ? 1 : 0);
  }
  out.family("qgate_gpu_foreign_sm_percent", MetricType::Gauge,
             "SM utilisation of other processes on the GPU at the last reading, summed over those whose share is "
             "known; no sample when the GPU is not sampled.");
  for (const v1::DeviceStatus& d : devices) {
    if (d.now().sample_unix_ms() == 0) continue;
    double sm = 0;
    for (const v1::ForeignProcess& p : d.now().foreign())
      if (p.sm_percent() >= 0) sm += p.sm_percent();
    out.sample({{"gpu", std::to_string(d.device())}}, sm);
  }
  out.family("qgate_gpu_foreign_processes", MetricType::Gauge,
             "Other processes on the GPU at the last reading; no sample when the GPU is not sampled.");
  for (const v1::DeviceStatus& d : devices)
    if (d.now().sample_unix_ms() != 0) out.sample({{"gpu", std::to_string(d.device())}}, d.now().foreign_size());
}

}  // namespace qgate::server
