// ServedGpus: which ordinals a daemon serves (--gpu, --gpus, --gpus all), each described and sampled
// on its own, the CPU backend's fake devices (names, uuids, slowdowns passed to their workers), and
// the option combinations refused at start.
#include <gtest/gtest.h>

#include <stdexcept>

#include "qgate/server/served_gpus.h"

namespace qgate::server {
namespace {

class NamedSampler final : public cotenant::Sampler {
 public:
  explicit NamedSampler(int ordinal) : ordinal_(ordinal) {}
  std::optional<cotenant::Sample> read(const std::set<int>&) override { return std::nullopt; }
  bool available() const override { return false; }
  std::string unavailable_reason() const override { return "sampler of GPU " + std::to_string(ordinal_); }

 private:
  int ordinal_;
};

/// A host with `count` GPUs named "H200"; describing a missing one says it is unavailable.
ServedGpus::Describe host_with(int count, std::vector<int>* described = nullptr) {
  return [count, described](int ordinal) {
    if (described) described->push_back(ordinal);
    DeviceDescription d;
    if (ordinal < count) {
      d.name = "H200";
      d.uuid = "GPU-" + std::to_string(ordinal);
    } else {
      d.name = "unavailable: no device " + std::to_string(ordinal);
    }
    return d;
  };
}

ServedGpus::MakeSampler samplers() {
  return [](int ordinal) { return std::make_unique<NamedSampler>(ordinal); };
}

TEST(ServedGpusTest, TheOrdinalsComeFromGpuGpusOrAll) {
  DaemonOptions o;
  o.backend = "cuda";
  o.gpu = 3;
  EXPECT_EQ(ServedGpus::ordinals(o, host_with(4)), (std::vector<int>{3}));
  o.gpus = {1, 0};
  EXPECT_EQ(ServedGpus::ordinals(o, host_with(4)), (std::vector<int>{1, 0}));
  o.gpus = {0, 0};
  EXPECT_THROW(ServedGpus::ordinals(o, host_with(4)), std::runtime_error);
  o.gpus.clear();
  o.all_gpus = true;
  std::vector<int> described;
  EXPECT_EQ(ServedGpus::ordinals(o, host_with(3, &described)), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(described, (std::vector<int>{0, 1, 2, 3}));  // up to the first that cannot be opened
  EXPECT_THROW(ServedGpus::ordinals(o, host_with(0)), std::runtime_error);
}

TEST(ServedGpusTest, EachGpuHasItsOwnDescriptionSamplerAndWatch) {
  DaemonOptions o;
  o.backend = "cuda";
  o.gpus = {0, 1};
  ServedGpus gpus(o, host_with(2), samplers(), "nvml");
  ASSERT_EQ(gpus.pool().gpus().size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const ServedGpu& g = gpus.pool().gpus()[i];
    EXPECT_EQ(g.ordinal, i);
    EXPECT_EQ(g.uuid, "GPU-" + std::to_string(i));
    EXPECT_EQ(g.worker_args, (std::vector<std::string>{"--device", std::to_string(i)}));
    EXPECT_EQ(g.sampler->unavailable_reason(), "sampler of GPU " + std::to_string(i));
    ASSERT_NE(g.watch, nullptr);
    EXPECT_EQ(gpus.description(i).cotenant, "unavailable: sampler of GPU " + std::to_string(i));
  }
  EXPECT_NE(gpus.pool().gpus()[0].watch, gpus.pool().gpus()[1].watch);
  EXPECT_EQ(gpus.first().ordinal, 0);
  EXPECT_EQ(gpus.facts().size(), 2u);
  EXPECT_THROW(gpus.description(7), std::out_of_range);
  // A listed GPU that cannot be opened stops the start.
  o.gpus = {0, 5};
  EXPECT_THROW(ServedGpus(o, host_with(2), samplers(), "nvml"), std::runtime_error);
  // So does the one GPU of a host without any (qgated's default backend is cuda): the message
  // points to the CPU backend instead of a daemon that says "ready" and fails every job.
  o.gpus = {};
  o.gpu = 0;
  try {
    ServedGpus none(o, host_with(0), samplers(), "nvml");
    ADD_FAILURE() << "a daemon with no GPU to open started";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("start qgated with --backend cpu"), std::string::npos) << e.what();
  }
}

TEST(ServedGpusTest, TheCpuBackendServesFakeDevicesWithTheirOwnIdentity) {
  DaemonOptions o;
  o.backend = "cpu";
  o.gpus = {0, 1};
  o.cpu_device_names = {"cpu-a", "cpu-b"};
  o.cpu_slowdowns = {1, 1.5};
  ServedGpus gpus(o, host_with(0), samplers(), "none");
  const ServedGpu& second = gpus.pool().gpus()[1];
  EXPECT_EQ(second.name, "cpu-b");
  EXPECT_EQ(second.uuid, "CPU-fake-1");
  EXPECT_EQ(second.worker_args, (std::vector<std::string>{"--device", "1", "--cpu-device-name", "cpu-b",
                                                          "--cpu-device-uuid", "CPU-fake-1", "--cpu-slowdown",
                                                          "1.5"}));
  // Without --gpus the CPU backend is the one plain device it always was.
  DaemonOptions plain;
  plain.backend = "cpu";
  ServedGpus one(plain, [](int) { return DeviceDescription{"cpu"}; }, samplers(), "none");
  EXPECT_EQ(one.pool().gpus()[0].worker_args, (std::vector<std::string>{"--device", "0"}));
  EXPECT_EQ(one.pool().gpus()[0].uuid, "");
  // --gpus all on the CPU: as many fake devices as names.
  DaemonOptions all;
  all.backend = "cpu";
  all.all_gpus = true;
  all.cpu_device_names = {"x", "y", "z"};
  EXPECT_EQ(ServedGpus::ordinals(all, host_with(0)), (std::vector<int>{0, 1, 2}));
}

TEST(ServedGpusTest, FakeDeviceOptionsThatDoNotFitAreRefused) {
  DaemonOptions o;
  o.backend = "cpu";
  o.gpus = {0, 1};
  o.cpu_device_names = {"only-one"};
  EXPECT_THROW(ServedGpus(o, host_with(0), samplers(), "none"), std::runtime_error);
  o.cpu_device_names.clear();
  o.cpu_slowdowns = {1, 2, 3};
  EXPECT_THROW(ServedGpus(o, host_with(0), samplers(), "none"), std::runtime_error);
  o.cpu_slowdowns.clear();
  o.backend = "cuda";
  o.cpu_device_names = {"a", "b"};
  EXPECT_THROW(ServedGpus(o, host_with(2), samplers(), "nvml"), std::runtime_error);
}

}  // namespace
}  // namespace qgate::server
