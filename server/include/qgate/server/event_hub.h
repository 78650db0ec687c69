// Job events fan-out: the job runner publishes progress, watchers (WatchJob streams) subscribe.
// A subscriber is a callback guarded by its own lifetime token, so a stream that has gone away is
// never called.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include "qgate/v1/harness.pb.h"

namespace qgate::server {

class EventHub {
 public:
  using Callback = std::function<void(const v1::JobEvent&)>;
  /// Returns a token; the subscription lives until unsubscribe(token).
  int64_t subscribe(int64_t job_id, Callback callback);
  /// The same for the events of every job (the daemon's log).
  int64_t subscribe_all(Callback callback);
  void unsubscribe(int64_t token);
  void publish(const v1::JobEvent& event);

 private:
  struct Subscriber {
    int64_t job_id;
    Callback callback;
    bool every_job = false;
  };
  std::mutex mu_;
  int64_t next_token_ = 1;
  std::map<int64_t, std::shared_ptr<Subscriber>> subscribers_;
};

}  // namespace qgate::server
