// The CLI's calls to qgate.v1.Harness: sync stub, one deadline per unary call (see harness_client.h).
#include "qgate/client/harness_client.h"

#include <fstream>
#include <vector>

#include <fmt/format.h>

namespace qgate::client {

namespace {
constexpr std::size_t kChunkBytes = 1 << 20;  // 1 MiB: well under gRPC's 4 MiB message limit
}  // namespace

HarnessClient::HarnessClient(ConnectionOptions options)
    : options_(std::move(options)),
      stub_(v1::Harness::NewStub(make_channel(options_.address, options_))) {}

void HarnessClient::fail(const grpc::Status& status) const {
  throw RpcError(status.error_code(),
                 describe_rpc_error(status, options_.address, options_.timeout));
}

v1::SubmitBuildResponse HarnessClient::submit_build(v1::SubmitHeader header,
                                                    const std::string& path) {
  // No path: a job that takes no upload (a command job), sent as its header alone.
  std::ifstream file;
  std::streamoff size = 0;
  if (!path.empty()) {
    file.open(path, std::ios::binary | std::ios::ate);
    if (!file) throw std::runtime_error(fmt::format("cannot open {}", path));
    size = file.tellg();
    file.seekg(0);
  }
  header.set_size_bytes(static_cast<std::int64_t>(size));

  grpc::ClientContext context;
  set_deadline(context, options_);
  v1::SubmitBuildResponse response;
  auto writer = stub_->SubmitBuild(&context, &response);

  v1::SubmitBuildRequest request;
  *request.mutable_header() = std::move(header);
  // A failed Write means the server has already ended the call (a bad header, say); Finish()
  // then carries its reason, which is what the user needs, so stop sending and ask for it.
  bool open = writer->Write(request);
  std::vector<char> buffer(kChunkBytes);
  std::int64_t sent = 0;
  while (open && sent < size) {
    file.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize got = file.gcount();
    if (got <= 0) {
      context.TryCancel();
      writer->Finish();
      throw std::runtime_error(fmt::format("{}: read failed after {} of {} bytes", path, sent,
                                           static_cast<std::int64_t>(size)));
    }
    request.set_chunk(buffer.data(), static_cast<std::size_t>(got));
    open = writer->Write(request);
    sent += got;
  }
  if (open) writer->WritesDone();
  const grpc::Status status = writer->Finish();
  if (!status.ok()) fail(status);
  return response;
}

v1::Job HarnessClient::get_job(std::int64_t job_id) {
  grpc::ClientContext context;
  set_deadline(context, options_);
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  v1::Job job;
  if (auto status = stub_->GetJob(&context, request, &job); !status.ok()) fail(status);
  return job;
}

v1::ListJobsResponse HarnessClient::list_jobs(const v1::ListJobsRequest& request) {
  grpc::ClientContext context;
  set_deadline(context, options_);
  v1::ListJobsResponse response;
  if (auto status = stub_->ListJobs(&context, request, &response); !status.ok()) fail(status);
  return response;
}

v1::Job HarnessClient::cancel_job(std::int64_t job_id) {
  grpc::ClientContext context;
  set_deadline(context, options_);
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  v1::Job job;
  if (auto status = stub_->CancelJob(&context, request, &job); !status.ok()) fail(status);
  return job;
}

v1::ListBuildsResponse HarnessClient::list_builds(const v1::ListBuildsRequest& request) {
  grpc::ClientContext context;
  set_deadline(context, options_);
  v1::ListBuildsResponse response;
  if (auto status = stub_->ListBuilds(&context, request, &response); !status.ok()) fail(status);
  return response;
}

v1::RemeasureResponse HarnessClient::remeasure(const v1::RemeasureRequest& request) {
  grpc::ClientContext context;
  set_deadline(context, options_);
  v1::RemeasureResponse response;
  if (auto status = stub_->Remeasure(&context, request, &response); !status.ok()) fail(status);
  return response;
}

v1::ImportResultsResponse HarnessClient::import_results(const v1::ImportResultsRequest& request) {
  grpc::ClientContext context;
  set_deadline(context, options_);
  v1::ImportResultsResponse response;
  if (auto status = stub_->ImportResults(&context, request, &response); !status.ok()) fail(status);
  return response;
}

v1::DeviceStatus HarnessClient::get_device() {
  grpc::ClientContext context;
  set_deadline(context, options_);
  v1::DeviceStatus device;
  if (auto status = stub_->GetDevice(&context, v1::GetDeviceRequest{}, &device); !status.ok())
    fail(status);
  return device;
}

std::vector<v1::DeviceStatus> HarnessClient::list_devices(const v1::ListDevicesRequest& request) {
  grpc::ClientContext context;
  set_deadline(context, options_);
  v1::ListDevicesResponse response;
  const grpc::Status status = stub_->ListDevices(&context, request, &response);
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    // An old daemon: its own GPU only, which the host filter keeps or drops here.
    v1::DeviceStatus device = get_device();
    if (!request.host().empty() && device.host() != request.host()) return {};
    return {std::move(device)};
  }
  if (!status.ok()) fail(status);
  return {response.devices().begin(), response.devices().end()};
}

v1::QueryTrendResponse HarnessClient::query_trend_page(const v1::QueryTrendRequest& request) {
  grpc::ClientContext context;
  set_deadline(context, options_);
  v1::QueryTrendResponse response;
  if (auto status = stub_->QueryTrend(&context, request, &response); !status.ok()) fail(status);
  return response;
}

v1::QueryTrendResponse HarnessClient::query_trend(const v1::QueryTrendRequest& request) {
  v1::QueryTrendResponse whole = query_trend_page(request);
  v1::QueryTrendRequest next = request;
  std::string previous;
  while (!whole.next_page_token().empty()) {
    // A daemon that handed back the token it was given would loop for ever: stop on it.
    if (whole.next_page_token() == previous)
      throw std::runtime_error("QueryTrend: the daemon gave the same page token twice");
    previous = whole.next_page_token();
    next.set_page_token(previous);
    v1::QueryTrendResponse page = query_trend_page(next);
    for (auto& point : *page.mutable_points()) *whole.add_points() = std::move(point);
    whole.set_next_page_token(page.next_page_token());
  }
  return whole;
}

v1::QueryChangesResponse HarnessClient::query_changes(const v1::QueryChangesRequest& request) {
  grpc::ClientContext context;
  set_deadline(context, options_);
  v1::QueryChangesResponse response;
  if (auto status = stub_->QueryChanges(&context, request, &response); !status.ok()) fail(status);
  return response;
}

v1::CompareResponse HarnessClient::compare(const v1::CompareRequest& request) {
  grpc::ClientContext context;
  set_deadline(context, options_);
  v1::CompareResponse response;
  if (auto status = stub_->Compare(&context, request, &response); !status.ok()) fail(status);
  return response;
}

void HarnessClient::watch_job(std::int64_t job_id,
                              const std::function<void(const v1::JobEvent&)>& on_event) {
  grpc::ClientContext context;
  add_credentials(context, options_);
  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  auto reader = stub_->WatchJob(&context, request);
  v1::JobEvent event;
  while (reader->Read(&event)) on_event(event);
  if (auto status = reader->Finish(); !status.ok()) fail(status);
}

}  // namespace qgate::client
