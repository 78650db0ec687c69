// A real qgated under test: its own temp data dir and unix socket, started and killed by the test,
// driven through the real qgate CLI or a gRPC stub. Shared by the daemon's end-to-end test files,
// which define QGATED_BINARY, QGATE_CLI_BINARY and QGATE_REF_LIBRARY.
#pragma once

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "qgate/v1/harness.grpc.pb.h"

namespace qgate::testing {

using namespace std::chrono_literals;
using nlohmann::json;


inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct CliResult {
  int code = -1;
  std::string out, err;
};

/// One qgated process with its own data dir; killed when the test ends.
class DaemonUnderTest {
 public:
  DaemonUnderTest() {
    char tpl[] = "/tmp/qgated-test-XXXXXX";
    dir_ = mkdtemp(tpl);
    socket_ = dir_ + "/qgated.sock";
  }
  ~DaemonUnderTest() {
    kill9();
    std::filesystem::remove_all(dir_);
  }

  /// Starts qgated; `listen` empty = the temp unix socket. Returns false (with the log in `why`)
  /// when the daemon exits instead of becoming ready.
  bool try_start(const std::vector<std::string>& extra, const std::string& listen, std::string* why) {
    const std::string log = dir_ + "/qgated.log";
    std::ofstream(log, std::ios::app) << "--- start\n";
    log_offset_ = std::filesystem::file_size(log);
    std::vector<std::string> args = {QGATED_BINARY, "--backend", "cpu", "--threads", threads, "--data-dir", dir_,
                                     "--listen", listen.empty() ? "unix://" + socket_ : listen};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log.c_str(), O_WRONLY | O_APPEND);
      dup2(fd, 2);
      if (in_child) in_child();
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string text = slurp(log);
      // The ready line as text ("qgated: ready") or as JSON (--log-format json).
      if (text.find("qgated: ready", log_offset_) != std::string::npos ||
          text.find("\"msg\":\"ready\"", log_offset_) != std::string::npos) {
        auto at = text.find("listening on ", log_offset_);
        address_ = text.substr(at + 13, text.find(' ', at + 13) - at - 13);
        return true;
      }
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        *why = text.substr(log_offset_);
        return false;
      }
      std::this_thread::sleep_for(50ms);
    }
    *why = "not ready in 60 s";
    return false;
  }

  /// The address qgated reported (the real port when it was asked for port 0).
  const std::string& address() const { return address_; }

  CliResult cli_at(const std::string& server, const std::string& args) const {
    const std::string out = dir_ + "/cli.out", err = dir_ + "/cli.err";
    const std::string cmd = std::string(QGATE_CLI_BINARY) + " --server " + server + " " + args + " >" + out + " 2>" +
                            err + " </dev/null";
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  }

  void start() {
    const std::string log = dir_ + "/qgated.log";
    std::ofstream(log, std::ios::app) << "--- start\n";
    log_offset_ = std::filesystem::file_size(log);
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(log.c_str(), O_WRONLY | O_APPEND);
      dup2(fd, 2);
      if (in_child) in_child();
      execl(QGATED_BINARY, QGATED_BINARY, "--backend", "cpu", "--threads", "2", "--data-dir", dir_.c_str(),
            "--listen", ("unix://" + socket_).c_str(), nullptr);
      _exit(127);
    }
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (slurp(log).find("qgated: ready", log_offset_) != std::string::npos) return;
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL() << "qgated exited at start:\n" << slurp(log);
      }
      std::this_thread::sleep_for(50ms);
    }
    FAIL() << "qgated did not become ready:\n" << slurp(log);
  }

  void kill9() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  /// Waits up to `limit` for qgated to exit on its own (something killed it); true once it has.
  bool wait_for_exit(std::chrono::seconds limit) {
    if (pid_ <= 0) return true;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return true;
      }
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  /// SIGTERM, then waits up to `limit` for the exit; returns false when it did not exit.
  bool terminate(std::chrono::seconds limit) {
    if (pid_ <= 0) return true;
    ::kill(pid_, SIGTERM);
    return wait_for_exit(limit);
  }

  CliResult cli(const std::string& args) const {
    const std::string out = dir_ + "/cli.out", err = dir_ + "/cli.err";
    const std::string cmd = std::string(QGATE_CLI_BINARY) + " --server unix://" + socket_ + " " + args + " >" + out +
                            " 2>" + err + " </dev/null";
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  }

  std::unique_ptr<qgate::v1::Harness::Stub> stub() const {
    return qgate::v1::Harness::NewStub(grpc::CreateChannel("unix://" + socket_, grpc::InsecureChannelCredentials()));
  }

  const std::string& dir() const { return dir_; }
  /// The unix socket qgated listens on when try_start is given no address.
  const std::string& socket_path() const { return socket_; }
  pid_t pid() const { return pid_; }
  /// CPU backend threads per worker, for try_start (tests that run two workers at once give 1).
  std::string threads = "2";
  /// Run in the forked child just before qgated is exec'd (resource limits, dropped privileges).
  std::function<void()> in_child;
  std::string log() const { return slurp(dir_ + "/qgated.log"); }

 private:
  std::string dir_, socket_, address_;
  pid_t pid_ = -1;
  size_t log_offset_ = 0;
};

/// The data of a --json document under `key`, after checking the envelope every --json document
/// carries (client/include/qgate/client/json_report.h): schema_version 1 and the context block.
inline json json_data(const CliResult& r, const std::string& key) {
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc.value("schema_version", 0), 1) << r.out;
  EXPECT_TRUE(doc.contains("context") && doc["context"].is_object()) << r.out;
  EXPECT_TRUE(doc.contains(key)) << "no '" << key << "' in " << r.out;
  return doc.contains(key) ? doc[key] : json();
}

inline json show(const DaemonUnderTest& d, int64_t job) {
  auto r = d.cli("--json show " + std::to_string(job));
  EXPECT_EQ(r.code, 0) << r.err;
  return json_data(r, "job");
}

inline int64_t submit_no_wait(const DaemonUnderTest& d, const std::string& args) {
  auto r = d.cli("--json submit --build " + std::string(QGATE_REF_LIBRARY) + " " + args);
  EXPECT_EQ(r.code, 0) << r.err;
  return json_data(r, "submission")["job_id"].get<int64_t>();
}

inline std::string state_of(const json& job) { return job.value("state", ""); }

/// A job that ran to its end: what `qgate watch` exited with, and the job as `qgate show` gives it.
struct EndedJob {
  int watch_code = -1;
  json job;
};

/// Submits `build` under `name` with `args`, waits for the job to end, and returns it.
inline EndedJob run_job(const DaemonUnderTest& d, const std::string& build, const std::string& name,
                        const std::string& args) {
  EndedJob out;
  auto submitted = d.cli("--json submit --build " + build + " --name " + name + " " + args);
  EXPECT_EQ(submitted.code, 0) << submitted.err;
  if (submitted.code != 0) return out;
  const int64_t id = json_data(submitted, "submission")["job_id"].get<int64_t>();
  out.watch_code = d.cli("watch " + std::to_string(id)).code;
  out.job = show(d, id);
  return out;
}

}  // namespace qgate::testing
