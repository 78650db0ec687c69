// UploadDeadlines: one thread that ends uploads at their deadline (upload_deadlines.h).
#include "qgate/server/upload_deadlines.h"

#include <algorithm>

namespace qgate::server {

UploadDeadlines::UploadDeadlines() : watcher_([this] { run(); }) {}

UploadDeadlines::~UploadDeadlines() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  watcher_.join();
}

uint64_t UploadDeadlines::watch(Clock::time_point deadline, Expire expire) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t id = next_id_++;
  entries_.emplace(id, Entry{deadline, std::move(expire)});
  wake_.notify_all();
  return id;
}

void UploadDeadlines::forget(uint64_t id) {
  // The watcher calls `expire` under the same lock, so once this has it, no call is running.
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.erase(id);
}

void UploadDeadlines::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    Clock::time_point next = Clock::time_point::max();
    const auto now = Clock::now();
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second.deadline <= now) {
        it->second.expire();
        it = entries_.erase(it);
      } else {
        next = std::min(next, it->second.deadline);
        ++it;
      }
    }
    if (next == Clock::time_point::max()) wake_.wait(lock);
    else wake_.wait_until(lock, next);
  }
}

}  // namespace qgate::server
