// HttpServer: sockets, the bounded request head, TLS through OpenSSL, one thread per connection.
#include "qgate/dashboards/http_server.h"

#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace qgate::dashboards {
namespace {

using Clock = std::chrono::steady_clock;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

void set_timeout(int fd, int option, int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  setsockopt(fd, SOL_SOCKET, option, &tv, sizeof tv);
}

std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char text[256];
  ERR_error_string_n(e, text, sizeof text);
  return text;
}

}  // namespace

struct HttpServer::Tls {
  SSL_CTX* ctx = nullptr;
  ~Tls() {
    if (ctx) SSL_CTX_free(ctx);
  }
};

/// One connection's byte stream, plain or TLS.
class Connection {
 public:
  Connection(int fd, SSL_CTX* ctx) : fd_(fd), tls_(ctx != nullptr) {
    if (ctx) {
      ssl_ = SSL_new(ctx);
      if (ssl_) SSL_set_fd(ssl_, fd);
    }
  }
  ~Connection() {
    if (ssl_) {
      SSL_shutdown(ssl_);
      SSL_free(ssl_);
    }
    close(fd_);
  }
  /// False when a TLS connection could not be set up: then nothing is read or written in plain text.
  bool handshake() { return !tls_ || (ssl_ && SSL_accept(ssl_) == 1); }
  ssize_t read(char* buf, size_t n) {
    if (ssl_) return SSL_read(ssl_, buf, static_cast<int>(n));
    return recv(fd_, buf, n, 0);
  }
  bool write_all(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = ssl_ ? SSL_write(ssl_, data.data() + sent, static_cast<int>(data.size() - sent))
                             : send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

 private:
  int fd_;
  bool tls_;
  SSL* ssl_ = nullptr;
};

std::pair<std::string, int> split_host_port(const std::string& address) {
  std::string host;
  std::string port;
  if (!address.empty() && address[0] == '[') {
    const auto close = address.find(']');
    if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':')
      throw std::invalid_argument("'" + address + "' is not [host]:port");
    host = address.substr(1, close - 1);
    port = address.substr(close + 2);
  } else {
    const auto colon = address.rfind(':');
    if (colon == std::string::npos || address.find(':') != colon)
      throw std::invalid_argument("'" + address + "' is not host:port");
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
  }
  if (host.empty() || port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) > 65535)
    throw std::invalid_argument("'" + address + "' is not host:port with a port in [0, 65535]");
  return {host, std::stoi(port)};
}

bool percent_decode(const std::string& in, std::string* out, bool plus_is_space) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size() || !std::isxdigit(static_cast<unsigned char>(in[i + 1])) ||
          !std::isxdigit(static_cast<unsigned char>(in[i + 2])))
        return false;
      const char decoded = static_cast<char>(std::stoi(in.substr(i + 1, 2), nullptr, 16));
      if (decoded == '\0') return false;
      out->push_back(decoded);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

const char* HttpServer::reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Status";
  }
}

int HttpServer::parse_head(const std::string& head, HttpRequest* out) const {
  const auto line_end = head.find("\r\n");
  const std::string line = head.substr(0, line_end);
  const auto sp1 = line.find(' ');
  const auto sp2 = line.rfind(' ');
  if (sp1 == std::string::npos || sp2 == sp1) return 400;
  out->method = line.substr(0, sp1);
  const std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string version = line.substr(sp2 + 1);
  if (out->method.empty() ||
      !std::all_of(out->method.begin(), out->method.end(), [](char c) { return c >= 'A' && c <= 'Z'; }))
    return 400;
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return version.rfind("HTTP/", 0) == 0 ? 505 : 400;
  if (target.size() > options_.max_target_bytes) return 414;
  if (target.empty() || target[0] != '/' || target.find(' ') != std::string::npos) return 400;

  const auto q = target.find('?');
  if (!percent_decode(target.substr(0, q), &out->path, false)) return 400;
  if (q != std::string::npos) {
    const std::string query = target.substr(q + 1);
    size_t start = 0;
    while (start <= query.size()) {
      const size_t amp = std::min(query.find('&', start), query.size());
      const std::string pair = query.substr(start, amp - start);
      if (!pair.empty()) {
        const auto eq = pair.find('=');
        std::string name, value;
        if (!percent_decode(pair.substr(0, eq), &name, true)) return 400;
        if (eq != std::string::npos && !percent_decode(pair.substr(eq + 1), &value, true)) return 400;
        out->query.emplace(std::move(name), std::move(value));
      }
      start = amp + 1;
    }
  }

  size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
  while (pos < head.size()) {
    const auto end = head.find("\r\n", pos);
    const std::string field = head.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    pos = end == std::string::npos ? head.size() : end + 2;
    if (field.empty()) break;
    const auto colon = field.find(':');
    if (colon == std::string::npos || colon == 0 || field[0] == ' ' || field[0] == '\t') return 400;
    out->headers[lower(field.substr(0, colon))] = trim(field.substr(colon + 1));
  }
  if (out->headers.count("transfer-encoding")) return 413;
  if (const std::string length = out->header("content-length"); !length.empty() && length != "0") return 413;
  return 0;
}

HttpServer::HttpServer(HttpServerOptions options, Handler handler)
    : options_(std::move(options)), handler_(std::move(handler)) {}

HttpServer::~HttpServer() { stop(); }

std::string HttpServer::start() {
  const auto [host, port] = split_host_port(options_.address);
  const bool tls = !options_.tls_cert_file.empty() && !options_.tls_key_file.empty();
  if (tls) {
    tls_ = std::make_unique<Tls>();
    tls_->ctx = SSL_CTX_new(TLS_server_method());
    if (!tls_->ctx) throw std::runtime_error("TLS: " + openssl_error());
    SSL_CTX_set_min_proto_version(tls_->ctx, TLS1_2_VERSION);
    if (SSL_CTX_use_certificate_chain_file(tls_->ctx, options_.tls_cert_file.c_str()) != 1)
      throw std::runtime_error("cannot load the TLS certificate " + options_.tls_cert_file + ": " + openssl_error());
    if (SSL_CTX_use_PrivateKey_file(tls_->ctx, options_.tls_key_file.c_str(), SSL_FILETYPE_PEM) != 1)
      throw std::runtime_error("cannot load the TLS key " + options_.tls_key_file + ": " + openssl_error());
    if (SSL_CTX_check_private_key(tls_->ctx) != 1)
      throw std::runtime_error("the TLS key " + options_.tls_key_file + " does not match the certificate");
  }

  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
    throw std::runtime_error("cannot resolve " + options_.address);
  std::string why;
  for (addrinfo* a = found; a && listen_fd_ < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 64) == 0) {
      listen_fd_ = fd;
    } else {
      why = std::strerror(errno);
      close(fd);
    }
  }
  freeaddrinfo(found);
  if (listen_fd_ < 0) throw std::runtime_error("cannot listen on " + options_.address + ": " + why);

  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  const int bound_port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                                     : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  stopping_ = false;
  acceptor_ = std::thread([this] { accept_loop(); });
  const std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return std::string(tls ? "https" : "http") + "://" + shown + ":" + std::to_string(bound_port) + "/";
}

void HttpServer::stop() {
  stopping_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    listen_fd_ = -1;
  }
  std::unique_lock lock(mu_);
  idle_.wait(lock, [this] { return active_ == 0; });
}

void HttpServer::accept_loop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    set_timeout(fd, SO_SNDTIMEO, options_.write_timeout_ms);
    {
      std::lock_guard lock(mu_);
      if (active_ >= options_.max_connections) {
        // Over the bound: refused at once, in plain text (no TLS handshake is spent on it).
        const std::string busy = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        if (!tls_) (void)!send(fd, busy.data(), busy.size(), MSG_NOSIGNAL);
        close(fd);
        continue;
      }
      ++active_;
    }
    std::thread([this, fd] {
      serve(fd);
      std::lock_guard lock(mu_);
      if (--active_ == 0) idle_.notify_all();
    }).detach();
  }
}

void HttpServer::serve(int fd) {
  Connection conn(fd, tls_ ? tls_->ctx : nullptr);
  const auto deadline = Clock::now() + std::chrono::milliseconds(options_.read_timeout_ms);
  auto remaining_ms = [&] {
    return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
  };
  set_timeout(fd, SO_RCVTIMEO, std::max(1, remaining_ms()));
  if (!conn.handshake()) return;

  auto answer = [&](HttpResponse r, bool head_only) {
    std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) + "\r\n";
    out += "Content-Type: " + r.content_type + "\r\n";
    out += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
    for (const auto& [name, value] : r.headers) out += name + ": " + value + "\r\n";
    out += "Connection: close\r\n\r\n";
    if (!head_only) out += r.body;
    conn.write_all(out);
  };
  auto refuse = [&](int status, const std::string& message) {
    HttpResponse r;
    r.status = status;
    r.content_type = "text/plain; charset=utf-8";
    r.body = message + "\n";
    answer(std::move(r), false);
  };

  // The head: read until the blank line, never more than max_head_bytes, never past the deadline.
  std::string head;
  char buf[4096];
  size_t end = std::string::npos;
  while (end == std::string::npos) {
    const int left = remaining_ms();
    if (left <= 0) return refuse(408, "the request head did not arrive in time");
    set_timeout(fd, SO_RCVTIMEO, left);
    const size_t want = std::min(sizeof buf, options_.max_head_bytes + 4 - head.size());
    const ssize_t n = conn.read(buf, want);
    if (n <= 0) {
      if (remaining_ms() <= 0) return refuse(408, "the request head did not arrive in time");
      return;  // the client went away
    }
    head.append(buf, static_cast<size_t>(n));
    end = head.find("\r\n\r\n");
    if (end == std::string::npos && head.size() > options_.max_head_bytes) {
      // A request line alone over the target bound reads as 414, anything else as 431.
      const auto line_end = head.find("\r\n");
      if (line_end == std::string::npos || line_end > options_.max_target_bytes)
        return refuse(414, "the request's target is too long");
      return refuse(431, "the request's headers are larger than " + std::to_string(options_.max_head_bytes) + " bytes");
    }
  }
  HttpRequest request;
  if (const int status = parse_head(head.substr(0, end + 2), &request); status != 0)
    return refuse(status, status == 413 ? "a request with a body is refused: nothing here takes one"
                                        : std::string("the request was refused: ") + reason(status));
  HttpResponse response;
  try {
    response = handler_(request);
  } catch (const std::exception& e) {
    return refuse(500, e.what());
  }
  answer(std::move(response), request.method == "HEAD");
}

}  // namespace qgate::dashboards
