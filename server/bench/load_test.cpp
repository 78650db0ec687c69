// qgate-load-test: starts a real qgated (CPU backend) in a temp data dir, keeps a long A/B job
// running in it, and drives it with N concurrent clients for S seconds, each on its own channel,
// mixing QueryTrend, ListJobs and GetJob with SubmitBuild (uploads of the reference build as small
// parity jobs, which queue behind the running one). Prints a table and writes JSON: requests/s,
// p50/p99 latency per RPC, and failures by status code. RESOURCE_EXHAUSTED from a bound (the queue,
// concurrent uploads or streams) is a refusal, counted apart from errors. Exits 1 when any call
// ended in an error, so a short run is a smoke test.
//   qgate-load-test [--clients 100] [--seconds 60] [--qgated PATH] [--build LIB.so]
//                   [--max-queued-jobs 200] [--json-out FILE] [--keep]
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "qgate/v1/harness.grpc.pb.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

const char* const kRpcs[] = {"QueryTrend", "ListJobs", "GetJob", "SubmitBuild"};
constexpr int kRpcCount = 4;
// Out of 100 calls: 40 QueryTrend, 30 ListJobs, 20 GetJob, 10 SubmitBuild.
int pick_rpc(std::mt19937& rng) {
  const int r = int(rng() % 100);
  return r < 40 ? 0 : r < 70 ? 1 : r < 90 ? 2 : 3;
}

const char* code_name(grpc::StatusCode code) {
  static const char* const names[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                                      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                      "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
                                      "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  const int c = int(code);
  return c >= 0 && c < 17 ? names[c] : "?";
}

std::string exe_dir() {
  std::error_code ec;
  auto exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "." : exe.parent_path().string();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double percentile(std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1, size_t(p * double(sorted.size() - 1) + 0.5))];
}

/// What one client saw of one RPC.
struct RpcTally {
  std::vector<double> ok_ms;
  int64_t refused = 0;
  std::map<std::string, int64_t> errors;  // by status code name
  std::vector<std::string> error_samples;
};

struct Options {
  int clients = 100;
  int seconds = 60;
  std::string qgated;
  std::string build;
  int max_queued_jobs = 200;
  std::string json_out;
  bool keep = false;
};

/// qgated in a temp data dir, started and stopped by this program.
class Daemon {
 public:
  explicit Daemon(const Options& o) {
    char tpl[] = "/tmp/qgate-load-test-XXXXXX";
    if (!mkdtemp(tpl)) throw std::runtime_error("mkdtemp failed");
    dir_ = tpl;
    log_ = dir_ + "/qgated.log";
    address_ = "unix://" + dir_ + "/qgated.sock";
    const std::vector<std::string> args = {o.qgated, "--backend", "cpu", "--threads", "1", "--data-dir", dir_,
                                           "--listen", address_, "--max-queued-jobs",
                                           std::to_string(o.max_queued_jobs)};
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (slurp(log_).find("qgated: ready") == std::string::npos) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_ || Clock::now() > deadline) {
        pid_ = -1;
        throw std::runtime_error("qgated did not start:\n" + slurp(log_));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  /// SIGTERM and wait; returns whether it stopped cleanly within 30 s.
  bool stop() {
    if (pid_ <= 0) return true;
    kill(pid_, SIGTERM);
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    int status = 0;
    while (Clock::now() < deadline) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return false;
  }
  bool alive() const { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }
  ~Daemon() {
    stop();
    if (!keep_) fs::remove_all(dir_);
  }
  const std::string& address() const { return address_; }
  const std::string& dir() const { return dir_; }
  std::string log() const { return slurp(log_); }
  void keep() { keep_ = true; }

 private:
  std::string dir_, log_, address_;
  pid_t pid_ = -1;
  bool keep_ = false;
};

std::unique_ptr<qgate::v1::Harness::Stub> new_stub(const std::string& address) {
  return qgate::v1::Harness::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

/// Uploads the build with a job spec; returns the status and sets *job_id when accepted.
grpc::Status submit(qgate::v1::Harness::Stub& stub, const std::string& bytes, const qgate::v1::JobSpec& spec,
                    int64_t* job_id) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  qgate::v1::SubmitBuildResponse response;
  auto writer = stub.SubmitBuild(&context, &response);
  qgate::v1::SubmitBuildRequest request;
  request.mutable_header()->mutable_build()->set_name("load-test");
  *request.mutable_header()->mutable_job() = spec;
  request.mutable_header()->set_size_bytes(int64_t(bytes.size()));
  bool open = writer->Write(request);
  for (size_t at = 0; open && at < bytes.size(); at += 256 << 10) {
    request.set_chunk(bytes.substr(at, 256 << 10));
    open = writer->Write(request);
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (status.ok()) *job_id = response.job_id();
  return status;
}

int usage() {
  std::cerr << "usage: qgate-load-test [--clients N] [--seconds S] [--qgated PATH] [--build LIB.so]\n"
               "                       [--max-queued-jobs N] [--json-out FILE] [--keep]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  o.qgated = exe_dir() + "/qgated";
  o.build = exe_dir() + "/../lib/libqgate_ref.so";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "qgate-load-test: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--clients") o.clients = std::stoi(value());
    else if (a == "--seconds") o.seconds = std::stoi(value());
    else if (a == "--qgated") o.qgated = value();
    else if (a == "--build") o.build = value();
    else if (a == "--max-queued-jobs") o.max_queued_jobs = std::stoi(value());
    else if (a == "--json-out") o.json_out = value();
    else if (a == "--keep") o.keep = true;
    else return usage();
  }
  if (o.clients < 1 || o.seconds < 1) return usage();
  const std::string bytes = slurp(o.build);
  if (bytes.rfind("\x7f" "ELF", 0) != 0) {
    std::cerr << "qgate-load-test: " << o.build << " is not a shared object (give --build)\n";
    return 2;
  }

  try {
    Daemon daemon(o);
    if (o.keep) daemon.keep();
    auto setup = new_stub(daemon.address());
    // The job that runs throughout: an A/B of 1000 pairs on cpu-tiny, far longer than the load.
    qgate::v1::JobSpec long_ab;
    long_ab.set_kind(qgate::v1::JOB_KIND_AB);
    long_ab.set_profile("cpu-tiny");
    long_ab.mutable_policy()->set_min_pairs(1000);
    long_ab.mutable_policy()->set_max_pairs(1000);
    int64_t running_job = 0;
    if (grpc::Status s = submit(*setup, bytes, long_ab, &running_job); !s.ok()) {
      std::cerr << "qgate-load-test: the long job was refused: " << s.error_message() << "\n";
      return 3;
    }
    qgate::v1::JobSpec small_parity;
    small_parity.set_kind(qgate::v1::JOB_KIND_PARITY);

    std::atomic<int64_t> highest_job{running_job};
    std::vector<std::array<RpcTally, kRpcCount>> tallies(size_t(o.clients));
    const auto start = Clock::now();
    const auto stop_at = start + std::chrono::seconds(o.seconds);
    std::vector<std::thread> clients;
    for (int c = 0; c < o.clients; ++c) {
      clients.emplace_back([&, c] {
        auto stub = new_stub(daemon.address());
        std::mt19937 rng(uint32_t(1000 + c));
        auto& mine = tallies[size_t(c)];
        while (Clock::now() < stop_at) {
          const int rpc = pick_rpc(rng);
          grpc::Status s;
          const auto t0 = Clock::now();
          if (rpc == 3) {
            int64_t id = 0;
            s = submit(*stub, bytes, small_parity, &id);
            if (s.ok()) {
              int64_t seen = highest_job.load();
              while (id > seen && !highest_job.compare_exchange_weak(seen, id)) {
              }
            }
          } else {
            grpc::ClientContext context;
            context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
            if (rpc == 0) {
              qgate::v1::QueryTrendRequest request;
              request.set_profile("cpu-tiny");
              qgate::v1::QueryTrendResponse response;
              s = stub->QueryTrend(&context, request, &response);
            } else if (rpc == 1) {
              qgate::v1::ListJobsRequest request;
              qgate::v1::ListJobsResponse response;
              s = stub->ListJobs(&context, request, &response);
            } else {
              qgate::v1::GetJobRequest request;
              request.set_job_id(1 + int64_t(rng() % uint64_t(highest_job.load())));
              qgate::v1::Job response;
              s = stub->GetJob(&context, request, &response);
            }
          }
          const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
          auto& tally = mine[size_t(rpc)];
          if (s.ok()) {
            tally.ok_ms.push_back(ms);
          } else if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
            ++tally.refused;
          } else {
            ++tally.errors[code_name(s.error_code())];
            if (tally.error_samples.size() < 3) tally.error_samples.push_back(s.error_message());
          }
        }
      });
    }
    for (auto& t : clients) t.join();
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    const bool alive = daemon.alive();

    // Merge, print, write.
    nlohmann::json out = {{"clients", o.clients}, {"seconds", elapsed}, {"max_queued_jobs", o.max_queued_jobs},
                          {"mix_percent", {{"QueryTrend", 40}, {"ListJobs", 30}, {"GetJob", 20}, {"SubmitBuild", 10}}},
                          {"rpcs", nlohmann::json::object()}};
    int64_t all_calls = 0, all_errors = 0, all_refused = 0;
    std::map<std::string, int64_t> errors_by_code;
    std::vector<std::string> samples;
    std::printf("qgate-load-test: %d clients for %.1f s against qgated (cpu backend, one A/B job running)\n",
                o.clients, elapsed);
    std::printf("%-12s %9s %9s %8s %7s %9s %9s %9s\n", "RPC", "calls", "ok", "refused", "errors", "req/s",
                "p50 ms", "p99 ms");
    for (int r = 0; r < kRpcCount; ++r) {
      std::vector<double> ms;
      int64_t refused = 0, errors = 0;
      for (auto& t : tallies) {
        const auto& tally = t[size_t(r)];
        ms.insert(ms.end(), tally.ok_ms.begin(), tally.ok_ms.end());
        refused += tally.refused;
        for (const auto& [code, n] : tally.errors) {
          errors += n;
          errors_by_code[code] += n;
        }
        for (const auto& m : tally.error_samples)
          if (samples.size() < 10) samples.push_back(std::string(kRpcs[r]) + ": " + m);
      }
      std::sort(ms.begin(), ms.end());
      const int64_t calls = int64_t(ms.size()) + refused + errors;
      all_calls += calls;
      all_errors += errors;
      all_refused += refused;
      const double p50 = percentile(ms, 0.50), p99 = percentile(ms, 0.99);
      std::printf("%-12s %9lld %9zu %8lld %7lld %9.1f %9.2f %9.2f\n", kRpcs[r], (long long)calls, ms.size(),
                  (long long)refused, (long long)errors, double(calls) / elapsed, p50, p99);
      out["rpcs"][kRpcs[r]] = {{"calls", calls}, {"ok", ms.size()},        {"refused", refused},
                               {"errors", errors}, {"requests_per_s", double(calls) / elapsed},
                               {"p50_ms", p50},   {"p99_ms", p99}};
    }
    std::printf("%-12s %9lld %9lld %8lld %7lld %9.1f\n", "all", (long long)all_calls,
                (long long)(all_calls - all_refused - all_errors), (long long)all_refused, (long long)all_errors,
                double(all_calls) / elapsed);
    out["requests_per_s"] = double(all_calls) / elapsed;
    out["refused"] = all_refused;
    out["errors"] = all_errors;
    out["errors_by_code"] = errors_by_code;
    out["error_samples"] = samples;
    out["qgated_alive"] = alive;
    if (all_errors) {
      std::printf("errors by status:");
      for (const auto& [code, n] : errors_by_code) std::printf(" %s=%lld", code.c_str(), (long long)n);
      std::printf("\n");
      for (const auto& m : samples) std::printf("  %s\n", m.c_str());
    }
    const bool stopped = daemon.stop();
    out["qgated_stopped_cleanly"] = stopped;
    if (!o.json_out.empty()) std::ofstream(o.json_out) << out.dump(2) << "\n";
    if (!alive || !stopped) {
      std::cerr << "qgate-load-test: qgated " << (alive ? "did not stop cleanly" : "died during the load")
                << "; its log:\n" << daemon.log();
      return 1;
    }
    if (o.keep) std::printf("data dir kept: %s\n", daemon.dir().c_str());
    return all_errors == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "qgate-load-test: " << e.what() << "\n";
    return 3;
  }
}
