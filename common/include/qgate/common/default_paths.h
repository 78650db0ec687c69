// Where qgated keeps its state and listens by default, shared by the daemon and the CLI so both
// agree without configuration: a per-user data dir holding the socket and the database.
#pragma once

#include <string>

namespace qgate::paths {

/// $QGATE_DATA_DIR, else $XDG_DATA_HOME/qgate, else $HOME/.local/share/qgate.
std::string default_data_dir();
/// <data dir>/qgated.sock
std::string default_socket_path();
/// "unix://<default_socket_path()>"
std::string default_server_address();
/// Normalizes what a user types: "unix:///p", "unix:/p", "/p" (a socket path) and "host:port"
/// become gRPC target strings; empty text is an error (returns "").
std::string to_grpc_target(const std::string& address);

}  // namespace qgate::paths
