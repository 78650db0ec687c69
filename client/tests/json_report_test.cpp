// The --json envelope: schema version, the context block from the daemon's GetDevice answer (or
// why it is missing), and the data under its key.
#include <gtest/gtest.h>

#include "qgate/client/json_report.h"

namespace qgate::client {
namespace {

v1::DeviceStatus h200() {
  v1::DeviceStatus d;
  d.set_host("gpu-host-1");
  d.set_backend("cuda");
  d.set_device(1);
  d.set_name("NVIDIA H200");
  d.set_driver_version("560.35.03");
  d.set_qgate_version("0.1.0");
  return d;
}

TEST(JsonReport, CarriesTheSchemaVersionTheContextAndTheDataUnderItsKey) {
  const auto doc = json_report(report_context(h200(), "0.1.0+abc"), "jobs", nlohmann::json::array({1, 2}));
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["schema_version"], kJsonSchemaVersion);
  EXPECT_EQ(doc["jobs"], nlohmann::json::array({1, 2}));
  const auto& c = doc["context"];
  EXPECT_EQ(c["host"], "gpu-host-1");
  EXPECT_EQ(c["backend"], "cuda");
  EXPECT_EQ(c["device"], 1);
  EXPECT_EQ(c["gpu_name"], "NVIDIA H200");
  EXPECT_EQ(c["driver_version"], "560.35.03");
  EXPECT_EQ(c["qgate_version"], "0.1.0");
  EXPECT_EQ(c["cli_version"], "0.1.0+abc");
  EXPECT_FALSE(c.contains("error"));
  EXPECT_EQ(doc.size(), 3u) << doc.dump(2);
}

TEST(JsonReport, ContextWithoutTheDaemonKeepsEveryKeyAndSaysWhy) {
  const auto c = context_json(report_context_without_daemon("0.1.0+abc", "GetDevice: unimplemented"));
  for (const char* key : {"host", "backend", "gpu_name", "driver_version", "qgate_version"})
    EXPECT_EQ(c[key], "") << key;
  EXPECT_EQ(c["cli_version"], "0.1.0+abc");
  EXPECT_EQ(c["error"], "GetDevice: unimplemented");
}

TEST(JsonReport, DataMayBeAnObject) {
  const auto doc = json_report(report_context(h200(), "v"), "job", {{"id", 7}});
  EXPECT_EQ(doc["job"]["id"], 7);
}

}  // namespace
}  // namespace qgate::client
