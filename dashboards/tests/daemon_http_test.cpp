// qgated's --http listener as a process: the non-loopback refusal it shares with --listen, HTTPS with
// the daemon's --tls-cert/--tls-key (and nothing in plain text on that port), and reads on a loopback
// address, open as gRPC's reads are.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;

/// A qgated on the CPU backend with a fresh data directory, its log in a file.
class Qgated {
 public:
  explicit Qgated(std::vector<std::string> args) {
    std::string tmpl = (fs::temp_directory_path() / "qgate-http-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    log_ = dir_ + "/qgated.log";
    std::vector<std::string> argv = {QGATED_BINARY, "--backend",        "cpu", "--data-dir", dir_ + "/data",
                                     "--http-root", QGATE_DASHBOARD_DIR};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(fd, 1);
      dup2(fd, 2);
      std::vector<char*> c;
      for (auto& a : argv) c.push_back(a.data());
      c.push_back(nullptr);
      execv(c[0], c.data());
      _exit(127);
    }
  }
  ~Qgated() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  /// Waits for "ready" (true) or for the process to exit (false).
  bool ready() {
    for (int i = 0; i < 300; ++i) {
      if (log().find("qgated: ready") != std::string::npos) return true;
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  std::string log() const {
    std::ifstream in(log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  int port() const {
    std::smatch m;
    const std::string text = log();
    if (!std::regex_search(text, m, std::regex(R"(dashboard on https?://[^ ]*:([0-9]+)/)"))) return -1;
    return std::stoi(m[1].str());
  }
  const std::string& dir() const { return dir_; }
  int exit_code() const { return exit_code_; }

 private:
  std::string dir_, log_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int exit_code_ = 0;
};

int connect_to(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

/// One GET in plain text; the whole answer ("" when none came).
std::string plain_get(int port, const std::string& target, const std::string& host = "127.0.0.1") {
  const int fd = connect_to(port);
  if (fd < 0) return "";
  const std::string request = "GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n";
  (void)!send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string answer;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) answer.append(buf, static_cast<size_t>(n));
  close(fd);
  return answer;
}

/// One GET over TLS, trusting `ca_file`; the whole answer ("" when the handshake failed).
std::string tls_get(int port, const std::string& target, const std::string& ca_file) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_load_verify_locations(ctx, ca_file.c_str(), nullptr);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  const int fd = connect_to(port);
  SSL* ssl = SSL_new(ctx);
  SSL_set_fd(ssl, fd);
  SSL_set_tlsext_host_name(ssl, "localhost");
  std::string answer;
  if (SSL_connect(ssl) == 1) {
    const std::string request = "GET " + target + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
    SSL_write(ssl, request.data(), static_cast<int>(request.size()));
    char buf[4096];
    for (int n; (n = SSL_read(ssl, buf, sizeof buf)) > 0;) answer.append(buf, static_cast<size_t>(n));
  }
  SSL_free(ssl);
  close(fd);
  SSL_CTX_free(ctx);
  return answer;
}

TEST(DaemonHttp, ANonLoopbackAddressWithoutTlsAndATokenIsRefused) {
  Qgated d({"--http", "0.0.0.0:0"});
  EXPECT_FALSE(d.ready());
  EXPECT_NE(d.exit_code(), 0);
  EXPECT_NE(d.log().find("refusing to listen on 0.0.0.0:0 without TLS and a token (--http)"), std::string::npos)
      << d.log();
}

TEST(DaemonHttp, AUnixSocketIsNotAnHttpAddress) {
  Qgated d({"--http", "unix:///tmp/x.sock"});
  EXPECT_FALSE(d.ready());
  EXPECT_NE(d.log().find("--http takes host:port"), std::string::npos) << d.log();
}

TEST(DaemonHttp, WithTlsAndATokenItServesHttpsOnly) {
  const std::string dir = (fs::temp_directory_path() / ("qgate-http-cert-" + std::to_string(getpid()))).string();
  fs::create_directories(dir);
  const std::string cert = dir + "/cert.pem", key = dir + "/key.pem", token = dir + "/token";
  const std::string openssl =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
      "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
      key + " -out " + cert + " 2>/dev/null";
  ASSERT_EQ(std::system(openssl.c_str()), 0) << "openssl could not make a test certificate";
  std::ofstream(token) << "http-token-0123456789abcdef\n";
  Qgated d({"--http", "0.0.0.0:0", "--tls-cert", cert, "--tls-key", key, "--auth-token-file", token});
  ASSERT_TRUE(d.ready()) << d.log();
  const int port = d.port();
  ASSERT_GT(port, 0) << d.log();
  EXPECT_NE(d.log().find("dashboard on https://"), std::string::npos) << d.log();
  const std::string jobs = tls_get(port, "/api/jobs", cert);
  EXPECT_EQ(jobs.rfind("HTTP/1.1 200 ", 0), 0u) << jobs.substr(0, 200);
  EXPECT_NE(jobs.find("\"jobs\""), std::string::npos);
  const std::string page = tls_get(port, "/", cert);
  EXPECT_NE(page.find("<title>qgate dashboard</title>"), std::string::npos) << page.substr(0, 300);
  EXPECT_EQ(plain_get(port, "/api/jobs").rfind("HTTP/1.1", 0), std::string::npos) << "no plain text on a TLS port";
  fs::remove_all(dir);
}

TEST(DaemonHttp, OnLoopbackReadsAreOpenAsOnGrpcAndUnknownJobsAre404) {
  Qgated d({"--http", "127.0.0.1:0"});
  ASSERT_TRUE(d.ready()) << d.log();
  const int port = d.port();
  ASSERT_GT(port, 0) << d.log();
  const std::string device = plain_get(port, "/api/device");
  EXPECT_EQ(device.rfind("HTTP/1.1 200 ", 0), 0u) << device.substr(0, 200);
  EXPECT_NE(device.find("\"backend\":\"cpu\""), std::string::npos);
  EXPECT_EQ(plain_get(port, "/api/jobs/42/ab").rfind("HTTP/1.1 404 ", 0), 0u);
  EXPECT_EQ(plain_get(port, "/api/jobs", "evil.example").rfind("HTTP/1.1 403 ", 0), 0u);
}

}  // namespace
