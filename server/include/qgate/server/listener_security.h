// What an address qgated listens on allows, decided once before anything listens: the token of
// --auth-token-file, TLS from --tls-cert/--tls-key, and the refusal of a non-loopback TCP address
// without both unless --insecure. The gRPC listener and the HTTP dashboard share it.
#pragma once

#include <string>

#include "qgate/server/daemon_options.h"

namespace qgate::server {

struct ListenerSecurity {
  bool tcp = false;       // false: a unix socket (mode 0600, its user is trusted)
  bool loopback = false;  // a TCP address on 127.0.0.0/8, ::1 or localhost
  bool tls = false;       // tls_cert_file and tls_key_file are both given
  std::string token;      // empty: no --auth-token-file
};

/// True for 127.0.0.0/8, ::1 and localhost targets ("host:port", "[::1]:port", "dns:///host:port").
bool is_loopback_target(std::string target);

/// A secret file's text without its trailing newline; throws when it cannot be read or is empty.
std::string read_secret_file(const std::string& path, const char* what);

/// The rules for `address` ("unix://..." or host:port) under `options`. Throws std::runtime_error
/// saying what to give when the token is too short, TLS has half its files, or a non-loopback TCP
/// address has neither TLS and a token nor --insecure. `flag` names the address's option in that
/// message ("--listen", "--http").
ListenerSecurity listener_security(const DaemonOptions& options, const std::string& address, const std::string& flag);

}  // namespace qgate::server
