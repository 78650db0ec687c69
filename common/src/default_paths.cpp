// Default locations of qgated's data dir and socket.
#include "qgate/common/default_paths.h"

#include <cstdlib>

namespace qgate::paths {

std::string default_data_dir() {
  if (const char* d = std::getenv("QGATE_DATA_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return std::string(x) + "/qgate";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.local/share/qgate";
}

std::string default_socket_path() { return default_data_dir() + "/qgated.sock"; }

std::string default_server_address() { return "unix://" + default_socket_path(); }

std::string to_grpc_target(const std::string& address) {
  if (address.empty()) return "";
  if (address.rfind("unix:", 0) == 0) return address;
  if (address[0] == '/') return "unix://" + address;
  return address;  // host:port, [::1]:port, dns:///host:port
}

}  // namespace qgate::paths
