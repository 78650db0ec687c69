// The listener rules (listener_security.h): token, TLS and the non-loopback refusal.
#include "qgate/server/listener_security.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace qgate::server {

bool is_loopback_target(std::string target) {
  if (target.rfind("dns:///", 0) == 0) target = target.substr(7);
  std::string host = target;
  if (!host.empty() && host[0] == '[')
    host = host.substr(1, host.find(']') - 1);
  else if (auto colon = host.rfind(':'); colon != std::string::npos)
    host = host.substr(0, colon);
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::string read_secret_file(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(std::string("cannot read the ") + what + " file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  if (text.empty()) throw std::runtime_error(std::string("the ") + what + " file " + path + " is empty");
  return text;
}

ListenerSecurity listener_security(const DaemonOptions& options, const std::string& address, const std::string& flag) {
  ListenerSecurity s;
  s.tcp = address.rfind("unix:", 0) != 0;
  s.loopback = s.tcp && is_loopback_target(address);
  if (!options.auth_token_file.empty()) {
    s.token = read_secret_file(options.auth_token_file, "auth token");
    if (s.token.size() < 16)
      throw std::runtime_error("the auth token in " + options.auth_token_file + " is shorter than 16 characters");
  }
  s.tls = !options.tls_cert_file.empty() || !options.tls_key_file.empty();
  if (s.tls && (options.tls_cert_file.empty() || options.tls_key_file.empty()))
    throw std::runtime_error("TLS needs both --tls-cert and --tls-key");
  if (s.tcp && !s.loopback && !(s.tls && !s.token.empty()) && !options.insecure)
    throw std::runtime_error("refusing to listen on " + address + " without TLS and a token (" + flag +
                             "): give --tls-cert, --tls-key and --auth-token-file, or --insecure");
  return s;
}

}  // namespace qgate::server
