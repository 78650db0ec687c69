// `qgate health`: one grpc.health.v1.Health/Check call on the channel every other command uses
// (unix socket or TCP, TLS and the deadline from the same options).
#include "qgate/client/health.h"

#include <fmt/format.h>

#include "grpc/health/v1/health.grpc.pb.h"
#include "qgate/client/exit_codes.h"

namespace qgate::client {

namespace {

std::string subject(const std::string& address, const std::string& service) {
  return service.empty() ? fmt::format("qgated at {}", address)
                         : fmt::format("service {} of qgated at {}", service, address);
}

}  // namespace

HealthReport check_health(const ConnectionOptions& options, const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(make_channel(options.address, options));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::ClientContext context;
  set_deadline(context, options);
  const grpc::Status status = stub->Check(&context, request, &response);
  const std::string who = subject(options.address, service);
  if (status.error_code() == grpc::NOT_FOUND)
    return {HealthState::ServiceUnknown, fmt::format("{}: unknown service (NOT_FOUND)", who)};
  if (status.error_code() == grpc::UNIMPLEMENTED)
    return {HealthState::NotServing, fmt::format("{}: answers no health checks (UNIMPLEMENTED)", who)};
  if (!status.ok())
    return {HealthState::Unreachable, describe_rpc_error(status, options.address, options.timeout)};
  switch (response.status()) {
    case grpc::health::v1::HealthCheckResponse::SERVING:
      return {HealthState::Serving, fmt::format("{}: SERVING", who)};
    case grpc::health::v1::HealthCheckResponse::NOT_SERVING:
      return {HealthState::NotServing, fmt::format("{}: NOT_SERVING", who)};
    case grpc::health::v1::HealthCheckResponse::SERVICE_UNKNOWN:
      return {HealthState::ServiceUnknown, fmt::format("{}: SERVICE_UNKNOWN", who)};
    default:
      return {HealthState::NotServing, fmt::format("{}: status {} (not SERVING)", who,
                                                   static_cast<int>(response.status()))};
  }
}

int health_exit_code(HealthState state) {
  switch (state) {
    case HealthState::Serving: return kExitOk;
    case HealthState::NotServing:
    case HealthState::ServiceUnknown: return kExitNotServing;
    case HealthState::Unreachable: break;
  }
  return kExitError;
}

}  // namespace qgate::client
