// Channel, deadline and error wording of the CLI's calls to qgated (see connection.h).
#include "qgate/client/connection.h"

#include <fmt/format.h>

namespace qgate::client {

std::shared_ptr<grpc::Channel> make_channel(const std::string& address,
                                            const ConnectionOptions& options) {
  grpc::ChannelArguments args;
  // Trend exports of a long history outgrow gRPC's 4 MiB default answer size.
  args.SetMaxReceiveMessageSize(256 * 1024 * 1024);
  if (!options.tls_ca_pem.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_ca_pem;  // qgated's certificate must chain to this CA
    return grpc::CreateCustomChannel(address, grpc::SslCredentials(ssl), args);
  }
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

void set_deadline(grpc::ClientContext& context, const ConnectionOptions& options) {
  context.set_deadline(std::chrono::system_clock::now() + options.timeout);
  add_credentials(context, options);
}

void add_credentials(grpc::ClientContext& context, const ConnectionOptions& options) {
  // Metadata rather than call credentials: gRPC sends call credentials only over TLS, and a
  // token on a loopback TCP port without TLS is a configuration qgated accepts.
  if (!options.token.empty()) context.AddMetadata("authorization", "Bearer " + options.token);
}

std::string status_code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::OK: return "OK";
    case grpc::CANCELLED: return "CANCELLED";
    case grpc::UNKNOWN: return "UNKNOWN";
    case grpc::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::NOT_FOUND: return "NOT_FOUND";
    case grpc::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::UNAUTHENTICATED: return "UNAUTHENTICATED";
    case grpc::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::ABORTED: return "ABORTED";
    case grpc::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::INTERNAL: return "INTERNAL";
    case grpc::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::DATA_LOSS: return "DATA_LOSS";
    default: return fmt::format("code {}", static_cast<int>(code));
  }
}

namespace {

// The error line must stay one line, whatever gRPC puts in its details.
std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

}  // namespace

std::string describe_rpc_error(const grpc::Status& status, const std::string& address,
                               std::chrono::milliseconds timeout) {
  const std::string message = one_line(status.error_message());
  switch (status.error_code()) {
    case grpc::UNAVAILABLE:
      return fmt::format("cannot reach qgated at {}: {} (is it running? start it with qgated)",
                         address, message.empty() ? "unavailable" : message);
    case grpc::DEADLINE_EXCEEDED:
      return fmt::format("qgated at {} did not answer within {:.3g} s (raise --timeout)", address,
                         static_cast<double>(timeout.count()) / 1000.0);
    // The server words these for the user (bad spec, unknown job or build, queue full).
    case grpc::INVALID_ARGUMENT:
    case grpc::NOT_FOUND:
    case grpc::RESOURCE_EXHAUSTED:
    case grpc::FAILED_PRECONDITION:
    case grpc::ALREADY_EXISTS:
      if (!message.empty()) return message;
      return status_code_name(status.error_code());
    case grpc::UNIMPLEMENTED:
      return fmt::format("qgated at {} does not implement this call{} (is it older than this qgate?)",
                         address, message.empty() ? "" : ": " + message);
    default:
      return fmt::format("qgated call failed ({}){}", status_code_name(status.error_code()),
                         message.empty() ? "" : ": " + message);
  }
}

}  // namespace qgate::client
