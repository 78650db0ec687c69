// The deadline of every upload (SubmitBuild stream). A client that sends its header and then
// nothing holds one of the --max-uploads places; at --upload-timeout its stream is ended with
// DEADLINE_EXCEEDED and the place given back (docs/security.md).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace qgate::server {

class UploadDeadlines {
 public:
  using Clock = std::chrono::steady_clock;
  using Expire = std::function<void()>;

  UploadDeadlines();
  ~UploadDeadlines();  // stops the watcher; nothing is expired after
  UploadDeadlines(const UploadDeadlines&) = delete;
  UploadDeadlines& operator=(const UploadDeadlines&) = delete;

  /// Calls `expire` once at `deadline` unless forgotten first; returns the id to forget it by.
  uint64_t watch(Clock::time_point deadline, Expire expire);
  /// After this returns, `expire` of `id` is not running and will not run.
  void forget(uint64_t id);

 private:
  void run();
  struct Entry {
    Clock::time_point deadline;
    Expire expire;
  };
  std::mutex mutex_;
  std::condition_variable wake_;
  std::map<uint64_t, Entry> entries_;
  uint64_t next_id_ = 1;
  bool stopping_ = false;
  std::thread watcher_;
};

}  // namespace qgate::server
