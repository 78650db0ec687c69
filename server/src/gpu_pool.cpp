// GpuPool: who holds each served GPU, and the hand-over of a pair to a split job.
#include "qgate/server/gpu_pool.h"

#include <stdexcept>

namespace qgate::server {

GpuPool::GpuPool(std::vector<ServedGpu> gpus) : gpus_(std::move(gpus)) {
  if (gpus_.empty()) throw std::invalid_argument("a daemon serves at least one GPU");
  for (const ServedGpu& g : gpus_) {
    if (state_.count(g.ordinal)) throw std::invalid_argument("GPU " + std::to_string(g.ordinal) + " is listed twice");
    state_[g.ordinal] = {};
  }
}

const ServedGpu* GpuPool::find(int ordinal) const {
  for (const ServedGpu& g : gpus_)
    if (g.ordinal == ordinal) return &g;
  return nullptr;
}

bool GpuPool::begin_claim(int ordinal) {
  std::lock_guard lock(mu_);
  State& s = state_.at(ordinal);
  if (s.split != 0 || s.running != 0) return false;
  s.running = kClaiming;
  return true;
}

void GpuPool::mark_running(int ordinal, int64_t job_id) {
  std::lock_guard lock(mu_);
  state_.at(ordinal).running = job_id;
}

void GpuPool::release(int ordinal) {
  {
    std::lock_guard lock(mu_);
    state_.at(ordinal).running = 0;
  }
  cv_.notify_all();
}

bool GpuPool::acquire_pair(int ordinal, int partner, int64_t job_id, const std::atomic<int>& stop) {
  std::unique_lock lock(mu_);
  State& mine = state_.at(ordinal);
  State& other = state_.at(partner);
  // Free while waiting: the split job ahead of this one may need this GPU.
  mine.running = 0;
  cv_.notify_all();
  auto wait = [&](auto ready) {
    while (!ready()) {
      if (stop.load() != 0) return false;
      cv_.wait_for(lock, std::chrono::milliseconds(200));
    }
    return true;
  };
  if (!wait([&] { return split_owner_ == 0 || split_owner_ == job_id; })) return false;
  split_owner_ = job_id;
  mine.split = other.split = job_id;  // no new job starts on either
  if (!wait([&] { return mine.running == 0 && other.running == 0; })) {
    mine.split = other.split = 0;
    split_owner_ = 0;
    cv_.notify_all();
    return false;
  }
  mine.running = other.running = job_id;
  return true;
}

void GpuPool::release_pair(int ordinal, int partner) {
  {
    std::lock_guard lock(mu_);
    for (int g : {ordinal, partner}) state_.at(g) = {};
    split_owner_ = 0;
  }
  cv_.notify_all();
}

std::optional<int> GpuPool::split_partner(int ordinal, std::optional<int> wanted) const {
  const ServedGpu* self = find(ordinal);
  if (!self) return std::nullopt;
  if (wanted) {
    const ServedGpu* other = find(*wanted);
    if (!other || *wanted == ordinal || other->name != self->name) return std::nullopt;
    return wanted;
  }
  std::lock_guard lock(mu_);
  std::optional<int> first;
  for (const ServedGpu& g : gpus_) {
    if (g.ordinal == ordinal || g.name != self->name) continue;
    if (state_.at(g.ordinal).running == 0 && state_.at(g.ordinal).split == 0) return g.ordinal;
    if (!first) first = g.ordinal;
  }
  return first;
}

int64_t GpuPool::running_job(int ordinal) const {
  std::lock_guard lock(mu_);
  const int64_t r = state_.at(ordinal).running;
  return r > 0 ? r : 0;
}

int64_t GpuPool::split_job(int ordinal) const {
  std::lock_guard lock(mu_);
  return state_.at(ordinal).split;
}

void GpuPool::wake() { cv_.notify_all(); }

}  // namespace qgate::server
