// The GPUs one daemon serves (qgated --gpus) and who holds each: a scheduler claiming its next job, a
// job running on it, or a split job that needs it as the second GPU of its pair. Each GPU's scheduler
// asks before it claims and says when it is done, so a split job gets both GPUs of its pair and no
// other job starts on them meanwhile. One split job waits for its pair at a time, so two split jobs
// can never hold one GPU each and wait for the other's.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "qgate/cotenant/device_watch.h"
#include "qgate/cotenant/sampler.h"

namespace qgate::server {

/// One served GPU: what its worker said it is, how a worker opens it, and its co-tenant sampler.
struct ServedGpu {
  int ordinal = 0;
  std::string name;
  std::string uuid;
  int64_t memory_bytes = 0;
  std::string driver_version;
  std::string cotenant;                  // how its load is sampled, or why it is not
  std::vector<std::string> worker_args;  // --device N, and a fake CPU device's name, uuid and slowdown
  cotenant::Sampler* sampler = nullptr;
  const cotenant::DeviceWatch* watch = nullptr;
};

class GpuPool {
 public:
  explicit GpuPool(std::vector<ServedGpu> gpus);

  const std::vector<ServedGpu>& gpus() const { return gpus_; }
  const ServedGpu* find(int ordinal) const;

  /// The scheduler of `ordinal` may claim a job now: false while a split job holds or awaits the
  /// GPU. On true the GPU is the scheduler's until release().
  bool begin_claim(int ordinal);
  /// The scheduler claimed `job_id` and runs it on its GPU.
  void mark_running(int ordinal, int64_t job_id);
  /// The scheduler claimed nothing, or its one-GPU job ended.
  void release(int ordinal);

  /// A split job claimed on `ordinal` takes `partner` too. The claiming GPU is free while it waits:
  /// a split job already waiting or running comes first and may use it. Returns false, holding
  /// nothing, when `stop` stops being kKeepRunning (0) before both GPUs are free.
  bool acquire_pair(int ordinal, int partner, int64_t job_id, const std::atomic<int>& stop);
  void release_pair(int ordinal, int partner);

  /// The second GPU for a split job claimed on `ordinal`: `wanted` when given, else the served GPU of
  /// the same name that is idle (or, when none is idle, the first of that name). None when no other
  /// served GPU has the same name.
  std::optional<int> split_partner(int ordinal, std::optional<int> wanted) const;

  /// Facts for `qgate device`: the job running on the GPU (0 none), the split job holding it (0 none).
  int64_t running_job(int ordinal) const;
  int64_t split_job(int ordinal) const;
  /// Wakes every waiter (a GPU was released, or the daemon stops).
  void wake();

 private:
  struct State {
    int64_t running = 0;   // the job on it; kClaiming while its scheduler claims
    int64_t split = 0;     // the split job that holds or awaits it
  };
  static constexpr int64_t kClaiming = -1;
  std::vector<ServedGpu> gpus_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<int, State> state_;
  int64_t split_owner_ = 0;  // the one split job acquiring or holding its pair
};

}  // namespace qgate::server
