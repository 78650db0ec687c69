// How the CLI reaches qgated: one function makes the channel (so TLS or a token can be added in one
// place later), one sets the per-call deadline, and one turns a failed call into the single line
// the user sees.
#pragma once

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include <grpcpp/grpcpp.h>

namespace qgate::client {

struct ConnectionOptions {
  std::string address;                        // as the user gave it, for messages
  std::chrono::milliseconds timeout{30'000};  // deadline of each unary call (--timeout)
  std::string token;                          // sent as "authorization: Bearer <token>" when set
  std::string tls_ca_pem;                     // when set: TLS, verifying qgated's certificate with it
};

/// A channel to `address` (already normalized by normalize_address). Insecure for now: qgated
/// listens on a per-user unix socket by default.
std::shared_ptr<grpc::Channel> make_channel(const std::string& address,
                                            const ConnectionOptions& options);

/// Sets the deadline of one call to now + options.timeout, and attaches the token when there is one.
void set_deadline(grpc::ClientContext& context, const ConnectionOptions& options);
/// Attaches the token (if any) to a call that has no deadline (WatchJob).
void add_credentials(grpc::ClientContext& context, const ConnectionOptions& options);

/// A failed RPC, already worded for the user (see describe_rpc_error).
class RpcError : public std::runtime_error {
 public:
  RpcError(grpc::StatusCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  grpc::StatusCode code() const { return code_; }

 private:
  grpc::StatusCode code_;
};

/// One line, no newline: UNAVAILABLE says how to start qgated; INVALID_ARGUMENT, NOT_FOUND,
/// RESOURCE_EXHAUSTED and FAILED_PRECONDITION show the server's message as it comes (it was written
/// for the user); the rest name the code.
std::string describe_rpc_error(const grpc::Status& status, const std::string& address,
                               std::chrono::milliseconds timeout);

/// The gRPC code's name ("UNAVAILABLE").
std::string status_code_name(grpc::StatusCode code);

}  // namespace qgate::client
