// The Harness RPCs. Every request is validated here; every store error becomes a status here.
#include "qgate/server/harness_service.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <filesystem>
#include <mutex>
#include <regex>
#include <set>
#include <utility>

#include "qgate/profiles/model_profile.h"
#include "qgate/common/weight_types.h"
#include "qgate/server/artifact_store.h"
#include "qgate/server/compare_builds.h"
#include "qgate/server/job_records.h"
#include "qgate/stats/ab_statistics.h"

#ifndef QGATE_VERSION
#define QGATE_VERSION "0.0.0"
#endif

namespace qgate::server {
namespace {

constexpr int64_t kMaxTokens = 65536;
constexpr int kMaxPairs = 1000;

grpc::Status invalid(const std::string& message) { return {grpc::StatusCode::INVALID_ARGUMENT, message}; }

/// Runs `fn`, turning store and other exceptions into a status (the only place that happens).
template <typename Fn>
grpc::Status guarded(Fn&& fn) {
  try {
    return fn();
  } catch (const db::StoreError& e) {
    // Only a busy store is worth retrying at once; a full disk or a read-only file is not, and must
    // not read as "qgated is unreachable" on the client.
    const auto code = e.kind() == db::StoreErrorKind::Busy   ? grpc::StatusCode::UNAVAILABLE
                      : e.kind() == db::StoreErrorKind::Full ? grpc::StatusCode::RESOURCE_EXHAUSTED
                                                             : grpc::StatusCode::INTERNAL;
    return {code, std::string("qgated's database failed: ") + e.what()};
  } catch (const std::exception& e) {
    return {grpc::StatusCode::INTERNAL, e.what()};
  }
}

grpc::ServerUnaryReactor* finish(grpc::CallbackServerContext* context, const grpc::Status& status) {
  auto* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

bool valid_build_name(const std::string& name) {
  static const std::regex pattern("[A-Za-z0-9_][A-Za-z0-9._-]{0,127}");
  return std::regex_match(name, pattern);
}

/// A place among a bounded number of concurrent streams (WatchJob, SubmitBuild), given back when
/// the stream's reactor is deleted. A request over the bound is refused at once, not queued.
class StreamSlot {
 public:
  StreamSlot(StreamSlot&& other) noexcept : open_(std::exchange(other.open_, nullptr)) {}
  StreamSlot& operator=(StreamSlot&&) = delete;
  ~StreamSlot() {
    if (open_) open_->fetch_sub(1);
  }
  /// A slot when fewer than `limit` are taken, else nothing.
  static std::optional<StreamSlot> take(std::atomic<int>& open, int limit) {
    if (open.fetch_add(1) >= limit) {
      open.fetch_sub(1);
      return std::nullopt;
    }
    return StreamSlot(&open);
  }

 private:
  explicit StreamSlot(std::atomic<int>* open) : open_(open) {}
  std::atomic<int>* open_;
};

grpc::Status too_many_streams(const char* what, int limit, const char* flag) {
  return {grpc::StatusCode::RESOURCE_EXHAUSTED, std::string("qgated already serves ") + std::to_string(limit) + " " +
                                                    what + " (its " + flag + " bound); try again later"};
}

/// A WatchJob stream refused before it starts.
class RefusedWatch final : public grpc::ServerWriteReactor<v1::JobEvent> {
 public:
  explicit RefusedWatch(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

// ---- SubmitBuild: a client stream of a header and chunks ----
class SubmitReactor final : public grpc::ServerReadReactor<v1::SubmitBuildRequest> {
 public:
  SubmitReactor(HarnessService& service, const DaemonOptions& options, grpc::CallbackServerContext* context,
                v1::SubmitBuildResponse* response, std::optional<StreamSlot> slot)
      : service_(service), options_(options), context_(context), response_(response), slot_(std::move(slot)) {
    if (grpc::Status auth = service_.authorize(context); !auth.ok()) {
      end_upload(auth);
      return;
    }
    if (!slot_) {
      end_upload(too_many_streams("uploads", options_.max_uploads, "--max-uploads"));
      return;
    }
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // A client that went away mid-upload gets no job, even if every byte had arrived.
      if (context_->IsCancelled()) return end_upload({grpc::StatusCode::CANCELLED, "the client went away"});
      end_upload(complete());
      return;
    }
    if (request_.has_header()) {
      if (have_header_) return end_upload(invalid("the header must be sent once, first"));
      header_ = request_.header();
      grpc::Status s = service_.validate_header(header_, &baseline_);
      if (!s.ok()) return end_upload(s);
      if (header_.size_bytes() > options_.max_upload_bytes)
        return end_upload({grpc::StatusCode::RESOURCE_EXHAUSTED,
                       "the build is " + std::to_string(header_.size_bytes()) + " bytes; the limit is " +
                           std::to_string(options_.max_upload_bytes)});
      try {
        upload_ = std::make_unique<ArtifactUpload>(options_.data_dir + "/artifacts", options_.max_upload_bytes);
      } catch (const std::exception& e) {
        return end_upload({grpc::StatusCode::INTERNAL, e.what()});
      }
      have_header_ = true;
    } else if (request_.part_case() == v1::SubmitBuildRequest::kChunk) {
      if (!have_header_) return end_upload(invalid("the header must come before the build's bytes"));
      std::string error;
      if (!upload_->append(request_.chunk(), &error))
        return end_upload({error.find("limit") != std::string::npos ? grpc::StatusCode::RESOURCE_EXHAUSTED
                                                                 : grpc::StatusCode::INTERNAL,
                       error});
    } else {
      return end_upload(invalid("an empty message in the upload stream"));
    }
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  /// Finishes the stream and gives its place back at once: the client may start its next upload as
  /// soon as it has this status, before gRPC gets round to deleting this reactor.
  void end_upload(const grpc::Status& status) {
    slot_.reset();
    Finish(status);
  }

  grpc::Status complete() {
    if (!have_header_) return invalid("no header: send the build's metadata and job spec first");
    if (upload_->size() == 0) return invalid("the upload is empty: no build bytes were sent");
    if (header_.size_bytes() != upload_->size())
      return invalid("the upload is " + std::to_string(upload_->size()) + " bytes but the header said " +
                     std::to_string(header_.size_bytes()));
    if (upload_->head().rfind("\x7f" "ELF", 0) != 0) return invalid("the build is not an ELF shared object");
    std::string sha, error;
    const std::string path = upload_->commit(&sha, &error);
    if (path.empty()) return {grpc::StatusCode::INTERNAL, error};
    return service_.accept_upload(header_, path, sha, upload_->size(), response_);
  }

  HarnessService& service_;
  const DaemonOptions& options_;
  grpc::CallbackServerContext* context_;
  v1::SubmitBuildResponse* response_;
  v1::SubmitBuildRequest request_;
  v1::SubmitHeader header_;
  bool have_header_ = false;
  std::optional<db::Build> baseline_;
  std::unique_ptr<ArtifactUpload> upload_;
  std::optional<StreamSlot> slot_;
};

// ---- WatchJob: events until the job ends ----
class WatchReactor final : public grpc::ServerWriteReactor<v1::JobEvent> {
 public:
  WatchReactor(EventHub& hub, db::Store& store, int64_t job_id, StreamSlot slot)
      : hub_(hub), state_(std::make_shared<State>()), slot_(std::move(slot)) {
    state_->reactor = this;
    // Subscribe first, then send the current state, so no event falls between the two.
    auto state = state_;
    token_ = hub_.subscribe(job_id, [state](const v1::JobEvent& e) { state->push(e); });
    try {
      auto job = store.find_job(job_id);
      if (!job) {
        hub_.unsubscribe(token_);
        std::lock_guard<std::mutex> lock(state_->mu);
        finish_locked({grpc::StatusCode::NOT_FOUND, "no job " + std::to_string(job_id)});
        return;
      }
      const v1::Job j = to_proto(store, *job);
      v1::JobEvent first;
      first.set_job_id(job_id);
      first.set_state(j.state());
      *first.mutable_progress() = j.progress();
      first.set_message(j.error());
      if (j.has_verdict()) *first.mutable_verdict() = j.verdict();
      state_->push(first);
    } catch (const std::exception& e) {
      // An event published meanwhile may already be writing: finish through the state, once.
      hub_.unsubscribe(token_);
      std::lock_guard<std::mutex> lock(state_->mu);
      finish_locked({grpc::StatusCode::UNAVAILABLE, e.what()});
    }
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->queue.erase(state_->queue.begin());
    state_->writing = false;
    if (!ok) return finish_locked({grpc::StatusCode::CANCELLED, "the client went away"});
    if (state_->last_written_final) return finish_locked(grpc::Status::OK);
    state_->write_next_locked();
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> lock(state_->mu);
    finish_locked({grpc::StatusCode::CANCELLED, "cancelled"});
  }

  void OnDone() override {
    hub_.unsubscribe(token_);
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->closed = true;
    }
    delete this;
  }

 private:
  struct State {
    std::mutex mu;
    WatchReactor* reactor = nullptr;
    // A deque, not a vector: until gRPC binds the reactor (the handler has not returned yet),
    // StartWrite only keeps the pointer to queue.front(), and an event published meanwhile must
    // not move it (a vector's push_back did, and the bound stream then wrote freed memory).
    std::deque<v1::JobEvent> queue;
    bool writing = false;
    bool finished = false;
    bool closed = false;
    bool last_written_final = false;

    static bool is_final(const v1::JobEvent& e) {
      return e.state() == v1::JOB_STATE_DONE || e.state() == v1::JOB_STATE_FAILED ||
             e.state() == v1::JOB_STATE_CANCELLED || e.state() == v1::JOB_STATE_EXPIRED;
    }
    void push(const v1::JobEvent& e) {
      std::lock_guard<std::mutex> lock(mu);
      if (closed || finished) return;
      queue.push_back(e);
      if (!writing) write_next_locked();
    }
    void write_next_locked() {
      if (queue.empty() || finished) return;
      writing = true;
      last_written_final = is_final(queue.front());
      reactor->StartWrite(&queue.front());
    }
  };

  void finish_locked(const grpc::Status& status) {
    if (state_->finished) return;
    state_->finished = true;
    slot_.reset();  // the place is free once the client can see the stream end
    Finish(status);
  }

  EventHub& hub_;
  std::shared_ptr<State> state_;
  std::optional<StreamSlot> slot_;
  int64_t token_ = 0;
};

}  // namespace

HarnessService::HarnessService(db::Store& store, EventHub& events, Scheduler& scheduler,
                               const DaemonOptions& options, DeviceDescription device)
    : store_(store), events_(events), scheduler_(scheduler), options_(options), device_(std::move(device)) {}

std::optional<db::Build> HarnessService::resolve_build(const std::string& name_or_id) const {
  if (name_or_id.empty()) return std::nullopt;
  if (std::all_of(name_or_id.begin(), name_or_id.end(), ::isdigit) && name_or_id.size() < 18)
    if (auto b = store_.find_build(std::stoll(name_or_id))) return b;
  if (name_or_id.size() == 64)
    if (auto b = store_.find_build_by_sha256(name_or_id)) return b;
  return store_.find_latest_build_by_name(name_or_id);
}

grpc::Status HarnessService::validate_header(const v1::SubmitHeader& header, std::optional<db::Build>* baseline) const {
  const auto& b = header.build();
  if (!valid_build_name(b.name()))
    return invalid("build name '" + b.name() +
                   "' must be 1-128 letters, digits, '.', '_' or '-', not starting with '.' or '-'");
  const auto& job = header.job();
  if (!v1::JobKind_IsValid(job.kind()) || job.kind() == v1::JOB_KIND_UNSPECIFIED)
    return invalid("job kind " + std::to_string(job.kind()) + " is not one of gate, ab, parity");
  if (job.tokens() < 0 || job.tokens() > kMaxTokens)
    return invalid("tokens " + std::to_string(job.tokens()) + " is outside [1, " + std::to_string(kMaxTokens) + "]");
  // The declared size is how the end of an upload is told from a message gRPC could not decode
  // (both end the stream the same way), so it is required.
  if (header.size_bytes() <= 0) return invalid("size_bytes must give the build's size in bytes");
  if (!job.profile().empty() && !profiles::find_builtin_profile(job.profile())) {
    std::string names;
    for (const auto& n : profiles::builtin_profile_names()) names += (names.empty() ? "" : ", ") + n;
    return invalid("unknown profile '" + job.profile() + "' (built in: " + names + ")");
  }
  if (job.has_custom_profile()) {
    if (!job.profile().empty()) return invalid("give a profile name or a custom profile, not both");
    const auto& cp = job.custom_profile();
    if (cp.gemms().empty()) return invalid("the custom profile has no GEMMs");
    if (cp.gemms_size() > 4096) return invalid("the custom profile has more than 4096 GEMM entries");
    if (!valid_build_name(cp.name())) return invalid("custom profile name '" + cp.name() + "' is not a plain name");
    for (const auto& g : cp.gemms()) {
      auto type = quant::parse_type(g.type());
      if (!type) return invalid("custom profile: unknown weight type '" + g.type() + "'");
      const int block = quant::traits(*type).block_elems;
      if (g.od() <= 0 || g.k() <= 0 || g.od() > (1 << 20) || g.k() > (1 << 20) || g.k() % block != 0)
        return invalid("custom profile: GEMM " + g.type() + " " + std::to_string(g.od()) + "x" + std::to_string(g.k()) +
                       " needs 0 < od, k <= 2^20 and k a multiple of " + std::to_string(block));
      if (g.count() < 1 || g.count() > 100000) return invalid("custom profile: a GEMM count must be in [1, 100000]");
    }
  }
  if (!job.path().empty() && job.path() != "mmq" && job.path() != "f16")
    return invalid("path must be mmq or f16, got '" + job.path() + "'");
  if (!job.order().empty() && job.order() != "abba" && job.order() != "sequential")
    return invalid("order must be abba or sequential, got '" + job.order() + "'");
  if (!job.timing().empty() && job.timing() != "gemm" && job.timing() != "pass")
    return invalid("timing must be gemm or pass, got '" + job.timing() + "'");
  if (!job.parity_shapes().empty() && job.parity_shapes() != "standard" && job.parity_shapes() != "quick" &&
      job.parity_shapes() != "none")
    return invalid("parity_shapes must be standard, quick or none");
  if (!job.parity_gguf().empty()) {
    // The worker opens it as the daemon's user; refuse now what it could not read.
    const std::filesystem::path model(job.parity_gguf());
    std::error_code ec;
    if (!model.is_absolute()) return invalid("parity_gguf must be an absolute path on the daemon's host");
    if (!std::filesystem::is_regular_file(model, ec) || ::access(model.c_str(), R_OK) != 0)
      return invalid("parity_gguf '" + job.parity_gguf() + "' is not a readable file on the daemon's host");
  }
  if (!job.parity_tensors().empty() && job.parity_gguf().empty())
    return invalid("parity_tensors needs parity_gguf");
  if (job.kind() == v1::JOB_KIND_PARITY && job.parity_shapes() == "none" && job.parity_gguf().empty())
    return invalid("a parity job with parity_shapes none has nothing to run (give a shape set or a GGUF file)");
  const auto& p = job.policy();
  if (p.slowdown_threshold() < 0 || p.slowdown_threshold() >= 1 || !std::isfinite(p.slowdown_threshold()))
    return invalid("slowdown_threshold must be in [0, 1)");
  if (p.min_pairs() < 0 || p.max_pairs() < 0 || p.max_pairs() > kMaxPairs)
    return invalid("pairs must be in [0, " + std::to_string(kMaxPairs) + "]");
  if (job.repetitions() < 0 || job.repetitions() > 1000) return invalid("repetitions must be in [0, 1000]");
  if (job.timeout_s() < 0 || job.timeout_s() > 30 * 24 * 3600)
    return invalid("timeout_s must be in [0, 30 days] (0 = the daemon's --job-timeout)");
  if (job.kind() == v1::JOB_KIND_GATE) {
    if (job.baseline().empty()) return invalid("a gate job needs a baseline build (name or id)");
    *baseline = resolve_build(job.baseline());
    if (!*baseline) return invalid("no build named or numbered '" + job.baseline() + "'");
  }
  return grpc::Status::OK;
}

grpc::Status HarnessService::accept_upload(const v1::SubmitHeader& header, const std::string& artifact_path,
                                           const std::string& sha256, int64_t size,
                                           v1::SubmitBuildResponse* response) {
  return guarded([&]() -> grpc::Status {
    std::lock_guard<std::mutex> lock(submit_mu_);
    std::optional<db::Build> baseline;
    grpc::Status s = validate_header(header, &baseline);
    if (!s.ok()) return s;
    const auto& md = header.build();
    // The same name and commit must mean the same bytes: anything else is a mislabelled build.
    if (!md.commit().empty())
      if (auto prior = store_.find_latest_build_by_name(md.name());
          prior && prior->commit_sha == md.commit() && prior->sha256 != sha256)
        return invalid("build '" + md.name() + "' at commit " + md.commit() + " was already submitted with other bytes (" +
                       prior->sha256.substr(0, 12) + ")");
    int queued = 0;
    db::JobFilter f;
    f.state = db::JobState::Queued;
    f.limit = options_.max_queued_jobs + 1;
    queued = int(store_.list_jobs(f).size());
    if (queued >= options_.max_queued_jobs)
      return {grpc::StatusCode::RESOURCE_EXHAUSTED, "the queue is full (" + std::to_string(queued) + " jobs)"};

    db::Build build;
    build.sha256 = sha256;
    build.name = md.name();
    build.commit_sha = md.commit();
    build.branch = md.branch();
    build.flags = md.flags();
    build.size_bytes = size;
    build.artifact_path = artifact_path;
    const db::BuildInsert inserted = store_.insert_build(build);
    auto stored = store_.find_build(inserted.id);

    db::Job job;
    v1::JobSpec spec = header.job();
    job.kind = kind_name(spec.kind());
    job.build_id = inserted.id;
    if (baseline) job.baseline_build_id = baseline->id;
    job.profile = spec.profile();
    job.spec_json = spec_to_json(spec);
    job.backend = options_.backend;
    job.device = options_.gpu;
    job.quiet_only = spec.wait_for_quiet();
    if (spec.quiet_deadline_unix_ms() > 0) job.deadline_ms = spec.quiet_deadline_unix_ms();
    const db::RowId job_id = store_.create_job(job);  // committed before we answer
    response->set_job_id(job_id);
    if (stored) *response->mutable_build() = to_proto(*stored);
    response->set_build_existed(!inserted.inserted);
    scheduler_.notify();
    return grpc::Status::OK;
  });
}

grpc::ServerReadReactor<v1::SubmitBuildRequest>* HarnessService::SubmitBuild(grpc::CallbackServerContext* context,
                                                                             v1::SubmitBuildResponse* response) {
  return new SubmitReactor(*this, options_, context, response, StreamSlot::take(open_uploads_, options_.max_uploads));
}

grpc::Status HarnessService::authorize(const grpc::CallbackServerContext* context) const {
  if (!tcp_) return grpc::Status::OK;  // the unix socket is mode 0600: its user is trusted
  if (token_.empty())
    return {grpc::StatusCode::PERMISSION_DENIED,
            "this qgated listens on TCP without --auth-token-file: submit and cancel are refused"};
  const auto& md = context->client_metadata();
  auto it = md.find("authorization");
  const std::string expected = "Bearer " + token_;
  if (it == md.end())
    return {grpc::StatusCode::UNAUTHENTICATED, "submit and cancel need a token (qgate --token-file or QGATE_TOKEN)"};
  const std::string given(it->second.data(), it->second.size());
  // Constant time in the token's length: no early exit on the first differing byte.
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) diff |= uint8_t(expected[i] ^ (i < given.size() ? given[i] : 0));
  if (diff != 0) return {grpc::StatusCode::UNAUTHENTICATED, "the token is not the one qgated was started with"};
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* HarnessService::GetJob(grpc::CallbackServerContext* context, const v1::GetJobRequest* request,
                                                 v1::Job* response) {
  return finish(context, guarded([&]() -> grpc::Status {
    auto job = store_.find_job(request->job_id());
    if (!job) return {grpc::StatusCode::NOT_FOUND, "no job " + std::to_string(request->job_id())};
    *response = to_proto(store_, *job);
    return grpc::Status::OK;
  }));
}

grpc::ServerUnaryReactor* HarnessService::ListJobs(grpc::CallbackServerContext* context,
                                                   const v1::ListJobsRequest* request, v1::ListJobsResponse* response) {
  return finish(context, guarded([&]() -> grpc::Status {
    if (!v1::JobState_IsValid(request->state())) return invalid("unknown job state " + std::to_string(request->state()));
    if (request->limit() < 0 || request->limit() > 10000) return invalid("limit must be in [0, 10000]");
    db::JobFilter f;
    f.state = from_proto(request->state());
    f.limit = request->limit() ? request->limit() : 50;
    for (const auto& j : store_.list_jobs(f)) *response->add_jobs() = to_proto(store_, j);
    return grpc::Status::OK;
  }));
}

grpc::ServerUnaryReactor* HarnessService::CancelJob(grpc::CallbackServerContext* context,
                                                    const v1::CancelJobRequest* request, v1::Job* response) {
  if (grpc::Status auth = authorize(context); !auth.ok()) return finish(context, auth);
  return finish(context, guarded([&]() -> grpc::Status {
    auto job = store_.find_job(request->job_id());
    if (!job) return {grpc::StatusCode::NOT_FOUND, "no job " + std::to_string(request->job_id())};
    if (job->state == db::JobState::Queued) {
      if (store_.update_job_state(job->id, db::JobState::Cancelled, std::string("cancelled before it started"),
                                  db::JobState::Queued)) {
        v1::JobEvent e;
        e.set_job_id(job->id);
        e.set_state(v1::JOB_STATE_CANCELLED);
        e.set_message("cancelled before it started");
        events_.publish(e);
      }
    } else if (job->state == db::JobState::Running) {
      scheduler_.cancel_running(job->id);
    } else {
      return {grpc::StatusCode::FAILED_PRECONDITION,
              "job " + std::to_string(job->id) + " has already ended (" + std::string(db::to_string(job->state)) + ")"};
    }
    *response = to_proto(store_, *store_.find_job(job->id));
    return grpc::Status::OK;
  }));
}

grpc::ServerWriteReactor<v1::JobEvent>* HarnessService::WatchJob(grpc::CallbackServerContext*,
                                                                 const v1::WatchJobRequest* request) {
  auto slot = StreamSlot::take(open_watch_streams_, options_.max_streams);
  if (!slot) return new RefusedWatch(too_many_streams("WatchJob streams", options_.max_streams, "--max-streams"));
  return new WatchReactor(events_, store_, request->job_id(), std::move(*slot));
}

grpc::ServerUnaryReactor* HarnessService::QueryTrend(grpc::CallbackServerContext* context,
                                                     const v1::QueryTrendRequest* request,
                                                     v1::QueryTrendResponse* response) {
  return finish(context, guarded([&]() -> grpc::Status {
    if (request->limit() < 0) return invalid("limit must not be negative");
    if (!request->path().empty() && request->path() != "mmq" && request->path() != "f16")
      return invalid("path must be mmq or f16");
    db::TrendQuery q;
    if (!request->profile().empty()) q.profile = request->profile();
    if (!request->weight_type().empty()) q.weight_type = request->weight_type();
    if (!request->path().empty()) q.path = request->path();
    if (!request->build_glob().empty()) q.build_name_glob = request->build_glob();
    q.since_ms = request->since_unix_ms();
    q.include_contended = request->include_contended();
    q.include_unknown = true;  // until a run is sampled, its load is unknown, not contended
    if (request->limit() > 0) q.limit = request->limit();
    for (const auto& row : store_.query_trend(q)) {
      auto* p = response->add_points();
      p->set_run_id(row.run_id);
      p->set_job_id(row.job_id.value_or(0));
      p->set_build_name(row.build_name);
      p->set_build_sha256(row.build_sha256);
      p->set_path(row.path);
      p->set_started_unix_ms(row.started_ms);
      p->set_tokens_per_s(row.tokens_per_s);
      p->set_contended(row.contended.value_or(false));
      p->set_cotenant_known(row.contended.has_value());
      p->set_profile(row.profile);
    }
    return grpc::Status::OK;
  }));
}

grpc::ServerUnaryReactor* HarnessService::Compare(grpc::CallbackServerContext* context, const v1::CompareRequest* request,
                                                  v1::CompareResponse* response) {
  return finish(context, guarded([&]() -> grpc::Status {
    auto a = resolve_build(request->build_a());
    auto b = resolve_build(request->build_b());
    if (!a) return {grpc::StatusCode::NOT_FOUND, "no build named or numbered '" + request->build_a() + "'"};
    if (!b) return {grpc::StatusCode::NOT_FOUND, "no build named or numbered '" + request->build_b() + "'"};
    if (request->tokens() < 0) return invalid("tokens must not be negative");
    if (request->same_margin() < 0) return invalid("same_margin must not be negative");
    CompareOptions options;
    options.include_contended = request->include_contended();
    if (!request->profile().empty()) options.profile = request->profile();
    if (request->tokens() > 0) options.tokens = request->tokens();
    if (!request->weight_type().empty()) options.weight_type = request->weight_type();
    if (request->same_margin() > 0) options.same_margin = request->same_margin();
    try {
      *response = to_proto(CompareBuilds(store_).compare(*a, *b, options));
    } catch (const NothingComparable& e) {
      return {grpc::StatusCode::FAILED_PRECONDITION, e.what()};
    } catch (const std::invalid_argument& e) {
      return invalid(e.what());
    }
    return grpc::Status::OK;
  }));
}

grpc::ServerUnaryReactor* HarnessService::ListBuilds(grpc::CallbackServerContext* context,
                                                     const v1::ListBuildsRequest* request,
                                                     v1::ListBuildsResponse* response) {
  return finish(context, guarded([&]() -> grpc::Status {
    if (request->limit() < 0) return invalid("limit must not be negative");
    const int limit = request->limit() ? request->limit() : 100;
    std::optional<std::string_view> name;
    if (!request->name().empty()) name = request->name();
    for (const auto& b : store_.list_builds(name, limit)) *response->add_builds() = to_proto(b);
    return grpc::Status::OK;
  }));
}

grpc::ServerUnaryReactor* HarnessService::GetDevice(grpc::CallbackServerContext* context, const v1::GetDeviceRequest*,
                                                    v1::DeviceStatus* response) {
  return finish(context, guarded([&]() -> grpc::Status {
    response->set_backend(options_.backend);
    response->set_device(options_.gpu);
    response->set_name(device_.name);
    response->set_uuid(device_.uuid);
    response->set_memory_bytes(device_.memory_bytes);
    response->set_qgate_version(QGATE_VERSION);
    db::JobFilter f;
    f.state = db::JobState::Queued;
    f.limit = 100000;
    const std::vector<db::Job> queued = store_.list_jobs(f);
    response->set_queued_jobs(int32_t(queued.size()));
    response->set_running_job_id(scheduler_.running_job());
    response->set_cotenant(device_.cotenant);
    fill_cotenant_now(queued, response->mutable_now());
    response->set_uptime_s(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_).count());
    return grpc::Status::OK;
  }));
}

void HarnessService::fill_cotenant_now(const std::vector<db::Job>& queued, v1::CotenantNow* out) const {
  int waiting = 0;
  for (const db::Job& j : queued) waiting += j.quiet_only ? 1 : 0;
  out->set_waiting_jobs(waiting);
  if (!watch_) {
    out->set_state("unavailable");
    out->set_reason("no device watch");
    out->set_ms_since_quiet_window(-1);
    return;
  }
  const cotenant::DeviceNow now = watch_->now();
  out->set_state(now.state);
  out->set_reason(now.reason);
  out->set_policy(now.policy);
  out->set_quiet_for_ms(now.quiet_for_ms);
  out->set_ms_since_quiet_window(now.ms_since_quiet.value_or(-1));
  if (!now.latest) return;
  const cotenant::Sample& s = *now.latest;
  out->set_sample_unix_ms(s.t_ms);
  for (const cotenant::ForeignProcess& p : s.foreign) {
    auto* f = out->add_foreign();
    f->set_pid(p.pid);
    f->set_name(p.name);
    f->set_sm_percent(p.sm_percent.value_or(-1));
    f->set_used_memory_bytes(int64_t(p.used_memory_bytes.value_or(0)));
  }
  out->set_device_util_percent(s.device_util.value_or(-1));
  out->set_sm_clock_mhz(int32_t(s.sm_clock_mhz.value_or(0)));
  out->set_max_sm_clock_mhz(int32_t(s.max_sm_clock_mhz.value_or(0)));
  if (s.clock_event_reasons) {
    for (uint64_t bit = 1; bit != 0; bit <<= 1)
      if (*s.clock_event_reasons & bit) out->add_clock_event_reasons(cotenant::clock_event_name(bit));
  }
  out->set_temperature_c(int32_t(s.temperature_c.value_or(0)));
  out->set_power_w(s.power_w.value_or(0));
}

grpc::ServerUnaryReactor* HarnessService::Remeasure(grpc::CallbackServerContext* context,
                                                    const v1::RemeasureRequest* request,
                                                    v1::RemeasureResponse* response) {
  if (grpc::Status auth = authorize(context); !auth.ok()) return finish(context, auth);
  return finish(context, guarded([&]() -> grpc::Status {
    auto invalid = [](const std::string& why) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why); };
    if (request->job_id() < 0) return invalid("job_id must be positive, got " + std::to_string(request->job_id()));
    if (request->job_id() > 0 && request->contended())
      return invalid("give a job id or contended, not both");
    if (request->job_id() == 0 && !request->contended())
      return invalid("give a job id to re-measure, or contended to re-measure every contended job");
    if (request->since_unix_ms() < 0) return invalid("since_unix_ms must not be negative");
    constexpr int64_t kMaxDeadlineS = 30LL * 24 * 3600;
    if (request->deadline_s() < 0 || request->deadline_s() > kMaxDeadlineS)
      return invalid("deadline_s must be in [0, " + std::to_string(kMaxDeadlineS) + "], got " +
                     std::to_string(request->deadline_s()));
    if (const cotenant::DeviceNow now = watch_ ? watch_->now() : cotenant::DeviceNow{}; !now.available)
      return {grpc::StatusCode::FAILED_PRECONDITION,
              "this daemon cannot see co-tenant load (" + (watch_ ? now.unavailable_reason : std::string("no sampler")) +
                  "), so it can never find a quiet window to re-measure in"};

    std::vector<db::RowId> targets;
    if (request->job_id() > 0) {
      auto job = store_.find_job(request->job_id());
      if (!job) return {grpc::StatusCode::NOT_FOUND, "no job " + std::to_string(request->job_id())};
      if (!db::is_terminal(job->state))
        return {grpc::StatusCode::FAILED_PRECONDITION,
                "job " + std::to_string(job->id) + " has not ended (" + std::string(db::to_string(job->state)) +
                    "); re-measure it once it has"};
      targets.push_back(job->id);
    } else {
      targets = store_.jobs_with_contended_runs(request->since_unix_ms());
    }

    // One pending re-measure per job: a second request for the same job is reported, not queued.
    std::set<int64_t> pending;
    db::JobFilter open_jobs;
    open_jobs.limit = 100000;
    for (db::JobState state : {db::JobState::Queued, db::JobState::Running}) {
      open_jobs.state = state;
      for (const db::Job& j : store_.list_jobs(open_jobs)) {
        const int64_t of = spec_from_json(j.spec_json).remeasure_of();
        if (of > 0) pending.insert(of);
      }
    }
    const int64_t deadline_s = request->deadline_s() > 0 ? request->deadline_s() : 12 * 3600;
    const int64_t deadline_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count() +
        deadline_s * 1000;
    std::lock_guard<std::mutex> lock(submit_mu_);
    for (db::RowId id : targets) {
      if (pending.count(id)) {
        response->add_skipped_job_ids(id);
        continue;
      }
      const db::Job original = *store_.find_job(id);
      v1::JobSpec spec = spec_from_json(original.spec_json);
      // A re-measure of a re-measure measures the original again.
      if (spec.remeasure_of() == 0) spec.set_remeasure_of(id);
      spec.set_wait_for_quiet(true);
      spec.set_quiet_deadline_unix_ms(deadline_ms);
      spec.set_run_contended_on_expiry(request->run_contended_on_expiry());
      db::Job job;
      job.kind = original.kind;
      job.build_id = original.build_id;
      job.baseline_build_id = original.baseline_build_id;
      job.profile = original.profile;
      job.spec_json = spec_to_json(spec);
      job.backend = options_.backend;
      job.device = options_.gpu;
      job.quiet_only = true;
      job.deadline_ms = deadline_ms;
      const db::RowId created = store_.create_job(job);
      pending.insert(id);
      *response->add_jobs() = to_proto(store_, *store_.find_job(created));
    }
    scheduler_.notify();
    return grpc::Status::OK;
  }));
}

}  // namespace qgate::server
