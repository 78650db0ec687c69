// What a worker said about a GPU the daemon serves (qgated never opens one itself), and how its
// co-tenant load is sampled.
#pragma once

#include <cstdint>
#include <string>

namespace qgate::server {

struct DeviceDescription {
  std::string name;
  std::string uuid;
  int64_t memory_bytes = 0;
  std::string cotenant;  // how co-tenant load is sampled, or why it is unavailable
  std::string host;            // the host qgated runs on
  std::string driver_version;  // the NVIDIA driver the worker saw; "" on the CPU backend
};

}  // namespace qgate::server
