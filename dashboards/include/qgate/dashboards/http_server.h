// HttpServer: a small HTTP/1.1 server for qgated's dashboard, with TLS (OpenSSL) when given a
// certificate. One request per connection (answers carry Connection: close). Everything is bounded:
// the request head (request line and headers) to max_head_bytes, the time to read it, the time to
// write the answer, and the number of connections served at once. A request with a body is refused
// (nothing it serves takes one). What to answer is the handler's: this class only speaks HTTP.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace qgate::dashboards {

struct HttpRequest {
  std::string method;                             // "GET", "HEAD", ...
  std::string path;                               // percent-decoded, without the query
  std::multimap<std::string, std::string> query;  // decoded names and values
  std::map<std::string, std::string> headers;     // names lower-cased; a repeated header keeps the last
  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? "" : it->second;
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
};

struct HttpServerOptions {
  std::string address;        // host:port ("127.0.0.1:8080", "[::1]:0"); port 0 picks one
  std::string tls_cert_file;  // both set: HTTPS
  std::string tls_key_file;
  std::size_t max_head_bytes = 16384;   // request line and headers; more is 431
  std::size_t max_target_bytes = 8192;  // the request target; more is 414
  int read_timeout_ms = 10000;          // the whole head must arrive within this
  int write_timeout_ms = 10000;         // per send
  int max_connections = 64;             // served at once; more get 503 at once
};

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  HttpServer(HttpServerOptions options, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Binds, loads the TLS files and starts accepting on a thread of its own; returns the URL
  /// ("http://127.0.0.1:8080/"). Throws std::runtime_error saying what failed.
  std::string start();
  /// Stops accepting and waits for the connections being served (each bounded by the timeouts).
  void stop();

  /// The reason phrase of a status ("Not Found").
  static const char* reason(int status);
  /// The request head parsed: method, target, headers. Returns the status to refuse it with
  /// (400, 414, 431, 413, 505), or 0 when it is acceptable.
  int parse_head(const std::string& head, HttpRequest* out) const;

 private:
  struct Tls;
  void accept_loop();
  void serve(int fd);

  HttpServerOptions options_;
  Handler handler_;
  std::unique_ptr<Tls> tls_;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable idle_;
  int active_ = 0;
};

/// The host and port of "host:port" or "[v6]:port"; throws std::invalid_argument on anything else.
std::pair<std::string, int> split_host_port(const std::string& address);

/// Percent-decoding; '+' is a space when `plus_is_space` (query strings). Returns false on a bad
/// escape or a decoded NUL.
bool percent_decode(const std::string& in, std::string* out, bool plus_is_space);

}  // namespace qgate::dashboards
