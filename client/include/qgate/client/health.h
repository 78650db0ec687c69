// `qgate health`: asks a daemon the standard gRPC health question (grpc.health.v1.Health/Check)
// and turns the answer into an exit code and one line, for container and Kubernetes probes.
#pragma once

#include <string>

#include "qgate/client/connection.h"

namespace qgate::client {

/// What a health check found.
enum class HealthState {
  Serving,         // the daemon answered SERVING
  NotServing,      // it answered NOT_SERVING (shutting down) or UNKNOWN
  ServiceUnknown,  // it does not know the service asked about
  Unreachable,     // no answer: nothing listens, the deadline passed, TLS or the transport failed
};

struct HealthReport {
  HealthState state = HealthState::Unreachable;
  std::string line;  // one line for the user, without a newline
};

/// Checks `service` ("" = the daemon as a whole) at options.address within options.timeout.
HealthReport check_health(const ConnectionOptions& options, const std::string& service);

/// The exit code of `qgate health`: 0 serving, 1 answered but not serving (or the service is
/// unknown), 3 no answer.
int health_exit_code(HealthState state);

}  // namespace qgate::client
