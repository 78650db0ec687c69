// qgate.v1.Harness on gRPC's callback API: a thin adapter that authorizes, delegates each call to
// the application layer (jobs_application.h), and is the only place errors become grpc::Status.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include "qgate/cotenant/device_watch.h"
#include "qgate/db/store.h"
#include "qgate/server/daemon_options.h"
#include "qgate/jobs/daemon_hooks.h"
#include "qgate/server/device_description.h"
#include "qgate/server/event_hub.h"
#include "qgate/jobs/jobs_application.h"
#include "qgate/server/upload_deadlines.h"
#include "qgate/jobs/result_import.h"
#include "qgate/server/scheduler.h"
#include "qgate/jobs/series_changes.h"
#include "qgate/server/served_gpus.h"
#include "qgate/v1/harness.grpc.pb.h"

namespace qgate::server {

class HarnessService final : public v1::Harness::CallbackService {
 public:
  HarnessService(db::Store& store, EventHub& events, Scheduler& scheduler, const DaemonOptions& options,
                 DeviceDescription device);

  grpc::ServerReadReactor<v1::SubmitBuildRequest>* SubmitBuild(grpc::CallbackServerContext* context,
                                                               v1::SubmitBuildResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context, const v1::GetJobRequest* request,
                                   v1::Job* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context, const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context, const v1::CancelJobRequest* request,
                                      v1::Job* response) override;
  grpc::ServerWriteReactor<v1::JobEvent>* WatchJob(grpc::CallbackServerContext* context,
                                                   const v1::WatchJobRequest* request) override;
  grpc::ServerUnaryReactor* QueryTrend(grpc::CallbackServerContext* context, const v1::QueryTrendRequest* request,
                                       v1::QueryTrendResponse* response) override;
  grpc::ServerUnaryReactor* QueryChanges(grpc::CallbackServerContext* context, const v1::QueryChangesRequest* request,
                                         v1::QueryChangesResponse* response) override;
  grpc::ServerUnaryReactor* Compare(grpc::CallbackServerContext* context, const v1::CompareRequest* request,
                                    v1::CompareResponse* response) override;
  grpc::ServerUnaryReactor* ListBuilds(grpc::CallbackServerContext* context, const v1::ListBuildsRequest* request,
                                       v1::ListBuildsResponse* response) override;
  grpc::ServerUnaryReactor* GetDevice(grpc::CallbackServerContext* context, const v1::GetDeviceRequest* request,
                                      v1::DeviceStatus* response) override;
  /// Every served GPU (harness_devices.cpp); without set_gpus, the one GetDevice describes.
  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* context, const v1::ListDevicesRequest* request,
                                        v1::ListDevicesResponse* response) override;
  grpc::ServerUnaryReactor* Remeasure(grpc::CallbackServerContext* context, const v1::RemeasureRequest* request,
                                      v1::RemeasureResponse* response) override;
  grpc::ServerUnaryReactor* ImportResults(grpc::CallbackServerContext* context,
                                          const v1::ImportResultsRequest* request,
                                          v1::ImportResultsResponse* response) override;

  /// The daemon's always-on device reading (quiet windows, `qgate device`); none = unavailable.
  void set_device_watch(const cotenant::DeviceWatch* watch) { watch_ = watch; }
  /// The GPUs the daemon serves (qgated --gpus), for ListDevices.
  void set_gpus(const ServedGpus* gpus) { gpus_ = gpus; }

  /// Mutating calls are refused (FAILED_PRECONDITION) on a daemon that cannot write its database;
  /// on TCP they need `authorization: Bearer <token>`; OK when allowed.
  grpc::Status authorize(const grpc::CallbackServerContext* context) const;
  /// A command job needs the token on any transport, and a daemon that has one.
  grpc::Status authorize_command(const grpc::CallbackServerContext* context) const;
  /// Set by the daemon: whether it listens on TCP, and the token (empty: none configured).
  void set_auth(bool tcp, std::string token) {
    tcp_ = tcp;
    token_ = std::move(token);
  }
  /// Set by the daemon when it started on a database it cannot write: why (empty: writable).
  void set_read_only(std::string why) { read_only_ = std::move(why); }

  /// Validates a submit header; returns an INVALID_ARGUMENT status saying what is wrong.
  grpc::Status validate_header(const v1::SubmitHeader& header) const;
  /// Stores a finished upload and its job; used by the SubmitBuild reactor.
  grpc::Status accept_upload(const v1::SubmitHeader& header, const std::string& artifact_path,
                             const std::string& sha256, int64_t size, v1::SubmitBuildResponse* response);
  /// Stores a command job that takes no upload.
  grpc::Status accept_command(const v1::SubmitHeader& header, v1::SubmitBuildResponse* response);

 private:
  /// `authorization: Bearer <token>` against the daemon's token, compared in constant time.
  grpc::Status check_token(const grpc::CallbackServerContext* context) const;
  /// The live co-tenant state, with the count of jobs waiting for a quiet window.
  cotenant::DeviceNow device_now() const;

  db::Store& store_;
  EventHub& events_;
  Scheduler& scheduler_;
  const DaemonOptions& options_;
  DeviceDescription device_;
  jobs::ResultImporter importer_{store_};
  const cotenant::DeviceWatch* watch_ = nullptr;
  const ServedGpus* gpus_ = nullptr;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::unique_ptr<jobs::DaemonHooks> hooks_;  // the scheduler and the event hub, for the application
  jobs::JobSubmission submission_;
  jobs::JobQueries queries_;
  jobs::JobCancellation cancellation_;
  jobs::Remeasurement remeasurement_;
  jobs::BuildComparer comparer_;
  jobs::SeriesChanges changes_;
  std::atomic<int> open_watch_streams_{0};  // bounded by options_.max_streams
  std::atomic<int> open_uploads_{0};        // bounded by options_.max_uploads
  UploadDeadlines upload_deadlines_;        // each upload's --upload-timeout
  bool tcp_ = false;
  std::string token_;
  std::string read_only_;
};

}  // namespace qgate::server
