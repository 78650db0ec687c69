// ServedGpus: every GPU of `qgated --gpus`, described, sampled and pooled.
#include "qgate/server/served_gpus.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <set>
#include <stdexcept>

namespace qgate::server {
namespace {

constexpr int kMaxGpus = 64;

bool opened(const DeviceDescription& d) { return !d.name.empty() && d.name.rfind("unavailable", 0) != 0; }

}  // namespace

std::vector<int> ServedGpus::ordinals(const DaemonOptions& options, const Describe& describe) {
  if (options.all_gpus) {
    std::vector<int> all;
    if (options.backend == "cpu") {
      // Fake devices: as many as --cpu-device-names names, else one.
      const int n = std::max<int>(1, int(options.cpu_device_names.size()));
      for (int i = 0; i < n; ++i) all.push_back(i);
      return all;
    }
    for (int ordinal = 0; ordinal < kMaxGpus; ++ordinal) {
      if (!opened(describe(ordinal))) break;
      all.push_back(ordinal);
    }
    if (all.empty()) throw std::runtime_error("--gpus all: no GPU could be opened");
    return all;
  }
  if (options.gpus.empty()) return {options.gpu};
  std::set<int> seen;
  for (int g : options.gpus) {
    if (g < 0) throw std::runtime_error("--gpus: an ordinal must be >= 0, got " + std::to_string(g));
    if (!seen.insert(g).second) throw std::runtime_error("--gpus names GPU " + std::to_string(g) + " twice");
  }
  return options.gpus;
}

ServedGpus::ServedGpus(const DaemonOptions& options, const Describe& describe, const MakeSampler& make_sampler,
                       const std::string& sampler_kind) {
  const std::vector<int> list = ordinals(options, describe);
  const bool fake = options.backend == "cpu" && (!options.gpus.empty() || options.all_gpus);
  if (!options.cpu_device_names.empty() && options.cpu_device_names.size() != list.size())
    throw std::runtime_error("--cpu-device-names gives " + std::to_string(options.cpu_device_names.size()) +
                             " names for " + std::to_string(list.size()) + " devices");
  if (!options.cpu_slowdowns.empty() && options.cpu_slowdowns.size() != list.size())
    throw std::runtime_error("--cpu-slowdowns gives " + std::to_string(options.cpu_slowdowns.size()) +
                             " factors for " + std::to_string(list.size()) + " devices");
  if (options.backend != "cpu" && (!options.cpu_device_names.empty() || !options.cpu_slowdowns.empty()))
    throw std::runtime_error("--cpu-device-names and --cpu-slowdowns are for the CPU backend's fake devices");
  std::vector<ServedGpu> gpus;
  for (size_t i = 0; i < list.size(); ++i) {
    const int ordinal = list[i];
    ServedGpu gpu;
    gpu.ordinal = ordinal;
    gpu.worker_args = {"--device", std::to_string(ordinal)};
    DeviceDescription d = describe(ordinal);
    if (fake) {
      // The fake device's identity, which its workers report too (qgate-worker --cpu-device-*).
      d.name = options.cpu_device_names.empty() ? "cpu" : options.cpu_device_names[i];
      d.uuid = "CPU-fake-" + std::to_string(ordinal);
      gpu.worker_args.insert(gpu.worker_args.end(), {"--cpu-device-name", d.name, "--cpu-device-uuid", d.uuid});
      if (!options.cpu_slowdowns.empty())
        gpu.worker_args.insert(gpu.worker_args.end(), {"--cpu-slowdown", fmt::format("{:g}", options.cpu_slowdowns[i])});
    } else if (options.backend == "cuda" && !opened(d)) {
      // A daemon that cannot open its GPU would say "ready" and fail every job: it does not start.
      throw std::runtime_error("GPU " + std::to_string(ordinal) + " cannot be opened (" + d.name +
                               "); on a host without a GPU, start qgated with --backend cpu");
    }
    samplers_.push_back(make_sampler(ordinal));
    cotenant::Sampler* sampler = samplers_.back().get();
    if (i == 0 && !options.record_samples_file.empty()) {
      recorder_ = std::make_unique<cotenant::TraceRecorder>(std::filesystem::path(options.record_samples_file));
      recording_.push_back(std::make_unique<cotenant::RecordingSampler>(*sampler, *recorder_));
      sampler = recording_.back().get();
    }
    d.cotenant = sampler->available() ? sampler_kind + ": sampled during every run"
                                      : "unavailable: " + sampler->unavailable_reason();
    // On a GPU an unsampled run cannot be told quiet from contended: worth a warning, not so on the CPU.
    if (!sampler->available() && options.backend == "cuda")
      spdlog::warn("co-tenant sampler: {}; every run's load is recorded as unknown (GPU {})", d.cotenant, ordinal);
    else
      spdlog::debug("co-tenant sampler: {} (GPU {}: {})", d.cotenant, ordinal, d.name);
    cotenant::DeviceWatchOptions watch_options;
    watch_options.window.policy.max_foreign_sm_percent = options.quiet_max_foreign_sm_percent;
    watch_options.window.hold_ms = static_cast<int64_t>(options.quiet_hold_s * 1000);
    watches_.push_back(std::make_unique<cotenant::DeviceWatch>(*sampler, cotenant::system_clock(), watch_options));
    gpu.name = d.name;
    gpu.uuid = d.uuid;
    gpu.memory_bytes = d.memory_bytes;
    gpu.driver_version = d.driver_version;
    gpu.cotenant = d.cotenant;
    gpu.sampler = sampler;
    gpu.watch = watches_.back().get();
    descriptions_.push_back(std::move(d));
    gpus.push_back(std::move(gpu));
  }
  pool_ = std::make_unique<GpuPool>(std::move(gpus));
}

ServedGpus::~ServedGpus() { stop(); }

const DeviceDescription& ServedGpus::description(int ordinal) const {
  const auto& gpus = pool_->gpus();
  for (size_t i = 0; i < gpus.size(); ++i)
    if (gpus[i].ordinal == ordinal) return descriptions_[i];
  throw std::out_of_range("GPU " + std::to_string(ordinal) + " is not served");
}

std::vector<DaemonOptions::ServedDevice> ServedGpus::facts() const {
  std::vector<DaemonOptions::ServedDevice> out;
  for (const ServedGpu& g : pool_->gpus()) out.push_back({g.ordinal, g.name, g.uuid});
  return out;
}

void ServedGpus::start() {
  for (auto& w : watches_) w->start();
}

void ServedGpus::stop() {
  for (auto& w : watches_) w->stop();
}

}  // namespace qgate::server
