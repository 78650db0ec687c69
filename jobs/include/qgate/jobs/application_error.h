// ApplicationError: what the application layer (jobs_application.h) refuses and why, in terms the
// gRPC adapter maps to status codes without knowing the domain.
#pragma once

#include <stdexcept>
#include <string>

namespace qgate::jobs {

enum class ApplicationErrorKind {
  InvalidArgument,     // the request itself is wrong
  NotFound,            // it names a job or build that does not exist
  FailedPrecondition,  // valid, but not now (a job that has ended, a device that cannot see load)
  ResourceExhausted,   // a bound is reached (the queue is full)
  PermissionDenied,    // this daemon does not do it for anyone (command jobs without --allow-commands)
};

class ApplicationError : public std::runtime_error {
 public:
  ApplicationError(ApplicationErrorKind kind, const std::string& message)
      : std::runtime_error(message), kind_(kind) {}
  ApplicationErrorKind kind() const noexcept { return kind_; }

 private:
  ApplicationErrorKind kind_;
};

}  // namespace qgate::jobs
