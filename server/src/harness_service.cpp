// The Harness RPCs: each one authorizes (when it mutates), delegates to the application layer and
// maps what it throws to a status; the streaming reactors (SubmitBuild, WatchJob) live here too.
#include "qgate/server/harness_service.h"

#include "qgate/server/device_status.h"


#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <mutex>
#include <utility>

#include "qgate/server/artifact_store.h"
#include "qgate/server/build_files.h"
#include "qgate/server/grpc_status.h"
#include "qgate/server/trend_pages.h"
#include "qgate/jobs/job_messages.h"
#include "qgate/jobs/series_fields_message.h"

#ifndef QGATE_VERSION
#define QGATE_VERSION "0.0.0"
#endif

namespace qgate::server {

// The application layer (jobs/) this file uses.
using jobs::ChangesQuery;
using jobs::DaemonHooks;
using jobs::JobSubmission;
using jobs::QueueCounts;
using jobs::StoredUpload;
using jobs::SubmitOutcome;
using jobs::require_profile_fits;
using jobs::require_quiet_windows;
using jobs::to_proto;

namespace {

/// MemAvailable from /proc/meminfo, in bytes: what CPU-backend workers can still allocate; 0 when
/// it cannot be read.
uint64_t host_memory_available() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line))
    if (line.rfind("MemAvailable:", 0) == 0) return std::strtoull(line.c_str() + 13, nullptr, 10) * 1024;
  return 0;
}

grpc::Status invalid(const std::string& message) { return {grpc::StatusCode::INVALID_ARGUMENT, message}; }

grpc::ServerUnaryReactor* finish(grpc::CallbackServerContext* context, const grpc::Status& status) {
  auto* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
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
                v1::SubmitBuildResponse* response, std::optional<StreamSlot> slot, UploadDeadlines& deadlines)
      : service_(service),
        options_(options),
        context_(context),
        response_(response),
        slot_(std::move(slot)),
        deadlines_(deadlines) {
    if (grpc::Status auth = service_.authorize(context); !auth.ok()) {
      end_upload(auth);
      return;
    }
    if (!slot_) {
      end_upload(too_many_streams("uploads", options_.max_uploads, "--max-uploads"));
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    deadline_ = deadlines_.watch(UploadDeadlines::Clock::now() + std::chrono::seconds(options_.upload_timeout_s),
                                 [this] { expire(); });
    StartRead(&request_);
  }

  // Reads and the deadline's expiry come on different threads: one at a time, and nothing after the
  // stream has been finished.
  void OnReadDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    if (!ok) {
      // A client that went away mid-upload gets no job, even if every byte had arrived.
      if (context_->IsCancelled()) return end_upload({grpc::StatusCode::CANCELLED, "the client went away"});
      end_upload(complete());
      return;
    }
    if (request_.has_header()) {
      if (have_header_) return end_upload(invalid("the header must be sent once, first"));
      header_ = request_.header();
      grpc::Status s = service_.validate_header(header_);
      if (!s.ok()) return end_upload(s);
      if (header_.job().kind() == v1::JOB_KIND_COMMAND) {
        // Commands are arbitrary execution: the token is needed even on the unix socket.
        if (grpc::Status auth = service_.authorize_command(context_); !auth.ok()) return end_upload(auth);
      }
      if (JobSubmission::takes_no_upload(header_)) {
        have_header_ = true;
        return StartRead(&request_);
      }
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

  void OnDone() override {
    if (deadline_) deadlines_.forget(deadline_);
    delete this;
  }

 private:
  /// Finishes the stream and gives its place back at once: the client may start its next upload as
  /// soon as it has this status, before gRPC gets round to deleting this reactor. Called with mu_
  /// held, or from the constructor.
  void end_upload(const grpc::Status& status) {
    if (finished_) return;
    finished_ = true;
    slot_.reset();
    Finish(status);
  }

  /// The upload's deadline passed (the watcher's thread).
  void expire() {
    std::lock_guard<std::mutex> lock(mu_);
    end_upload({grpc::StatusCode::DEADLINE_EXCEEDED,
                "the upload did not finish within " + std::to_string(options_.upload_timeout_s) +
                    " s (qgated --upload-timeout); nothing was stored"});
  }

  grpc::Status complete() {
    if (!have_header_) return invalid("no header: send the build's metadata and job spec first");
    if (!upload_) return service_.accept_command(header_, response_);
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
  std::unique_ptr<ArtifactUpload> upload_;
  std::optional<StreamSlot> slot_;
  UploadDeadlines& deadlines_;
  uint64_t deadline_ = 0;  // its id in deadlines_, 0 before it is watched
  std::mutex mu_;
  bool finished_ = false;
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
      auto job = store.find_job_listing(job_id);
      if (!job) {
        hub_.unsubscribe(token_);
        std::lock_guard<std::mutex> lock(state_->mu);
        finish_locked({grpc::StatusCode::NOT_FOUND, "no job " + std::to_string(job_id)});
        return;
      }
      const v1::Job j = to_proto(*job);
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
      const std::optional<JobState> state = words::from_proto(e.state());
      return state && is_terminal(*state);
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

/// The application's view of the daemon: the scheduler and the event hub.
class SchedulerHooks final : public DaemonHooks {
 public:
  SchedulerHooks(Scheduler& scheduler, EventHub& events) : scheduler_(scheduler), events_(events) {}
  void job_queued() override { scheduler_.notify(); }
  bool cancel_running(db::RowId job_id) override { return scheduler_.cancel_running(job_id); }
  db::RowId running_job() const override { return scheduler_.running_job(); }
  void publish(const v1::JobEvent& event) override { events_.publish(event); }

 private:
  Scheduler& scheduler_;
  EventHub& events_;
};

HarnessService::HarnessService(db::Store& store, EventHub& events, Scheduler& scheduler,
                               const DaemonOptions& options, DeviceDescription device)
    : store_(store),
      events_(events),
      scheduler_(scheduler),
      options_(options),
      device_(std::move(device)),
      hooks_(std::make_unique<SchedulerHooks>(scheduler, events)),
      submission_(store, *hooks_, options),
      queries_(store),
      cancellation_(store, *hooks_),
      remeasurement_(store, *hooks_, options),
      comparer_(store),
      changes_(store) {}

grpc::Status HarnessService::validate_header(const v1::SubmitHeader& header) const {
  return guarded_status([&]() -> grpc::Status {
    submission_.validate_header(header);
    if (header.job().wait_for_quiet()) require_quiet_windows(device_now(), "to run in");
    if (device_.memory_bytes > 0)
      require_profile_fits(header.job(), options_.backend, uint64_t(device_.memory_bytes), "the GPU's");
    else if (options_.backend == "cpu")
      require_profile_fits(header.job(), options_.backend, host_memory_available(), "the host's available");
    return grpc::Status::OK;
  });
}

grpc::Status HarnessService::accept_upload(const v1::SubmitHeader& header, const std::string& artifact_path,
                                           const std::string& sha256, int64_t size,
                                           v1::SubmitBuildResponse* response) {
  return guarded_status([&]() -> grpc::Status {
    // In a fleet the content is in the database before the job is queued: any daemon may claim it.
    BuildFiles(store_, options_.data_dir + "/artifacts").share(artifact_path, sha256);
    const SubmitOutcome outcome = submission_.accept(header, StoredUpload{artifact_path, sha256, size});
    response->set_job_id(outcome.job_id);
    *response->mutable_build() = to_proto(outcome.build);
    response->set_build_existed(outcome.build_existed);
    return grpc::Status::OK;
  });
}

grpc::ServerReadReactor<v1::SubmitBuildRequest>* HarnessService::SubmitBuild(grpc::CallbackServerContext* context,
                                                                             v1::SubmitBuildResponse* response) {
  return new SubmitReactor(*this, options_, context, response, StreamSlot::take(open_uploads_, options_.max_uploads),
                           upload_deadlines_);
}

grpc::Status HarnessService::authorize(const grpc::CallbackServerContext* context) const {
  if (!read_only_.empty())
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "qgated is read-only: " + read_only_ +
                ". It serves jobs, trends and builds, and takes no submit, cancel, remeasure or import until it "
                "is restarted with write access"};
  if (!tcp_) return grpc::Status::OK;  // the unix socket is mode 0600: its user is trusted
  if (token_.empty())
    return {grpc::StatusCode::PERMISSION_DENIED,
            "this qgated listens on TCP without --auth-token-file: submit and cancel are refused"};
  return check_token(context);
}

grpc::Status HarnessService::authorize_command(const grpc::CallbackServerContext* context) const {
  if (token_.empty())
    return {grpc::StatusCode::PERMISSION_DENIED,
            "command jobs need a token: start qgated with --auth-token-file, and submit with qgate --token-file"};
  return check_token(context);
}

grpc::Status HarnessService::accept_command(const v1::SubmitHeader& header, v1::SubmitBuildResponse* response) {
  return guarded_status([&]() -> grpc::Status {
    const SubmitOutcome outcome = submission_.accept_command(header);
    response->set_job_id(outcome.job_id);
    *response->mutable_build() = to_proto(outcome.build);
    response->set_build_existed(outcome.build_existed);
    return grpc::Status::OK;
  });
}

grpc::Status HarnessService::check_token(const grpc::CallbackServerContext* context) const {
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
  return finish(context, guarded_status([&]() -> grpc::Status {
    *response = queries_.job(request->job_id());
    return grpc::Status::OK;
  }));
}

grpc::ServerUnaryReactor* HarnessService::ListJobs(grpc::CallbackServerContext* context,
                                                   const v1::ListJobsRequest* request, v1::ListJobsResponse* response) {
  return finish(context, guarded_status([&]() -> grpc::Status {
    for (v1::Job& job : queries_.list(request->state(), request->limit(), request->host())) *response->add_jobs() = std::move(job);
    return grpc::Status::OK;
  }));
}

grpc::ServerUnaryReactor* HarnessService::CancelJob(grpc::CallbackServerContext* context,
                                                    const v1::CancelJobRequest* request, v1::Job* response) {
  if (grpc::Status auth = authorize(context); !auth.ok()) return finish(context, auth);
  return finish(context, guarded_status([&]() -> grpc::Status {
    *response = cancellation_.cancel(request->job_id());
    return grpc::Status::OK;
  }));
}

grpc::ServerWriteReactor<v1::JobEvent>* HarnessService::WatchJob(grpc::CallbackServerContext*,
                                                                 const v1::WatchJobRequest* request) {
  auto slot = StreamSlot::take(open_watch_streams_, options_.max_streams);
  if (!slot) return new RefusedWatch(too_many_streams("WatchJob streams", options_.max_streams, "--max-streams"));
  return new WatchReactor(events_, store_, request->job_id(), std::move(*slot));
}

/// A series' path as stored: "mmq", "f16", a command arm's label ("MINFER_MMQ=1"), an imported
/// path ("pp", "q4_0"); empty means every path.
static bool valid_series_path(const std::string& path) {
  if (path.size() > 128) return false;
  return std::all_of(path.begin(), path.end(), [](char c) { return c > ' ' && c < 127; });
}

grpc::ServerUnaryReactor* HarnessService::QueryTrend(grpc::CallbackServerContext* context,
                                                     const v1::QueryTrendRequest* request,
                                                     v1::QueryTrendResponse* response) {
  return finish(context, guarded_status([&]() -> grpc::Status {
    if (request->limit() < 0) return invalid("limit must not be negative");
    if (!valid_series_path(request->path()))
      return invalid("path must be a series' path word: mmq, f16, a command arm (MINFER_MMQ=1) or an imported "
                     "path (pp, tg, a weight type), at most 128 printable characters");
    const int page_size = trend_page_size(request->page_size());
    if (page_size < 0) return invalid("page_size must not be negative; 0 means 1000 points a page");
    const bool raw = request->raw_runs() || request->job_id() > 0;
    TrendPageCursor cursor;
    if (!request->page_token().empty()) {
      std::string why;
      if (!read_trend_page_token(request->page_token(), *request, cursor, why)) return invalid(why);
    }
    db::TrendQuery q;
    if (!request->profile().empty()) q.profile = request->profile();
    if (!request->weight_type().empty()) q.weight_type = request->weight_type();
    if (!request->path().empty()) q.path = request->path();
    if (!request->build_glob().empty()) q.build_name_glob = request->build_glob();
    if (!request->host().empty()) q.host = request->host();
    q.since_ms = request->since_unix_ms();
    q.include_contended = request->include_contended();
    q.include_unknown = true;  // until a run is sampled, its load is unknown, not contended
    if (request->job_id() > 0) q.job_id = request->job_id();
    // One page: at most page_size points, and no more than limit leaves (it counts every page's),
    // read after the token's cursor (docs/trends.md, "Pages"). One row more than the page tells
    // whether a next page has any.
    std::int64_t room = page_size;
    if (request->limit() > 0) room = std::min<std::int64_t>(room, request->limit() - cursor.returned);
    q.limit = static_cast<int>(room + 1);
    if (!request->page_token().empty()) q.after = db::TrendQuery::Position{cursor.after_ms, cursor.after_id};
    const bool limit_reached = request->limit() > 0 && cursor.returned + room >= request->limit();
    auto next_page = [&](std::int64_t after_ms, std::int64_t after_id, std::size_t read) {
      if (std::int64_t(read) <= room || limit_reached) return;
      TrendPageCursor next;
      next.raw_runs = raw;
      next.after_ms = after_ms;
      next.after_id = after_id;
      next.returned = cursor.returned + room;
      next.query = trend_query_fingerprint(*request);
      response->set_next_page_token(write_trend_page_token(next));
    };
    if (raw) {
      // One point per run: `qgate export`, or the runs behind one job's points.
      auto rows = store_.query_trend(q);
      const std::size_t read = rows.size();
      if (std::int64_t(read) > room) rows.resize(static_cast<std::size_t>(room));
      if (!rows.empty()) next_page(rows.back().started_ms, rows.back().run_id, read);
      response->mutable_points()->Reserve(static_cast<int>(rows.size()));
      for (const auto& row : rows) {
        auto* p = response->add_points();
        p->set_run_id(row.run_id);
        p->set_job_id(row.job_id.value_or(0));
        p->set_build_name(row.build_name);
        p->set_build_sha256(row.build_sha256);
        jobs::write_series_fields(row, *p);
        p->set_started_unix_ms(row.started_ms);
        p->set_last_unix_ms(row.started_ms);
        p->set_tokens_per_s(row.tokens_per_s);
        p->set_tokens_per_s_low(row.tokens_per_s);
        p->set_tokens_per_s_high(row.tokens_per_s);
        p->set_runs(1);
        p->set_contended_runs(row.contended.value_or(false) ? 1 : 0);
        p->set_contended(row.contended.value_or(false));
        p->set_cotenant_known(row.contended.has_value());
        p->set_commit_sha(row.commit_sha);
        if (row.timing) p->set_timing(to_proto(*row.timing));
      }
      return grpc::Status::OK;
    }
    // One point per build, series and week, from the rollups kept at write time: one index range
    // scan. job_id is the point's newest job; `job_id` in a request gives that job's runs.
    auto rows = store_.query_trend_summaries(q);
    const std::size_t read = rows.size();
    if (std::int64_t(read) > room) rows.resize(static_cast<std::size_t>(room));
    if (!rows.empty()) next_page(rows.back().first_ms, rows.back().id, read);
    response->mutable_points()->Reserve(static_cast<int>(rows.size()));
    for (const auto& row : rows) {
      auto* p = response->add_points();
      p->set_job_id(row.last_job_id.value_or(0));
      p->set_build_name(row.build_name);
      p->set_build_sha256(row.build_sha256);
      jobs::write_series_fields(row, *p);
      p->set_started_unix_ms(row.first_ms);
      p->set_last_unix_ms(row.last_ms);
      p->set_tokens_per_s(row.median_tokens_per_s);
      p->set_tokens_per_s_low(row.low_tokens_per_s);
      p->set_tokens_per_s_high(row.high_tokens_per_s);
      p->set_runs(static_cast<std::int32_t>(row.runs));
      // Contended runs are among the point's runs only when they were asked for.
      const std::int64_t contended = q.include_contended ? row.contended_runs : 0;
      p->set_contended_runs(static_cast<std::int32_t>(contended));
      p->set_contended(contended > 0);
      p->set_cotenant_known(row.unknown_runs == 0);
      p->set_commit_sha(row.commit_sha);
      if (row.timing) p->set_timing(to_proto(*row.timing));
    }
    return grpc::Status::OK;
  }));
}

grpc::ServerUnaryReactor* HarnessService::QueryChanges(grpc::CallbackServerContext* context,
                                                       const v1::QueryChangesRequest* request,
                                                       v1::QueryChangesResponse* response) {
  return finish(context, guarded_status([&]() -> grpc::Status {
    if (!valid_series_path(request->path()))
      return invalid("path must be a series' path word: mmq, f16, a command arm (MINFER_MMQ=1) or an imported "
                     "path (pp, tg, a weight type), at most 128 printable characters");
    if (request->alpha() < 0 || request->alpha() >= 1) return invalid("alpha must be in (0, 1); 0 means 0.01");
    if (request->min_segment() < 0 || request->min_segment() == 1)
      return invalid("min_segment must be at least 2 builds; 0 means 5");
    ChangesQuery q;
    if (!request->profile().empty()) q.profile = request->profile();
    if (!request->weight_type().empty()) q.weight_type = request->weight_type();
    if (!request->path().empty()) q.path = request->path();
    if (!request->build_glob().empty()) q.build_glob = request->build_glob();
    if (!request->host().empty()) q.host = request->host();
    q.since_ms = request->since_unix_ms();
    q.slowdowns_only = request->slowdowns_only();
    if (request->alpha() > 0) q.alpha = request->alpha();
    if (request->min_segment() > 0) q.min_segment = request->min_segment();
    *response = changes_.find(q);
    return grpc::Status::OK;
  }));
}

grpc::ServerUnaryReactor* HarnessService::Compare(grpc::CallbackServerContext* context, const v1::CompareRequest* request,
                                                  v1::CompareResponse* response) {
  return finish(context, guarded_status([&]() -> grpc::Status {
    *response = comparer_.compare(*request);
    return grpc::Status::OK;
  }));
}

grpc::ServerUnaryReactor* HarnessService::ListBuilds(grpc::CallbackServerContext* context,
                                                     const v1::ListBuildsRequest* request,
                                                     v1::ListBuildsResponse* response) {
  return finish(context, guarded_status([&]() -> grpc::Status {
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
  return finish(context, guarded_status([&]() -> grpc::Status {
    response->set_backend(options_.backend);
    response->set_device(options_.gpu);
    response->set_name(device_.name);
    response->set_uuid(device_.uuid);
    response->set_memory_bytes(device_.memory_bytes);
    response->set_qgate_version(QGATE_VERSION);
    response->set_host(device_.host);
    response->set_driver_version(device_.driver_version);
    const QueueCounts counts = queries_.queue_counts();
    response->set_queued_jobs(int32_t(counts.queued));
    response->set_running_job_id(scheduler_.running_job());
    response->set_cotenant(device_.cotenant);
    DeviceStatusReport::fill_cotenant_now(watch_, counts.waiting_quiet, response->mutable_now());
    response->set_uptime_s(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_).count());
    return grpc::Status::OK;
  }));
}

cotenant::DeviceNow HarnessService::device_now() const {
  if (watch_) return watch_->now();
  cotenant::DeviceNow none;
  none.unavailable_reason = "no sampler";
  return none;
}

grpc::ServerUnaryReactor* HarnessService::Remeasure(grpc::CallbackServerContext* context,
                                                    const v1::RemeasureRequest* request,
                                                    v1::RemeasureResponse* response) {
  if (grpc::Status auth = authorize(context); !auth.ok()) return finish(context, auth);
  return finish(context, guarded_status([&]() -> grpc::Status {
    *response = remeasurement_.remeasure(*request, device_now());
    return grpc::Status::OK;
  }));
}

grpc::ServerUnaryReactor* HarnessService::ImportResults(grpc::CallbackServerContext* context,
                                                        const v1::ImportResultsRequest* request,
                                                        v1::ImportResultsResponse* response) {
  if (grpc::Status auth = authorize(context); !auth.ok()) return finish(context, auth);
  return finish(context, guarded_status([&]() -> grpc::Status {
    *response = importer_.import(*request);
    return grpc::Status::OK;
  }));
}

}  // namespace qgate::server
