// ConnectionAcceptor: bind, listen, and an accept loop that survives descriptor exhaustion (see
// connection_acceptor.h).
#include "qgate/server/connection_acceptor.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <grpcpp/server.h>
#include <grpcpp/server_posix.h>
#include <spdlog/spdlog.h>
#include <stdexcept>

namespace qgate::server {
namespace {

std::runtime_error failure(const std::string& what, const std::string& address) {
  return std::runtime_error("cannot listen on " + address + ": " + what + ": " + std::strerror(errno));
}

/// Descriptors this process holds now.
int open_descriptors() {
  int count = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (const dirent* entry = readdir(dir))
      if (entry->d_name[0] != '.') ++count;
    closedir(dir);
  }
  return count;
}

}  // namespace

ConnectionAcceptor::ConnectionAcceptor(const std::string& address, int reserve_fds) {
  struct rlimit files {};
  getrlimit(RLIMIT_NOFILE, &files);
  const int limit = files.rlim_cur == RLIM_INFINITY ? 1 << 20 : int(std::min<rlim_t>(files.rlim_cur, 1 << 20));
  reserve_ = std::max(4, std::min(reserve_fds, limit / 4));
  if (address.rfind("unix://", 0) == 0) {
    unix_ = true;
    unix_path_ = address.substr(7);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    if (unix_path_.empty() || unix_path_.size() >= sizeof sa.sun_path)
      throw std::runtime_error("cannot listen on " + address + ": the socket path is empty or too long");
    std::memcpy(sa.sun_path, unix_path_.c_str(), unix_path_.size() + 1);
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) throw failure("socket", address);
    if (bind(listen_fd_, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
      close(listen_fd_);
      throw failure("bind", address);
    }
    bound_ = address;
  } else {
    const size_t colon = address.rfind(':');
    if (colon == std::string::npos) throw std::runtime_error("cannot listen on " + address + ": no port");
    std::string host = address.substr(0, colon);
    const std::string port = address.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    if (const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found); rc != 0)
      throw std::runtime_error("cannot listen on " + address + ": " + gai_strerror(rc));
    for (addrinfo* a = found; a && listen_fd_ < 0; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      const int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (bind(fd, a->ai_addr, a->ai_addrlen) == 0) listen_fd_ = fd;
      else close(fd);
    }
    freeaddrinfo(found);
    if (listen_fd_ < 0) throw failure("bind", address);
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len);
    const int bound_port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                                    : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    bound_ = address.substr(0, colon) + ":" + std::to_string(bound_port);
  }
  if (listen(listen_fd_, 128) != 0) {
    close(listen_fd_);
    throw failure("listen", address);
  }
  if (pipe2(wake_, O_CLOEXEC) != 0) {
    close(listen_fd_);
    throw failure("pipe", address);
  }
}

ConnectionAcceptor::~ConnectionAcceptor() {
  stop();
  if (listen_fd_ >= 0) close(listen_fd_);
  for (int fd : wake_)
    if (fd >= 0) close(fd);
  if (unix_) unlink(unix_path_.c_str());
}

void ConnectionAcceptor::start(grpc::Server* server) {
  thread_ = std::thread([this, server] { accept_loop(server); });
}

void ConnectionAcceptor::stop() {
  if (!thread_.joinable()) return;
  const char byte = 0;
  [[maybe_unused]] const ssize_t n = write(wake_[1], &byte, 1);
  thread_.join();
}

bool ConnectionAcceptor::over_the_cap() const {
  struct rlimit files {};
  getrlimit(RLIMIT_NOFILE, &files);
  if (files.rlim_cur == RLIM_INFINITY) return false;
  return open_descriptors() > int(files.rlim_cur) - reserve_;
}

void ConnectionAcceptor::accept_loop(grpc::Server* server) {
  bool exhausted = false;
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    // While descriptors are short, look again every 100 ms rather than when a connection comes.
    if (poll(fds, 2, exhausted ? 100 : -1) < 0 && errno != EINTR) return;
    if (fds[1].revents) return;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        if (!exhausted) spdlog::warn("qgated: out of descriptors accepting a connection; retrying every 100 ms");
        exhausted = true;
      }
      continue;  // EINTR, ECONNABORTED, EAGAIN: the next one
    }
    if (exhausted) spdlog::info("qgated: accepting connections again");
    exhausted = false;
    if (over_the_cap()) {
      // Refused, not queued: the client hears at once, and the daemon keeps its reserve.
      close(fd);
      if (refused_.fetch_add(1) % 1000 == 0)
        spdlog::warn("qgated: a connection refused: it would leave fewer than {} descriptors for the daemon's work",
                     reserve_);
      continue;
    }
    if (!unix_) {
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    grpc::AddInsecureChannelFromFd(server, fd);
  }
}

}  // namespace qgate::server
