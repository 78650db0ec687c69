// DeviceStatusReport: each served GPU's description, queue and co-tenant state now.
#include "qgate/server/device_status.h"

#include <map>

#include "qgate/cotenant/sample.h"
#include "qgate/jobs/gpu_choice.h"

namespace qgate::server {

// The application layer (jobs/) this file uses.
using jobs::kAnyGpu;

std::vector<v1::DeviceStatus> DeviceStatusReport::all(int64_t uptime_s, const std::string& version) const {
  // One read of the queue: jobs pinned to each GPU, and those any GPU may take.
  db::JobFilter queued;
  queued.state = db::JobState::Queued;
  queued.limit = options_.max_queued_jobs + 1;
  std::map<int, int> pinned;
  int any = 0, waiting_quiet = 0;
  for (const db::Job& job : store_.list_jobs(queued)) {
    if (job.quiet_only) ++waiting_quiet;
    if (job.device == kAnyGpu) ++any;
    else ++pinned[job.device];
  }
  std::vector<v1::DeviceStatus> out;
  for (const ServedGpu& gpu : gpus_.pool().gpus()) {
    const DeviceDescription& d = gpus_.description(gpu.ordinal);
    v1::DeviceStatus s;
    s.set_backend(options_.backend);
    s.set_device(gpu.ordinal);
    s.set_name(d.name);
    s.set_uuid(d.uuid);
    s.set_memory_bytes(d.memory_bytes);
    s.set_qgate_version(version);
    s.set_host(d.host);
    s.set_driver_version(d.driver_version);
    s.set_queued_jobs(pinned[gpu.ordinal]);
    s.set_queued_any_gpu(any);
    s.set_running_job_id(scheduler_.running_job_on(gpu.ordinal));
    if (s.running_job_id() == 0) s.set_running_job_id(gpus_.pool().running_job(gpu.ordinal));
    s.set_split_job_id(gpus_.pool().split_job(gpu.ordinal));
    s.set_cotenant(d.cotenant);
    s.set_uptime_s(uptime_s);
    for (const std::string& label : options_.labels) s.add_labels(label);
    fill_cotenant_now(gpu.watch, waiting_quiet, s.mutable_now());
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<db::FleetGpu> DeviceStatusReport::published(const std::string& version) const {
  std::vector<db::FleetGpu> out;
  for (const ServedGpu& gpu : gpus_.pool().gpus()) {
    const DeviceDescription& d = gpus_.description(gpu.ordinal);
    db::FleetGpu f;
    f.ordinal = gpu.ordinal;
    f.host = d.host;
    f.name = d.name;
    f.uuid = d.uuid;
    f.labels = options_.labels;
    f.backend = options_.backend;
    f.qgate_version = version;
    int64_t running = scheduler_.running_job_on(gpu.ordinal);
    if (running == 0) running = gpus_.pool().running_job(gpu.ordinal);
    if (running != 0) f.running_job_id = running;
    v1::CotenantNow now;
    fill_cotenant_now(gpu.watch, 0, &now);
    f.cotenant_state = now.state();
    f.cotenant_reason = now.reason();
    out.push_back(std::move(f));
  }
  return out;
}

v1::DeviceStatus DeviceStatusReport::from_published(const db::FleetGpu& gpu) {
  v1::DeviceStatus s;
  s.set_host(gpu.host);
  s.set_device(gpu.ordinal);
  s.set_name(gpu.name);
  s.set_uuid(gpu.uuid);
  for (const std::string& label : gpu.labels) s.add_labels(label);
  s.set_backend(gpu.backend);
  s.set_qgate_version(gpu.qgate_version);
  s.set_running_job_id(gpu.running_job_id.value_or(0));
  s.set_cotenant(gpu.cotenant_state);
  s.mutable_now()->set_state(gpu.cotenant_state);
  s.mutable_now()->set_reason(gpu.cotenant_reason);
  s.set_published_unix_ms(gpu.seen_ms);
  return s;
}

void DeviceStatusReport::fill_cotenant_now(const cotenant::DeviceWatch* watch, int64_t waiting_jobs,
                                           v1::CotenantNow* out) {
  out->set_waiting_jobs(int32_t(waiting_jobs));
  if (!watch) {
    out->set_state("unavailable");
    out->set_reason("no device watch");
    out->set_ms_since_quiet_window(-1);
    return;
  }
  const cotenant::DeviceNow now = watch->now();
  out->set_state(now.state);
  out->set_reason(now.reason);
  out->set_policy(now.policy);
  out->set_quiet_for_ms(now.quiet_for_ms);
  out->set_ms_since_quiet_window(now.ms_since_quiet.value_or(-1));
  if (!now.latest) return;
  const cotenant::Sample& s = *now.latest;
  out->set_sample_unix_ms(s.t_ms);
  for (const cotenant::ForeignProcess& p : s.foreign) {
    auto* f = out->add_foreign();
    f->set_pid(p.pid);
    f->set_name(p.name);
    f->set_sm_percent(p.sm_percent.value_or(-1));
    f->set_used_memory_bytes(int64_t(p.used_memory_bytes.value_or(0)));
  }
  out->set_device_util_percent(s.device_util.value_or(-1));
  out->set_sm_clock_mhz(int32_t(s.sm_clock_mhz.value_or(0)));
  out->set_max_sm_clock_mhz(int32_t(s.max_sm_clock_mhz.value_or(0)));
  if (s.clock_event_reasons) {
    for (uint64_t bit = 1; bit != 0; bit <<= 1)
      if (*s.clock_event_reasons & bit) out->add_clock_event_reasons(cotenant::clock_event_name(bit));
  }
  out->set_temperature_c(int32_t(s.temperature_c.value_or(0)));
  out->set_power_w(s.power_w.value_or(0));
}

}  // namespace qgate::server
