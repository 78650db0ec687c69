// The daemon's own accept loop for its plain (non-TLS) gRPC listener. The gRPC that Debian 12 ships
// stops accepting for good after one accept() fails with EMFILE (grpc/grpc#20418): one burst of idle
// connections past the descriptor limit left qgated deaf for as long as it ran. So qgated binds and
// accepts itself and hands each connection to the gRPC server (grpc::AddInsecureChannelFromFd). It
// keeps a reserve of descriptors for its own work (the database, workers' pipes, logs): a connection
// that would eat into it is accepted and closed at once, and an accept that fails for want of
// descriptors is retried, so the listener answers again as soon as descriptors are free
// (docs/security.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace grpc {
class Server;
}

namespace qgate::server {

class ConnectionAcceptor {
 public:
  /// Binds and listens on `address` ("unix:///path", "host:port", "[::1]:port"; port 0 picks one)
  /// now, so a bad address fails the daemon's start. Throws std::runtime_error with the reason.
  /// `reserve_fds`: descriptors kept free for the daemon's own work (at most a quarter of the limit).
  ConnectionAcceptor(const std::string& address, int reserve_fds = 256);
  ~ConnectionAcceptor();
  ConnectionAcceptor(const ConnectionAcceptor&) = delete;
  ConnectionAcceptor& operator=(const ConnectionAcceptor&) = delete;

  /// Accepts into `server` on a thread of its own until stop().
  void start(grpc::Server* server);
  void stop();
  /// The address as bound: "unix:///path", or "host:port" with the real port.
  const std::string& address() const { return bound_; }
  /// Connections closed at once because they would have eaten into the reserve.
  int64_t refused() const { return refused_.load(); }

 private:
  void accept_loop(grpc::Server* server);
  bool over_the_cap() const;

  std::string bound_;
  bool unix_ = false;
  std::string unix_path_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  int reserve_ = 256;
  std::atomic<int64_t> refused_{0};
  std::thread thread_;
};

}  // namespace qgate::server
