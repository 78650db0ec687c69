// Publishes job events to the subscribers of that job.
#include "qgate/server/event_hub.h"

#include <vector>

namespace qgate::server {

int64_t EventHub::subscribe(int64_t job_id, Callback callback) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t token = next_token_++;
  subscribers_[token] = std::make_shared<Subscriber>(Subscriber{job_id, std::move(callback)});
  return token;
}

int64_t EventHub::subscribe_all(Callback callback) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t token = next_token_++;
  subscribers_[token] = std::make_shared<Subscriber>(Subscriber{0, std::move(callback), true});
  return token;
}

void EventHub::unsubscribe(int64_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  subscribers_.erase(token);
}

void EventHub::publish(const v1::JobEvent& event) {
  std::vector<std::shared_ptr<Subscriber>> targets;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [token, sub] : subscribers_)
      if (sub->every_job || sub->job_id == event.job_id()) targets.push_back(sub);
  }
  // Called outside the lock: a callback may unsubscribe itself.
  for (const auto& sub : targets) sub->callback(event);
}

}  // namespace qgate::server
