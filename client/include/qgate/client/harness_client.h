// The qgate.v1.Harness calls the CLI makes, each with its deadline and its error turned into an
// RpcError worded for the user; commands call these and never touch a grpc::Status.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "qgate/client/connection.h"
#include "qgate/v1/harness.grpc.pb.h"

namespace qgate::client {

class HarnessClient {
 public:
  explicit HarnessClient(ConnectionOptions options);

  /// Streams the header, then the file at `path` in 1 MiB chunks. header.size_bytes is set here
  /// from what is read, so the server's size check compares against the bytes actually sent.
  /// Streams the header, then the file at `path` in chunks; an empty path sends the header alone.
  v1::SubmitBuildResponse submit_build(v1::SubmitHeader header, const std::string& path);

  v1::Job get_job(std::int64_t job_id);
  v1::ListJobsResponse list_jobs(const v1::ListJobsRequest& request);
  v1::Job cancel_job(std::int64_t job_id);
  v1::ListBuildsResponse list_builds(const v1::ListBuildsRequest& request);
  v1::DeviceStatus get_device();
  /// Every GPU the daemon serves and, on a store the fleet shares, every other daemon's as last
  /// published; request.host keeps one host's. A daemon without ListDevices answers with its one
  /// GetDevice, kept only when it is of request.host (when given).
  std::vector<v1::DeviceStatus> list_devices(const v1::ListDevicesRequest& request = {});
  /// The whole answer: every page, each asked with the previous page's token (docs/trends.md,
  /// "Pages"), its points in order and no next_page_token. A daemon without pages answers in one.
  v1::QueryTrendResponse query_trend(const v1::QueryTrendRequest& request);
  /// One page: the request as it is (page_size, page_token), the answer with its next_page_token.
  v1::QueryTrendResponse query_trend_page(const v1::QueryTrendRequest& request);
  v1::QueryChangesResponse query_changes(const v1::QueryChangesRequest& request);
  v1::CompareResponse compare(const v1::CompareRequest& request);
  v1::RemeasureResponse remeasure(const v1::RemeasureRequest& request);
  v1::ImportResultsResponse import_results(const v1::ImportResultsRequest& request);

  /// Calls `on_event` for each event until the job ends. No deadline: a job runs as long as its
  /// pair budget needs; a dead server still ends the stream with UNAVAILABLE.
  void watch_job(std::int64_t job_id, const std::function<void(const v1::JobEvent&)>& on_event);

 private:
  [[noreturn]] void fail(const grpc::Status& status) const;

  ConnectionOptions options_;
  std::unique_ptr<v1::Harness::Stub> stub_;
};

}  // namespace qgate::client
