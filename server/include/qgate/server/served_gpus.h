// The GPUs one daemon serves (qgated --gpus; docs/two-gpus.md): each described by a worker (qgated
// never opens a GPU itself), each with its own co-tenant sampler and watch, and the pool its schedulers
// share. On the CPU backend each entry is a fake device with its own ordinal, name and uuid, so the
// scheduling of several GPUs runs and is tested on a machine without one.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "qgate/cotenant/device_watch.h"
#include "qgate/cotenant/replay.h"
#include "qgate/cotenant/sampler.h"
#include "qgate/server/daemon_options.h"
#include "qgate/server/device_description.h"
#include "qgate/server/gpu_pool.h"

namespace qgate::server {

class ServedGpus {
 public:
  /// How the daemon learns a GPU's name and uuid (a worker's describe), and opens its sampler.
  using Describe = std::function<DeviceDescription(int ordinal)>;
  using MakeSampler = std::function<std::unique_ptr<cotenant::Sampler>(int ordinal)>;

  /// The ordinals the options serve: --gpus, or --gpu alone; for --gpus all, every ordinal from 0
  /// up that `describe` can open. Throws std::runtime_error on a GPU that cannot be opened.
  static std::vector<int> ordinals(const DaemonOptions& options, const Describe& describe);

  /// Describes and samples each GPU. The first GPU's samples also go to options.record_samples_file.
  ServedGpus(const DaemonOptions& options, const Describe& describe, const MakeSampler& make_sampler,
             const std::string& sampler_kind);
  ~ServedGpus();

  GpuPool& pool() { return *pool_; }
  const GpuPool& pool() const { return *pool_; }
  const DeviceDescription& description(int ordinal) const;
  /// The first served GPU's (GetDevice, the one-GPU API).
  const ServedGpu& first() const { return pool_->gpus().front(); }
  /// The GPUs as the submit checks see them.
  std::vector<DaemonOptions::ServedDevice> facts() const;
  /// Starts and stops every GPU's watch.
  void start();
  void stop();

 private:
  std::vector<std::unique_ptr<cotenant::Sampler>> samplers_;
  std::unique_ptr<cotenant::TraceRecorder> recorder_;
  std::vector<std::unique_ptr<cotenant::Sampler>> recording_;
  std::vector<std::unique_ptr<cotenant::DeviceWatch>> watches_;
  std::vector<DeviceDescription> descriptions_;
  std::unique_ptr<GpuPool> pool_;
};

}  // namespace qgate::server
