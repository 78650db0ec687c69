// HarnessService's ListDevices: every GPU the daemon serves, each with its queue and sampler state.
#include <chrono>

#include "qgate/server/device_status.h"
#include "qgate/server/grpc_status.h"
#include "qgate/server/harness_service.h"

namespace qgate::server {

grpc::ServerUnaryReactor* HarnessService::ListDevices(grpc::CallbackServerContext* context,
                                                      const v1::ListDevicesRequest* request,
                                                      v1::ListDevicesResponse* response) {
  const grpc::Status status = guarded_status([&]() -> grpc::Status {
    const int64_t uptime_s =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_).count();
    const auto wanted = [&](const std::string& host) { return request->host().empty() || request->host() == host; };
    if (gpus_) {
      for (v1::DeviceStatus& d : DeviceStatusReport(store_, options_, *gpus_, scheduler_).all(uptime_s, QGATE_VERSION))
        if (wanted(d.host())) *response->add_devices() = std::move(d);
      if (!options_.fleet) return grpc::Status::OK;
      // The fleet's other daemons, as they last published their GPUs: those heard from within
      // three leases (a daemon renews every quarter lease).
      const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
      const int64_t since = now_ms - 3 * int64_t(options_.lease_s) * 1000;
      for (const db::FleetGpu& gpu : store_.list_fleet_gpus(since))
        if (gpu.claimant != options_.claimant_id && wanted(gpu.host))
          *response->add_devices() = DeviceStatusReport::from_published(gpu);
      return grpc::Status::OK;
    }
    // A service without the daemon's GPUs (tests): the one device GetDevice describes.
    v1::DeviceStatus* d = response->add_devices();
    d->set_backend(options_.backend);
    d->set_device(options_.gpu);
    d->set_name(device_.name);
    d->set_uuid(device_.uuid);
    d->set_qgate_version(QGATE_VERSION);
    d->set_running_job_id(scheduler_.running_job());
    d->set_cotenant(device_.cotenant);
    d->set_uptime_s(uptime_s);
    DeviceStatusReport::fill_cotenant_now(watch_, 0, d->mutable_now());
    return grpc::Status::OK;
  });
  auto* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

}  // namespace qgate::server
