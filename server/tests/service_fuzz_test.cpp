// The Harness service under malformed and random requests, in-process: the real store (a temp-dir
// SQLite file), event hub, job runner, scheduler and HarnessService behind a gRPC server with no
// listening port, driven through an in-process channel.
//
// Why in-process rather than against a qgated binary: a crash or sanitizer report then points at the
// service code with a full stack, thousands of calls take seconds, and nothing listens on a socket.
// The scheduler runs with a worker binary that does not exist, so any job that gets through
// validation is claimed and fails at once (no kernel ever runs) and WatchJob/CancelJob meet jobs in
// every state. Requests come from a seeded std::mt19937, one per client thread, so a failing
// request can be found again from the seed printed with it.
#include <google/protobuf/stubs/logging.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "qgate/db/sqlite_store.h"
#include "qgate/profiles/model_profile.h"
#include "qgate/server/daemon_options.h"
#include "qgate/server/event_hub.h"
#include "qgate/server/harness_service.h"
#include "qgate/server/job_runner.h"
#include "qgate/server/scheduler.h"
#include "qgate/v1/harness.grpc.pb.h"

namespace qgate::server {
namespace {

namespace fs = std::filesystem;

constexpr int kThreads = 4;                 // concurrent clients: submits race on the duplicate checks
constexpr int kRequestsPerThread = 2500;    // 10,000 in all
constexpr uint32_t kSeed = 20261201;
constexpr auto kUnaryDeadline = std::chrono::seconds(10);  // generous: only a hang should reach it
constexpr auto kWatchDeadline = std::chrono::milliseconds(50);
constexpr auto kHangLimit = std::chrono::seconds(60);      // no call at all finished for this long

const char* const kRpcNames[] = {"SubmitBuild", "GetJob",  "ListJobs",   "CancelJob", "WatchJob",
                                 "QueryTrend",  "Compare", "ListBuilds", "GetDevice"};
constexpr int kRpcCount = 9;

/// No co-tenant sampling in process: jobs never run here anyway.
struct UnavailableSampler final : qgate::cotenant::Sampler {
  std::optional<qgate::cotenant::Sample> read(const std::set<int>&) override { return std::nullopt; }
  bool available() const override { return false; }
  std::string unavailable_reason() const override { return "in-process test"; }
};

// ---- the service, wired as qgated wires it, minus the listening port ----
struct InProcessDaemon {
  fs::path root;      // the test's temp dir; data_dir is root/data, so escapes from it are visible
  DaemonOptions options;
  std::unique_ptr<db::Store> store;
  EventHub events;
  UnavailableSampler sampler;
  std::unique_ptr<JobRunner> runner;
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<HarnessService> service;
  std::unique_ptr<grpc::Server> server;
  std::shared_ptr<grpc::Channel> channel;

  InProcessDaemon() {
    std::string tmpl = (fs::temp_directory_path() / "qgate-service-fuzz-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    root = tmpl;
    options.backend = "cpu";
    options.data_dir = (root / "data").string();
    options.db_path = options.data_dir + "/qgate.db";
    options.worker_binary = (root / "no-such-qgate-worker").string();  // jobs fail, nothing runs
    options.max_upload_bytes = 1 << 20;  // so random size_bytes hit the limit without big uploads
    fs::create_directories(options.data_dir);
    db::SqliteOptions so;
    so.path = options.db_path;
    store = db::open_sqlite_store(so);
    runner = std::make_unique<JobRunner>(*store, events, options, sampler);
    scheduler = std::make_unique<Scheduler>(*store, *runner, options.gpu);
    DeviceDescription device;
    device.name = "cpu";
    service = std::make_unique<HarnessService>(*store, events, *scheduler, options, device);
    grpc::ServerBuilder builder;
    builder.RegisterService(service.get());
    builder.SetMaxReceiveMessageSize(8 << 20);  // as qgated sets it
    server = builder.BuildAndStart();
    if (!server) throw std::runtime_error("the in-process server did not start");
    channel = server->InProcessChannel(grpc::ChannelArguments());
    scheduler->start();
  }

  ~InProcessDaemon() {
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    scheduler->stop();
    service.reset();
    scheduler.reset();
    runner.reset();
    store.reset();
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

// ---- random values, biased toward the edges validation has to get right ----
class Gen {
 public:
  explicit Gen(uint32_t seed) : rng_(seed) {}

  uint64_t u64() { return (uint64_t(rng_()) << 32) | rng_(); }
  int below(int n) { return int(rng_() % uint32_t(n)); }
  bool chance(int percent) { return below(100) < percent; }

  int64_t i64() {
    static const int64_t edges[] = {0, 1, -1, 2, 3, 42, 1000, 65536, 65537, 1000000000,
                                    std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min(),
                                    std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
                                    int64_t(1) << 40};
    switch (below(4)) {
      case 0: return edges[below(int(std::size(edges)))];
      case 1: return below(40);  // small: hits ids that exist
      case 2: return -int64_t(below(1000));
      default: return int64_t(u64());
    }
  }
  int32_t i32() {
    static const int32_t edges[] = {0, 1, -1, 4, 40, 1000, 1001, 10000, 10001, std::numeric_limits<int32_t>::max(),
                                    std::numeric_limits<int32_t>::min()};
    return chance(60) ? edges[below(int(std::size(edges)))] : int32_t(rng_());
  }
  double f64() {
    static const double edges[] = {0.0, 0.02, -0.01, 0.999, 1.0, 1e308, -1e308, 5e-324,
                                   std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                                   -std::numeric_limits<double>::infinity()};
    return chance(70) ? edges[below(int(std::size(edges)))] : std::uniform_real_distribution<double>(-2, 2)(rng_);
  }

  std::string bytes(size_t max_len) {
    std::string s(size_t(below(int(max_len) + 1)), '\0');
    for (auto& c : s) c = char(rng_());
    return s;
  }

  /// Names: valid ones from a small pool (so duplicates and baselines resolve), and the shapes a
  /// path-like or hostile name takes.
  std::string name() {
    static const char* const pool[] = {"mmq-a", "mmq-b", "base_1", "v1.2.3", "x"};
    switch (below(16)) {
      case 0: return "";
      case 1: return "../../etc/passwd";
      case 2: return "a/b";
      case 3: return "..";
      case 4: return ".hidden";
      case 5: return "-flag";
      case 6: return std::string("nul\0byte", 8);
      case 7: return std::string(10 * 1024, 'n');
      case 8: return std::string(128, 'a');  // the longest valid name
      case 9: return std::string(129, 'a');  // one too long
      case 10: return "name with space";
      case 11: return "'; DROP TABLE builds; --";
      case 12: return "caf\xc3\xa9";         // valid UTF-8, not a plain name
      case 13: return "*";
      default: return pool[below(int(std::size(pool)))];
    }
  }

  std::string profile_name() {
    static const std::vector<std::string> builtin = profiles::builtin_profile_names();
    switch (below(6)) {
      case 0: return "";
      case 1: return name();
      case 2: return "../profiles/x";
      default: return builtin.empty() ? "" : builtin[size_t(below(int(builtin.size())))];
    }
  }

  std::string choice(std::initializer_list<const char*> options) {
    const int i = below(int(options.size()));
    return *(options.begin() + i);
  }

  std::string weight_type() { return choice({"q4_0", "q4_1", "q8_0", "q4_K", "q5_K", "q6_K", "f16", "f32", "", "Q4_0", "bogus"}); }

  void custom_profile(v1::ModelProfile* p) {
    p->set_name(chance(70) ? std::string("custom") : name());
    const int n = chance(5) ? 4097 : below(6);
    for (int i = 0; i < n; ++i) {
      auto* g = p->add_gemms();
      g->set_type(chance(80) ? choice({"q4_0", "q8_0", "q4_K", "q6_K"}) : weight_type());
      g->set_od(chance(70) ? 256 * (1 + below(16)) : i64());
      g->set_k(chance(70) ? 256 * (1 + below(16)) : i64());
      g->set_count(chance(70) ? 1 + below(32) : i32());
      g->set_role(chance(90) ? "ffn_up" : std::string(10 * 1024, 'r'));
    }
  }

  /// A header: mostly plausible (so some uploads are accepted), with one or more fields pushed to
  /// an edge.
  v1::SubmitHeader header(bool plausible) {
    v1::SubmitHeader h;
    auto* b = h.mutable_build();
    auto* j = h.mutable_job();
    if (plausible) {
      static const char* const pool[] = {"mmq-a", "mmq-b", "base_1", "v1.2.3", "x"};
      b->set_name(pool[below(int(std::size(pool)))]);
      if (chance(50)) b->set_commit(choice({"abc123", "def456", ""}));
      j->set_kind(chance(50) ? v1::JOB_KIND_AB : v1::JOB_KIND_PARITY);
      if (chance(20)) {
        j->set_kind(v1::JOB_KIND_GATE);
        j->set_baseline(chance(50) ? std::string(pool[below(int(std::size(pool)))]) : std::to_string(below(20)));
      }
      j->set_tokens(below(3) == 0 ? 0 : 1 + below(512));
      if (chance(30)) j->set_profile(profile_name());
      if (chance(10)) custom_profile(j->mutable_custom_profile());
      return h;
    }
    b->set_name(name());
    b->set_commit(chance(50) ? name() : bytes(64));
    b->set_branch(chance(90) ? "main" : std::string(10 * 1024, 'b'));
    b->set_flags(name());
    j->set_kind(static_cast<v1::JobKind>(chance(50) ? below(6) - 1 : i32()));  // unknown enum numbers too
    j->set_profile(profile_name());
    j->set_tokens(chance(50) ? choice_i64({0, 1, 65536, 65537, 1000000000, -1}) : i64());
    j->set_baseline(chance(50) ? name() : std::to_string(i64()));
    j->mutable_policy()->set_slowdown_threshold(f64());
    j->mutable_policy()->set_min_pairs(i32());
    j->mutable_policy()->set_max_pairs(i32());
    j->mutable_policy()->set_target_halfwidth(f64());
    j->set_fresh_process(chance(50));
    j->set_repetitions(i32());
    // The spec's enums, with numbers no version of the schema defines too.
    j->set_parity_shapes(static_cast<v1::ShapeSet>(chance(80) ? below(4) : i32()));
    j->set_order(static_cast<v1::RunOrder>(chance(80) ? below(3) : i32()));
    j->set_timing(static_cast<v1::TimingMode>(chance(80) ? below(3) : i32()));
    j->set_path(choice({"", "mmq", "f16", "MMQ", "cublas", std::string("mmq\0", 4).c_str()}));
    j->set_seed(u64());
    if (chance(30)) custom_profile(j->mutable_custom_profile());
    h.set_size_bytes(chance(50) ? choice_i64({0, -1, 100, 1 << 20, (1 << 20) + 1}) : i64());
    return h;
  }

  int64_t choice_i64(std::initializer_list<int64_t> options) { return *(options.begin() + below(int(options.size()))); }

  /// Either a structured message or random bytes parsed into it (whatever part of them parses).
  template <typename Msg>
  void maybe_from_bytes(Msg* m) {
    if (chance(25)) {
      Msg parsed;
      (void)parsed.ParsePartialFromString(bytes(chance(90) ? 64 : 4096));
      *m = parsed;
    }
  }

  std::mt19937& rng() { return rng_; }

 private:
  std::mt19937 rng_;
};

// ---- the client side: every call bounded by a deadline, its status counted ----
struct Histogram {
  std::mutex mu;
  std::map<int, int> by_code;
  std::map<std::pair<std::string, int>, int> by_rpc;
  void add(const std::string& rpc, const grpc::Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    ++by_code[int(s.error_code())];
    ++by_rpc[{rpc, int(s.error_code())}];
  }
};

const char* code_name(int code) {
  static const char* const names[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                                      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                      "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
                                      "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  return code >= 0 && code < 17 ? names[code] : "?";
}

/// What each client thread is doing, for the hang watchdog's report.
struct Progress {
  std::mutex mu;
  std::vector<std::string> current = std::vector<std::string>(kThreads);
  std::atomic<int64_t> finished{0};
  void set(int thread, std::string what) {
    std::lock_guard<std::mutex> lock(mu);
    current[size_t(thread)] = std::move(what);
  }
};

std::string describe(const google::protobuf::Message& m) {
  std::string s = m.ShortDebugString();
  if (s.size() > 600) s = s.substr(0, 600) + "...(" + std::to_string(s.size()) + " chars)";
  return s;
}

void set_deadline(grpc::ClientContext* ctx, std::chrono::milliseconds d) {
  ctx->set_deadline(std::chrono::system_clock::now() + d);
}

struct SubmitOutcome {
  grpc::Status status;
  v1::SubmitHeader header;  // the last header sent (what an accepted job must have come from)
  v1::SubmitBuildResponse response;
  bool sent_header = false;
};

/// One SubmitBuild stream: a random order of headers, chunks and empty messages; on the plausible
/// path a header, then an ELF image in a few chunks (so the upload is actually stored).
SubmitOutcome submit(v1::Harness::Stub& stub, Gen& g, std::string* trace) {
  SubmitOutcome out;
  grpc::ClientContext ctx;
  set_deadline(&ctx, kUnaryDeadline);
  auto writer = stub.SubmitBuild(&ctx, &out.response);
  std::vector<v1::SubmitBuildRequest> parts;
  if (g.chance(40)) {
    v1::SubmitBuildRequest h;
    *h.mutable_header() = g.header(true);
    // An ELF-looking image, up to 48 KiB, unique per call or one of a few shared ones (duplicates).
    std::string image = std::string("\x7f" "ELF\x02\x01\x01", 7) + std::string(9, '\0');
    const uint64_t tag = g.chance(50) ? uint64_t(g.below(4)) : g.u64();
    image += std::to_string(tag);
    image += std::string(size_t(g.below(48 * 1024)), 'z');
    if (g.chance(30)) h.mutable_header()->set_size_bytes(int64_t(image.size()));
    parts.push_back(h);
    for (size_t off = 0; off < image.size();) {
      const size_t n = std::min(image.size() - off, size_t(1 + g.below(16 * 1024)));
      v1::SubmitBuildRequest c;
      c.set_chunk(image.substr(off, n));
      parts.push_back(c);
      off += n;
    }
  } else {
    const int n = g.below(6);
    for (int i = 0; i < n; ++i) {
      v1::SubmitBuildRequest r;
      switch (g.below(5)) {
        case 0: *r.mutable_header() = g.header(false); break;
        case 1: *r.mutable_header() = g.header(true); break;
        case 2: r.set_chunk(g.chance(50) ? std::string("\x7f" "ELF", 4) + g.bytes(2048) : g.bytes(4096)); break;
        case 3: break;  // an empty message: no part set
        default: (void)r.ParsePartialFromString(g.bytes(128)); break;
      }
      parts.push_back(r);
    }
  }
  for (const auto& p : parts) {
    if (p.has_header()) {
      out.header = p.header();
      out.sent_header = true;
    }
    *trace += (p.has_header() ? "header{" + describe(p.header()) + "} "
               : p.part_case() == v1::SubmitBuildRequest::kChunk ? "chunk[" + std::to_string(p.chunk().size()) + "] "
                                                                  : "empty ");
    if (!writer->Write(p)) break;  // the server has finished the call (a rejection)
  }
  writer->WritesDone();
  out.status = writer->Finish();
  return out;
}

grpc::Status watch(v1::Harness::Stub& stub, const v1::WatchJobRequest& req) {
  grpc::ClientContext ctx;
  set_deadline(&ctx, kWatchDeadline);
  auto reader = stub.WatchJob(&ctx, req);
  v1::JobEvent e;
  int events = 0;
  while (reader->Read(&e)) ++events;
  return reader->Finish();
}

/// Raw bytes straight onto the wire as a method's request: what no generated stub can send.
grpc::Status raw_call(grpc::GenericStub& stub, const std::string& method, const std::string& payload) {
  grpc::ClientContext ctx;
  set_deadline(&ctx, std::chrono::milliseconds(kWatchDeadline) * 4);
  grpc::Slice slice(payload);
  grpc::ByteBuffer request(&slice, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  return done.get_future().get();
}

// protobuf logs each invalid UTF-8 string it refuses to send or parse (some random commits are
// such strings, on purpose); counted rather than printed a few hundred times.
std::atomic<int> protobuf_log_lines{0};
void count_protobuf_log(google::protobuf::LogLevel, const char*, int, const std::string&) { ++protobuf_log_lines; }

TEST(ServiceFuzz, MalformedAndRandomRequestsAllEndWithAStatus) {
  google::protobuf::LogHandler* previous_log = google::protobuf::SetLogHandler(&count_protobuf_log);
  InProcessDaemon d;
  Histogram hist;
  Progress progress;
  std::mutex accepted_mu;
  std::vector<SubmitOutcome> accepted;
  std::atomic<bool> stop_watchdog{false};

  // A hang is a finding: name the call each thread is stuck in, then abort with a core.
  std::thread watchdog([&] {
    int64_t last = -1;
    auto last_change = std::chrono::steady_clock::now();
    while (!stop_watchdog.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const int64_t now_done = progress.finished.load();
      if (now_done != last) {
        last = now_done;
        last_change = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - last_change > kHangLimit) {
        std::lock_guard<std::mutex> lock(progress.mu);
        std::cerr << "HANG: no call finished for " << kHangLimit.count() << " s; in flight:\n";
        for (int t = 0; t < kThreads; ++t) std::cerr << "  thread " << t << ": " << progress.current[size_t(t)] << "\n";
        std::abort();
      }
    }
  });

  auto client = [&](int thread) {
    Gen g(kSeed + uint32_t(thread));
    auto stub = v1::Harness::NewStub(d.channel);
    grpc::GenericStub generic(d.channel);
    for (int i = 0; i < kRequestsPerThread; ++i) {
      const int rpc = g.below(kRpcCount);
      std::string trace = "seed " + std::to_string(kSeed + uint32_t(thread)) + " call " + std::to_string(i) + " ";
      grpc::Status s;
      if (g.chance(5)) {
        // Raw garbage as the request of any method, server-streaming and client-streaming included.
        const std::string payload = g.bytes(g.chance(90) ? 64 : 8192);
        trace += std::string("raw ") + kRpcNames[rpc] + " [" + std::to_string(payload.size()) + " bytes]";
        progress.set(thread, trace);
        s = raw_call(generic, std::string("/qgate.v1.Harness/") + kRpcNames[rpc], payload);
        hist.add(std::string("raw:") + kRpcNames[rpc], s);
        progress.finished.fetch_add(1);
        continue;
      }
      trace += kRpcNames[rpc];
      grpc::ClientContext ctx;
      set_deadline(&ctx, kUnaryDeadline);
      switch (rpc) {
        case 0: {
          progress.set(thread, trace + " (stream)");
          SubmitOutcome o = submit(*stub, g, &trace);
          progress.set(thread, trace);
          s = o.status;
          if (s.ok()) {
            std::lock_guard<std::mutex> lock(accepted_mu);
            accepted.push_back(std::move(o));
          }
          break;
        }
        case 1: {
          v1::GetJobRequest r;
          r.set_job_id(g.i64());
          g.maybe_from_bytes(&r);
          progress.set(thread, trace + " " + describe(r));
          v1::Job resp;
          s = stub->GetJob(&ctx, r, &resp);
          break;
        }
        case 2: {
          v1::ListJobsRequest r;
          r.set_state(static_cast<v1::JobState>(g.chance(60) ? g.below(8) - 1 : g.i32()));
          r.set_limit(g.i32());
          g.maybe_from_bytes(&r);
          progress.set(thread, trace + " " + describe(r));
          v1::ListJobsResponse resp;
          s = stub->ListJobs(&ctx, r, &resp);
          break;
        }
        case 3: {
          v1::CancelJobRequest r;
          r.set_job_id(g.i64());
          g.maybe_from_bytes(&r);
          progress.set(thread, trace + " " + describe(r));
          v1::Job resp;
          s = stub->CancelJob(&ctx, r, &resp);
          break;
        }
        case 4: {
          v1::WatchJobRequest r;
          r.set_job_id(g.i64());
          g.maybe_from_bytes(&r);
          progress.set(thread, trace + " " + describe(r));
          s = watch(*stub, r);
          break;
        }
        case 5: {
          v1::QueryTrendRequest r;
          r.set_profile(g.profile_name());
          r.set_weight_type(g.weight_type());
          r.set_since_unix_ms(g.i64());
          r.set_build_glob(g.choice({"", "*", "mmq-*", "[", "[!]", "%", "_", "\\", "**/../*"}));
          r.set_include_contended(g.chance(50));
          r.set_path(g.choice({"", "mmq", "f16", "x"}));
          r.set_limit(g.i32());
          if (g.chance(5)) r.set_build_glob(std::string(10 * 1024, '*'));
          g.maybe_from_bytes(&r);
          progress.set(thread, trace + " " + describe(r));
          v1::QueryTrendResponse resp;
          s = stub->QueryTrend(&ctx, r, &resp);
          break;
        }
        case 6: {
          v1::CompareRequest r;
          r.set_build_a(g.chance(50) ? g.name() : std::to_string(g.i64()));
          r.set_build_b(g.chance(50) ? g.name() : std::string(64, char('0' + g.below(10))));
          r.set_include_contended(g.chance(50));
          g.maybe_from_bytes(&r);
          progress.set(thread, trace + " " + describe(r));
          v1::CompareResponse resp;
          s = stub->Compare(&ctx, r, &resp);
          break;
        }
        case 7: {
          v1::ListBuildsRequest r;
          r.set_name(g.name());
          r.set_limit(g.i32());
          g.maybe_from_bytes(&r);
          progress.set(thread, trace + " " + describe(r));
          v1::ListBuildsResponse resp;
          s = stub->ListBuilds(&ctx, r, &resp);
          break;
        }
        default: {
          v1::GetDeviceRequest r;
          g.maybe_from_bytes(&r);
          progress.set(thread, trace);
          v1::DeviceStatus resp;
          s = stub->GetDevice(&ctx, r, &resp);
          break;
        }
      }
      hist.add(kRpcNames[rpc], s);
      progress.finished.fetch_add(1);
      // A deadline on a unary call means the service sat on it for 10 s: as bad as a hang.
      if (rpc != 4) {
        EXPECT_NE(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << trace;
      }
      // The service maps every store and validation problem to a status; INTERNAL/UNKNOWN would
      // mean an exception escaped its intended path.
      EXPECT_NE(s.error_code(), grpc::StatusCode::UNKNOWN) << trace << ": " << s.error_message();
    }
  };

  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(client, t);
  for (auto& t : threads) t.join();
  stop_watchdog = true;
  watchdog.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // The histogram, overall and per RPC.
  int total = 0;
  std::cout << "service fuzz: " << progress.finished.load() << " calls in " << seconds << " s\n";
  for (const auto& [code, n] : hist.by_code) {
    std::cout << "  " << code_name(code) << ": " << n << "\n";
    total += n;
  }
  for (const auto& [key, n] : hist.by_rpc) std::cout << "    " << key.first << " " << code_name(key.second) << ": " << n << "\n";
  EXPECT_EQ(total, kThreads * kRequestsPerThread);

  // The service still answers valid requests.
  auto stub = v1::Harness::NewStub(d.channel);
  {
    grpc::ClientContext ctx;
    set_deadline(&ctx, kUnaryDeadline);
    v1::DeviceStatus dev;
    const grpc::Status s = stub->GetDevice(&ctx, v1::GetDeviceRequest(), &dev);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(dev.backend(), "cpu");
  }
  v1::ListJobsResponse jobs;
  {
    grpc::ClientContext ctx;
    set_deadline(&ctx, kUnaryDeadline);
    v1::ListJobsRequest r;
    r.set_limit(10000);
    const grpc::Status s = stub->ListJobs(&ctx, r, &jobs);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  v1::ListBuildsResponse builds;
  {
    grpc::ClientContext ctx;
    set_deadline(&ctx, kUnaryDeadline);
    v1::ListBuildsRequest r;
    r.set_limit(100000);
    const grpc::Status s = stub->ListBuilds(&ctx, r, &builds);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  google::protobuf::SetLogHandler(previous_log);
  std::cout << "  protobuf log lines (invalid UTF-8 refused): " << protobuf_log_lines.load() << "\n";
  std::cout << "  accepted uploads: " << accepted.size() << ", jobs stored: " << jobs.jobs_size()
            << ", builds stored: " << builds.builds_size() << "\n";

  // Everything that got in passed validation: the same rules, restated here independently.
  const std::regex plain_name("[A-Za-z0-9_][A-Za-z0-9._-]{0,127}");
  const auto builtin = profiles::builtin_profile_names();
  const std::set<std::string> builtin_set(builtin.begin(), builtin.end());
  EXPECT_EQ(size_t(jobs.jobs_size()), accepted.size()) << "every accepted upload made exactly one job";
  for (const auto& j : jobs.jobs()) {
    SCOPED_TRACE("job " + describe(j));
    EXPECT_TRUE(std::regex_match(j.build().metadata().name(), plain_name));
    EXPECT_TRUE(j.spec().kind() == v1::JOB_KIND_GATE || j.spec().kind() == v1::JOB_KIND_AB ||
                j.spec().kind() == v1::JOB_KIND_PARITY);
    EXPECT_GE(j.spec().tokens(), 0);
    EXPECT_LE(j.spec().tokens(), 65536);
    EXPECT_TRUE(j.spec().profile().empty() || builtin_set.count(j.spec().profile()));
    EXPECT_TRUE(j.spec().path().empty() || j.spec().path() == "mmq" || j.spec().path() == "f16");
    if (j.spec().kind() == v1::JOB_KIND_GATE) {
      EXPECT_TRUE(j.has_baseline());
    }
  }
  for (const auto& b : builds.builds()) EXPECT_TRUE(std::regex_match(b.metadata().name(), plain_name)) << describe(b);
  for (const auto& a : accepted) {
    EXPECT_TRUE(a.sent_header);
    EXPECT_GT(a.response.job_id(), 0);
    EXPECT_EQ(a.response.build().metadata().name(), a.header.build().name());
  }
  // Nothing was written outside the data dir (names such as "../../etc/passwd" never became paths).
  for (const auto& entry : fs::directory_iterator(d.root)) EXPECT_EQ(entry.path().filename(), "data") << entry.path();
  for (const auto& entry : fs::recursive_directory_iterator(d.options.data_dir)) {
    const std::string rel = fs::relative(entry.path(), d.options.data_dir).string();
    EXPECT_EQ(rel.find(".."), std::string::npos) << rel;
  }
}

// A SubmitBuild stream whose third message is not a SubmitBuildRequest at all (bytes only a raw
// client can send): header, ELF chunk, garbage. The upload is incomplete, so it must not be stored.
// (gRPC reports an undecodable message to the read reactor exactly as it reports the client's end
// of stream, OnReadDone(false), which is what this pins down.)
// DISABLED: it fails today. SubmitReactor::complete() commits the upload when size_bytes is 0 (the
// size check is skipped), so the truncated build is stored and a job queued with status OK. Enable
// once the service closes that gap (e.g. by requiring size_bytes > 0, which the qgate CLI always sends).
TEST(ServiceFuzz, UndecodableMessageMidUploadIsNotAccepted) {
  InProcessDaemon d;
  grpc::GenericStub stub(d.channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  set_deadline(&ctx, kUnaryDeadline);
  auto call = stub.PrepareCall(&ctx, "/qgate.v1.Harness/SubmitBuild", &cq);
  ASSERT_TRUE(call);
  auto step = [&cq](intptr_t tag) {
    void* got = nullptr;
    bool ok = false;
    EXPECT_TRUE(cq.Next(&got, &ok));
    EXPECT_EQ(reinterpret_cast<intptr_t>(got), tag);
    return ok;
  };
  auto buffer = [](const std::string& bytes) {
    grpc::Slice slice(bytes);
    return grpc::ByteBuffer(&slice, 1);
  };
  v1::SubmitBuildRequest header;
  header.mutable_header()->mutable_build()->set_name("truncated");
  header.mutable_header()->mutable_job()->set_kind(v1::JOB_KIND_PARITY);  // size_bytes 0: not checked
  v1::SubmitBuildRequest chunk;
  chunk.set_chunk(std::string("\x7f" "ELF", 4) + std::string(1000, 'x'));
  call->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(step(1));
  bool writes_ok = true;
  grpc::ByteBuffer b1 = buffer(header.SerializeAsString()), b2 = buffer(chunk.SerializeAsString()),
                   b3 = buffer(std::string("\x0f\x01\x02", 3));  // wire type 7: never decodes
  call->Write(b1, reinterpret_cast<void*>(2));
  writes_ok &= step(2);
  call->Write(b2, reinterpret_cast<void*>(3));
  writes_ok &= step(3);
  call->Write(b3, reinterpret_cast<void*>(4));
  writes_ok &= step(4);
  call->WritesDone(reinterpret_cast<void*>(5));
  step(5);
  grpc::ByteBuffer response;
  call->Read(&response, reinterpret_cast<void*>(6));
  step(6);
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(7));
  step(7);
  std::cout << "undecodable message mid-upload: " << code_name(int(status.error_code())) << " '"
            << status.error_message() << "' (writes " << (writes_ok ? "all accepted" : "cut short") << ")\n";
  EXPECT_FALSE(status.ok()) << "an upload cut short by an undecodable message was stored as complete";
  ctx.TryCancel();
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
}

}  // namespace
}  // namespace qgate::server
