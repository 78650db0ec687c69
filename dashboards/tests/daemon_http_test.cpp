// qgated's --http listener as a process: the non-loopback refusal it shares with --listen, HTTPS with
// the daemon's --tls-cert/--tls-key (and nothing in plain text on that port), reads on a loopback
// address, open as gRPC's reads are, in the CLI's envelope; /metrics scraped and parsed as Prometheus
// would (before and after a parity job on the CPU backend), and /healthz.
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
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

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
  /// Runs the qgate CLI against this daemon's socket; its exit code, its stdout in `out`.
  int cli(const std::string& args, std::string* out) const {
    const std::string file = dir_ + "/cli.out";
    const std::string cmd = std::string(QGATE_CLI_BINARY) + " --server unix://" + dir_ + "/data/qgated.sock " + args +
                            " >" + file + " 2>>" + dir_ + "/cli.err";
    const int status = std::system(cmd.c_str());
    std::ifstream in(file);
    std::stringstream ss;
    ss << in.rdbuf();
    *out = ss.str();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

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

/// The body of an HTTP answer ("" when there is none).
std::string body_of(const std::string& answer) {
  const auto split = answer.find("\r\n\r\n");
  return split == std::string::npos ? "" : answer.substr(split + 4);
}

/// A scrape in Prometheus' text format (0.0.4), parsed strictly: every family has one HELP and one
/// TYPE before its samples; every other line is `name{label="value",...} value`, its labels escaped
/// as the format says, its value a number (NaN and +-Inf included); a histogram's samples are its
/// _bucket, _sum and _count. Whatever breaks a rule is in `errors`, with its line.
struct Scrape {
  struct Sample {
    std::string name;
    std::map<std::string, std::string> labels;
    double value = 0;
  };
  std::map<std::string, std::string> help, type;
  std::vector<Sample> samples;
  std::vector<std::string> errors;

  explicit Scrape(const std::string& text) {
    static const std::regex help_line(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$)");
    static const std::regex type_line(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$)");
    static const std::regex sample_line(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$)");
    if (text.empty() || text.back() != '\n') errors.push_back("the text does not end with a newline");
    std::istringstream in(text);
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      const std::string where = "line " + std::to_string(number) + " '" + line + "': ";
      std::smatch m;
      if (line.rfind("# HELP ", 0) == 0) {
        if (!std::regex_match(line, m, help_line)) errors.push_back(where + "a malformed HELP");
        else if (!help.emplace(m[1], m[2]).second) errors.push_back(where + "a second HELP");
      } else if (line.rfind("# TYPE ", 0) == 0) {
        if (!std::regex_match(line, m, type_line)) errors.push_back(where + "a malformed TYPE");
        else if (!type.emplace(m[1], m[2]).second) errors.push_back(where + "a second TYPE");
      } else if (line.empty() || line[0] == '#') {
        errors.push_back(where + "neither a HELP, a TYPE nor a sample");
      } else if (!std::regex_match(line, m, sample_line)) {
        errors.push_back(where + "not name{labels} value");
      } else {
        Sample s;
        s.name = m[1];
        std::string why;
        if (m[2].matched && !parse_labels(m[3], &s.labels, &why)) errors.push_back(where + why);
        if (!parse_value(m[4], &s.value)) errors.push_back(where + "the value is not a number");
        const std::string family = family_of(s.name);
        if (!help.count(family) || !type.count(family)) errors.push_back(where + "a sample before its HELP and TYPE");
        samples.push_back(std::move(s));
      }
    }
    for (const auto& [name, t] : type)
      if (!help.count(name)) errors.push_back(name + " has a TYPE and no HELP");
    for (const auto& [name, h] : help)
      if (!type.count(name)) errors.push_back(name + " has a HELP and no TYPE");
  }

  /// The family a sample belongs to: its name, or the histogram or summary it is a part of.
  std::string family_of(const std::string& name) const {
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string sfx = suffix;
      if (name.size() > sfx.size() && name.compare(name.size() - sfx.size(), sfx.size(), sfx) == 0) {
        const std::string base = name.substr(0, name.size() - sfx.size());
        auto it = type.find(base);
        if (it != type.end() && (it->second == "histogram" || (it->second == "summary" && sfx != "_bucket")))
          return base;
      }
    }
    return name;
  }

  static bool parse_value(const std::string& text, double* out) {
    if (text == "NaN") return *out = std::nan(""), true;
    if (text == "+Inf") return *out = INFINITY, true;
    if (text == "-Inf") return *out = -INFINITY, true;
    try {
      size_t used = 0;
      *out = std::stod(text, &used);
      return used == text.size();
    } catch (const std::exception&) {
      return false;
    }
  }

  static bool parse_labels(const std::string& text, std::map<std::string, std::string>* out, std::string* why) {
    size_t i = 0;
    while (i < text.size()) {
      const size_t eq = text.find('=', i);
      if (eq == std::string::npos || eq + 1 >= text.size() || text[eq + 1] != '"') return *why = "a label without =\"", false;
      const std::string name = text.substr(i, eq - i);
      if (!std::regex_match(name, std::regex("[a-zA-Z_][a-zA-Z0-9_]*"))) return *why = "a bad label name '" + name + "'", false;
      std::string value;
      size_t j = eq + 2;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\n') return *why = "a raw newline in a label value", false;
        if (text[j] != '\\') {
          value += text[j];
          continue;
        }
        if (++j >= text.size()) return *why = "a label value ends in a backslash", false;
        if (text[j] == 'n') value += '\n';
        else if (text[j] == '\\' || text[j] == '"') value += text[j];
        else return *why = "an unknown escape in a label value", false;
      }
      if (j >= text.size()) return *why = "an unterminated label value", false;
      if (!out->emplace(name, value).second) return *why = "the label " + name + " twice", false;
      i = j + 1;
      if (i < text.size()) {
        if (text[i] != ',') return *why = "labels not separated by commas", false;
        ++i;
      }
    }
    return true;
  }

  /// The value of the one sample `name` with exactly `labels`; NaN when there is none.
  double value(const std::string& name, const std::map<std::string, std::string>& labels = {}) const {
    for (const Sample& s : samples)
      if (s.name == name && s.labels == labels) return s.value;
    return std::nan("");
  }
  bool has_family(const std::string& name) const { return help.count(name) && type.count(name); }
};

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
  const nlohmann::json answer = nlohmann::json::parse(body_of(device), nullptr, false);
  EXPECT_EQ(answer["schema_version"], 1) << body_of(device);
  EXPECT_EQ(answer["context"]["backend"], "cpu") << body_of(device);
  EXPECT_EQ(answer["device"]["backend"], "cpu") << body_of(device);
  EXPECT_TRUE(answer["device"]["uptime_s"].is_number_integer()) << "int64 as a JSON number: " << body_of(device);
  EXPECT_EQ(plain_get(port, "/api/jobs/42/ab").rfind("HTTP/1.1 404 ", 0), 0u);
  EXPECT_EQ(plain_get(port, "/api/jobs", "evil.example").rfind("HTTP/1.1 403 ", 0), 0u);
}

}  // namespace

namespace {

TEST(DaemonHttp, HealthzIsOkOnAServingDaemonAndBehindTheHostCheck) {
  Qgated d({"--http", "127.0.0.1:0"});
  ASSERT_TRUE(d.ready()) << d.log();
  const int port = d.port();
  ASSERT_GT(port, 0) << d.log();
  const std::string answer = plain_get(port, "/healthz");
  ASSERT_EQ(answer.rfind("HTTP/1.1 200 ", 0), 0u) << answer;
  const nlohmann::json body = nlohmann::json::parse(body_of(answer), nullptr, false);
  EXPECT_EQ(body["status"], "ok") << body_of(answer);
  EXPECT_EQ(body["checks"]["store"], "ok") << body_of(answer);
  EXPECT_EQ(body["checks"]["scheduler"], "ok") << body_of(answer);
  EXPECT_EQ(plain_get(port, "/healthz", "evil.example").rfind("HTTP/1.1 403 ", 0), 0u);
  EXPECT_EQ(plain_get(port, "/metrics", "evil.example").rfind("HTTP/1.1 403 ", 0), 0u);
}

TEST(DaemonHttp, MetricsAreScrapedParsedAndMoveWithAJob) {
  Qgated d({"--http", "127.0.0.1:0"});
  ASSERT_TRUE(d.ready()) << d.log();
  const int port = d.port();
  ASSERT_GT(port, 0) << d.log();
  auto scrape = [&] {
    const std::string answer = plain_get(port, "/metrics");
    EXPECT_EQ(answer.rfind("HTTP/1.1 200 ", 0), 0u) << answer.substr(0, 300);
    EXPECT_NE(answer.find("Content-Type: text/plain; version=0.0.4"), std::string::npos) << answer.substr(0, 300);
    return Scrape(body_of(answer));
  };

  const Scrape before = scrape();
  ASSERT_TRUE(before.errors.empty()) << before.errors.front();
  for (const char* family :
       {"qgate_build_info", "qgate_uptime_seconds", "qgate_jobs", "qgate_queue_depth", "qgate_queue_waiting_quiet",
        "qgate_jobs_claimed_total", "qgate_jobs_finished_total", "qgate_job_claim_latency_seconds",
        "qgate_job_run_duration_seconds", "qgate_claim_statements_total", "qgate_claim_statement_duration_seconds",
        "qgate_gpu_info", "qgate_gpu_busy", "qgate_gpu_cotenant_state",
        "qgate_gpu_foreign_sm_percent", "qgate_gpu_foreign_processes", "qgate_store_size_bytes"})
    EXPECT_TRUE(before.has_family(family)) << family;
  EXPECT_EQ(before.type.at("qgate_job_claim_latency_seconds"), "histogram");
  EXPECT_EQ(before.type.at("qgate_jobs_claimed_total"), "counter");
  EXPECT_EQ(before.type.at("qgate_claim_statement_duration_seconds"), "histogram");
  EXPECT_EQ(before.type.at("qgate_claim_statements_total"), "counter");
  EXPECT_EQ(before.type.at("qgate_jobs"), "gauge");
  // qgate_build_info: 1, with the version, the commit and the schema as labels.
  bool build_info = false;
  for (const auto& s : before.samples) {
    if (s.name != "qgate_build_info") continue;
    build_info = s.value == 1 && !s.labels.at("version").empty() && s.labels.count("commit") &&
                 std::stoi(s.labels.at("schema_version")) > 0;
  }
  EXPECT_TRUE(build_info) << "qgate_build_info 1 with version, commit and schema_version";
  EXPECT_GE(before.value("qgate_uptime_seconds"), 0);
  EXPECT_EQ(before.value("qgate_jobs", {{"state", "done"}}), 0);
  EXPECT_EQ(before.value("qgate_jobs", {{"state", "queued"}}), 0);
  EXPECT_EQ(before.value("qgate_jobs_claimed_total"), 0);
  EXPECT_EQ(before.value("qgate_job_claim_latency_seconds_count"), 0);
  EXPECT_EQ(before.value("qgate_job_run_duration_seconds_count"), 0);
  EXPECT_EQ(before.value("qgate_claim_statements_total", {{"result", "job"}}), 0);
  EXPECT_EQ(before.value("qgate_claim_statement_duration_seconds_count", {{"result", "job"}}), 0);
  EXPECT_EQ(before.value("qgate_gpu_cotenant_state", {{"gpu", "0"}, {"state", "unknown"}}), 1)
      << "the CPU backend samples nothing: its load is unknown";
  EXPECT_EQ(before.value("qgate_gpu_cotenant_state", {{"gpu", "0"}, {"state", "quiet"}}), 0);
  EXPECT_GT(before.value("qgate_store_size_bytes", {{"file", "database"}}), 0);

  std::string out;
  ASSERT_EQ(d.cli("--json submit --build " + std::string(QGATE_REF_LIBRARY) +
                      " --name ref --kind parity --parity-shapes quick --wait",
                  &out),
            0)
      << out << d.log();
  const nlohmann::json submitted = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(submitted.is_discarded()) << out;

  // The verdict reaches the CLI a moment before the scheduler takes the job back: scrape until the
  // finished counter moves.
  Scrape after = scrape();
  for (int i = 0; i < 100 && !(after.value("qgate_jobs_finished_total", {{"state", "done"}}) >= 1); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    after = scrape();
  }
  ASSERT_TRUE(after.errors.empty()) << after.errors.front();
  EXPECT_EQ(after.value("qgate_jobs_finished_total", {{"state", "done"}}), 1);
  EXPECT_EQ(after.value("qgate_jobs_claimed_total"), 1);
  EXPECT_EQ(after.value("qgate_jobs", {{"state", "done"}}), 1);
  EXPECT_EQ(after.value("qgate_jobs", {{"state", "running"}}), 0);
  EXPECT_EQ(after.value("qgate_queue_depth"), 0);
  EXPECT_EQ(after.value("qgate_job_claim_latency_seconds_count"), 1);
  EXPECT_EQ(after.value("qgate_job_claim_latency_seconds_bucket", {{"le", "+Inf"}}), 1);
  EXPECT_EQ(after.value("qgate_job_run_duration_seconds_count"), 1);
  EXPECT_GT(after.value("qgate_job_run_duration_seconds_sum"), 0);
  // Buckets are cumulative: never fewer at a larger bound.
  double last = 0;
  for (const auto& s : after.samples) {
    if (s.name != "qgate_job_run_duration_seconds_bucket") continue;
    EXPECT_GE(s.value, last) << "le " << s.labels.at("le");
    last = s.value;
  }
  EXPECT_EQ(last, 1) << "the +Inf bucket holds every run";
  EXPECT_GE(after.value("qgate_uptime_seconds"), before.value("qgate_uptime_seconds"));
  // The claim statements: one found the job; the idle loop's empty ones go on, so the histograms'
  // counts are read with the counters of the same scrape.
  const std::map<std::string, std::string> job{{"result", "job"}}, empty{{"result", "empty"}};
  EXPECT_EQ(after.value("qgate_claim_statements_total", job), 1);
  EXPECT_GE(after.value("qgate_claim_statements_total", empty), 1) << "the GPU's own queue is looked at first";
  EXPECT_EQ(after.value("qgate_claim_statements_total", {{"result", "error"}}), 0);
  EXPECT_EQ(after.value("qgate_claim_statement_duration_seconds_count", job), 1);
  EXPECT_EQ(after.value("qgate_claim_statement_duration_seconds_bucket", {{"result", "job"}, {"le", "+Inf"}}), 1);
  EXPECT_GT(after.value("qgate_claim_statement_duration_seconds_sum", job), 0);
  EXPECT_EQ(after.value("qgate_claim_statement_duration_seconds_count", empty),
            after.value("qgate_claim_statements_total", empty));
}

}  // namespace
