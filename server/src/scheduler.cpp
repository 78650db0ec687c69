// Claims queued jobs one at a time per GPU (one GPU, one job; a split job, two GPUs) and runs them;
// quiet-window jobs wait for a quiet GPU or their deadline.
#include "qgate/server/scheduler.h"

#include <algorithm>
#include <chrono>

#include <spdlog/spdlog.h>

#include "qgate/jobs/job_messages.h"

namespace qgate::server {

// The application layer (jobs/) this file uses.
using jobs::kAnyGpu;
using jobs::spec_of;

namespace {

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::unique_ptr<GpuPool> one_gpu_pool(int device) {
  ServedGpu gpu;
  gpu.ordinal = device;
  return std::make_unique<GpuPool>(std::vector<ServedGpu>{gpu});
}

}  // namespace

Scheduler::Scheduler(db::Store& store, JobRunner& runner, int device)
    : store_(store), runner_(runner), own_pool_(one_gpu_pool(device)), pool_(*own_pool_), use_placement_(false) {
  for (const ServedGpu& g : pool_.gpus()) {
    lanes_.push_back(std::make_unique<Lane>());
    lanes_.back()->gpu = &g;
  }
}

Scheduler::Scheduler(db::Store& store, JobRunner& runner, GpuPool& pool) : store_(store), runner_(runner), pool_(pool) {
  for (const ServedGpu& g : pool_.gpus()) {
    lanes_.push_back(std::make_unique<Lane>());
    lanes_.back()->gpu = &g;
  }
}

Scheduler::~Scheduler() { stop(); }

void Scheduler::start() {
  for (auto& lane : lanes_) lane->thread = std::thread([this, l = lane.get()] { loop(*l); });
}

void Scheduler::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& lane : lanes_) lane->stop_flag = JobRunner::kShutdown;
  }
  cv_.notify_all();
  pool_.wake();
  for (auto& lane : lanes_)
    if (lane->thread.joinable()) lane->thread.join();
}

void Scheduler::notify() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++wakeups_;
  }
  cv_.notify_all();
}

bool Scheduler::cancel_running(int64_t job_id) {
  // Under the lock that also sets running, so a cancel can never land on the next job.
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& lane : lanes_) {
    if (lane->running.load() != job_id) continue;
    lane->stop_flag = JobRunner::kCancel;
    return true;
  }
  return false;
}

std::vector<int64_t> Scheduler::running_jobs() const {
  std::vector<int64_t> out;
  for (const auto& lane : lanes_)
    if (int64_t id = lane->running.load()) out.push_back(id);
  return out;
}

void Scheduler::apply_lease_renewal(const db::LeaseRenewal& renewal, const std::vector<int64_t>& running_before) {
  for (db::RowId id : renewal.cancel_requested) {
    if (cancel_running(id)) spdlog::info("job {}: cancelled from another daemon of the fleet", id);
  }
  for (int64_t id : running_before) {
    if (std::find(renewal.held.begin(), renewal.held.end(), id) != renewal.held.end()) continue;
    // Not held: it ended here since (its verdict written), or its lease ran out and it went back to
    // the queue, perhaps to another daemon. Only the second stops it.
    std::optional<db::Job> now;
    try {
      now = store_.find_job(id);
    } catch (const std::exception&) {
      continue;  // the store is out: the next renewal judges it
    }
    if (!now || qgate::is_terminal(now->state)) continue;
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& lane : lanes_) {
      if (lane->running.load() != id) continue;
      lane->stop_flag = kLeaseLost;
      spdlog::warn("job {}: this daemon's lease on it ran out ({}); stopping it here", id,
                   now->state == db::JobState::Running ? "another daemon runs it now" : "it was queued again");
    }
  }
}

int64_t Scheduler::running_job() const {
  for (const auto& lane : lanes_)
    if (int64_t id = lane->running.load()) return id;
  return 0;
}

int64_t Scheduler::running_job_on(int ordinal) const {
  for (const auto& lane : lanes_)
    if (lane->gpu->ordinal == ordinal) return lane->running.load();
  return 0;
}

std::string Scheduler::not_alive(std::chrono::milliseconds max_silence) const {
  const int64_t now = steady_ms();
  for (const auto& lane : lanes_) {
    const std::string gpu = "the scheduler's loop for GPU " + std::to_string(lane->gpu->ordinal);
    if (!lane->looping.load()) return gpu + " is not running";
    if (lane->running.load() != 0) continue;
    const int64_t silent = now - lane->last_pass_ms.load();
    if (silent > max_silence.count())
      return gpu + " has not looked at the queue for " + std::to_string(silent / 1000) + " s";
  }
  return "";
}

void Scheduler::loop(Lane& lane) {
  const int device = lane.gpu->ordinal;
  const cotenant::DeviceWatch* watch = lane.gpu->watch ? lane.gpu->watch : watch_;
  // Alive from here until the loop returns, however it returns (/healthz reads it).
  struct Looping {
    Lane& lane;
    explicit Looping(Lane& l) : lane(l) {
      lane.last_pass_ms = steady_ms();
      lane.looping = true;
    }
    ~Looping() { lane.looping = false; }
  } looping(lane);
  while (true) {
    lane.last_pass_ms = steady_ms();
    uint64_t seen = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      seen = wakeups_;
    }
    std::optional<db::Job> job;
    if (pool_.begin_claim(device)) {
      try {
        const bool quiet = watch && watch->quiet_now();
        if (!quiet) settle_quiet_deadlines();
        // Its own queue first (jobs pinned to this GPU), then the jobs any GPU may take; either
        // only those that this GPU's model and uuid and the daemon's labels and size can run.
        db::ClaimScope scope;
        scope.ordinal = device;
        scope.gpu_name = lane.gpu->name;
        scope.gpu_uuid = lane.gpu->uuid;
        scope.labels = labels_;
        scope.gpus_served = static_cast<int>(pool_.gpus().size());
        scope.gpu_quiet = quiet;
        job = claim_timed(scope);
        if (!job) {
          scope.ordinal = kAnyGpu;
          job = claim_timed(scope);
        }
        if (outage_) outage_->answered();
        // Jobs the store was lost under go back to the queue once it answers and nothing runs here.
        if (!job && unrecorded_ && unrecorded_->hand_back(store_, pool_, device) > 0) notify();
      } catch (const std::exception& e) {
        if (!outage_) {
          spdlog::error("GPU {}: cannot claim a job: {}", device, e.what());
        } else {
          // Said once per outage (StoreOutage); the claims that follow wait longer, up to seconds.
          outage_->failed(e);
          std::unique_lock<std::mutex> lock(mu_);
          cv_.wait_for(lock, outage_->retry_delay(), [&] { return stopping_; });
        }
      }
      if (!job) pool_.release(device);
    }
    if (job) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) {  // claimed during shutdown: requeued at the next start
          pool_.release(device);
          return;
        }
        lane.stop_flag = JobRunner::kKeepRunning;
        lane.running = job->id;
      }
      run_counted(lane, *job);
      {
        std::lock_guard<std::mutex> lock(mu_);
        lane.running = 0;
      }
      continue;
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_ || wakeups_ != seen; });
  }
}

std::optional<db::Job> Scheduler::claim_timed(const db::ClaimScope& scope) {
  if (!metrics_) return store_.claim_next_job(scope);
  const auto sent = std::chrono::steady_clock::now();
  std::optional<db::Job> job;
  try {
    job = store_.claim_next_job(scope);
  } catch (...) {
    metrics_->claim_statement_failed();
    throw;
  }
  metrics_->claim_statement(std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count(),
                            job.has_value());
  return job;
}

void Scheduler::run_counted(Lane& lane, const db::Job& job) {
  if (!metrics_) return run_claimed(lane, job);
  // Claim latency: from submit (the job's row) to now, on the wall clock both were read from.
  metrics_->job_claimed(double(unix_ms() - job.created_ms) / 1000.0);
  const auto started = std::chrono::steady_clock::now();
  run_claimed(lane, job);
  const double ran_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::string end_state = "unknown";
  try {
    if (const auto ended = store_.find_job(job.id))
      end_state = qgate::is_terminal(ended->state) ? std::string(qgate::to_string(ended->state)) : "interrupted";
  } catch (const std::exception& e) {
    if (outage_) {
      // The store was lost under the job (it goes back to the queue once the store answers,
      // UnrecordedJobs): the outage is said once, not again for each job it cut off.
      outage_->failed(e);
      end_state = "interrupted";
    } else {
      spdlog::warn("job {}: cannot read its end state for the metrics: {}", job.id, e.what());
    }
  }
  metrics_->job_finished(end_state, ran_s);
}

void Scheduler::run_claimed(Lane& lane, const db::Job& job) {
  const int device = lane.gpu->ordinal;
  JobPlacement placement;
  placement.gpus.push_back(lane.gpu);
  v1::JobSpec spec;
  try {
    spec = spec_of(job);
  } catch (const std::exception&) {
    // The runner reports an unreadable spec; the job runs nowhere else.
  }
  if (!spec.split_gpus()) {
    pool_.mark_running(device, job.id);
    if (use_placement_) runner_.run(job, lane.stop_flag, placement);
    else runner_.run(job, lane.stop_flag);
    pool_.release(device);
    return;
  }
  std::optional<int> wanted;
  if (spec.gpus_size() == 2) wanted = spec.gpus(0) == device ? spec.gpus(1) : spec.gpus(0);
  const std::optional<int> partner = pool_.split_partner(device, wanted);
  if (!partner) {
    // The runner refuses a split job with one GPU, saying why.
    pool_.mark_running(device, job.id);
    runner_.run(job, lane.stop_flag, placement);
    pool_.release(device);
    return;
  }
  spdlog::info("job {}: split across GPUs {} and {}; waiting for both", job.id, device, *partner);
  if (!pool_.acquire_pair(device, *partner, job.id, lane.stop_flag)) return;  // the daemon stops: requeued
  placement.gpus.push_back(pool_.find(*partner));
  // The pair in ordinal order: arm A starts on the lower one, wherever the job was claimed.
  if (placement.gpus[1]->ordinal < placement.gpus[0]->ordinal) std::swap(placement.gpus[0], placement.gpus[1]);
  runner_.run(job, lane.stop_flag, placement);
  pool_.release_pair(device, *partner);
}

void Scheduler::settle_quiet_deadlines() {
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  db::JobFilter queued;
  queued.state = db::JobState::Queued;
  queued.quiet_only = true;
  queued.limit = 100000;
  for (const db::Job& job : store_.list_jobs(queued)) {
    if (!job.deadline_ms || *job.deadline_ms > now_ms) continue;
    v1::JobEvent e;
    e.set_job_id(job.id);
    e.set_unix_ms(now_ms);
    if (job.run_contended_on_expiry) {
      if (!store_.set_job_quiet_only(job.id, false)) continue;
      spdlog::warn("job {}: no quiet window before its deadline; running it contended", job.id);
      e.set_state(v1::JOB_STATE_QUEUED);
      e.set_message("no quiet window before the deadline; it runs now, under whatever load there is");
    } else {
      const std::string why = "expired: the GPU was not quiet for the hold time before the deadline";
      if (!store_.update_job_state(job.id, db::JobState::Expired, why, db::JobState::Queued)) continue;
      spdlog::warn("job {} {}", job.id, why);
      e.set_state(v1::JOB_STATE_EXPIRED);
      e.set_message(why);
    }
    if (events_) events_->publish(e);
  }
}

}  // namespace qgate::server
