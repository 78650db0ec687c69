// The one mapping from what the application layer and the store throw to a gRPC status, for every
// service adapter of qgated.
#pragma once

#include <grpcpp/grpcpp.h>

#include <exception>
#include <string>

#include "qgate/db/store_error.h"
#include "qgate/jobs/application_error.h"

namespace qgate::server {

/// Runs `fn` (which returns a grpc::Status), turning ApplicationError, StoreError and any other
/// exception into a status.
template <typename Fn>
grpc::Status guarded_status(Fn&& fn) {
  try {
    return fn();
  } catch (const jobs::ApplicationError& e) {
    switch (e.kind()) {
      case jobs::ApplicationErrorKind::InvalidArgument:
        return {grpc::StatusCode::INVALID_ARGUMENT, e.what()};
      case jobs::ApplicationErrorKind::NotFound:
        return {grpc::StatusCode::NOT_FOUND, e.what()};
      case jobs::ApplicationErrorKind::FailedPrecondition:
        return {grpc::StatusCode::FAILED_PRECONDITION, e.what()};
      case jobs::ApplicationErrorKind::ResourceExhausted:
        return {grpc::StatusCode::RESOURCE_EXHAUSTED, e.what()};
      case jobs::ApplicationErrorKind::PermissionDenied:
        return {grpc::StatusCode::PERMISSION_DENIED, e.what()};
    }
    return {grpc::StatusCode::INTERNAL, e.what()};
  } catch (const db::StoreError& e) {
    // Only a busy store is worth retrying at once; a full disk or a read-only file is not, and must
    // not read as "qgated is unreachable" on the client.
    const auto code = e.kind() == db::StoreErrorKind::Busy   ? grpc::StatusCode::UNAVAILABLE
                      : e.kind() == db::StoreErrorKind::Full ? grpc::StatusCode::RESOURCE_EXHAUSTED
                                                             : grpc::StatusCode::INTERNAL;
    return {code, std::string("qgated's database failed: ") + e.what()};
  } catch (const std::exception& e) {
    return {grpc::StatusCode::INTERNAL, e.what()};
  }
}

}  // namespace qgate::server
