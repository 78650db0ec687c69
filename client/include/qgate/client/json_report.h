// The shape of every --json document the qgate CLI writes (and of `export --format json`): a
// schema version, a context block saying where the figures come from, and the command's data under
// a key named for it. Pure: the daemon's facts come in as the DeviceStatus the CLI fetched.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "qgate/v1/harness.pb.h"

namespace qgate::client {

/// The version of the --json shape. Raised when a key is renamed, moved or removed, or a value
/// changes its meaning; adding a key does not raise it.
inline constexpr int kJsonSchemaVersion = 1;

/// Where a document's figures come from: the daemon's host, device and version, and this CLI's.
struct ReportContext {
  std::string host;            // the host qgated runs on
  std::string backend;         // "cuda" or "cpu"
  int device = 0;              // CUDA device ordinal
  std::string gpu_name;        // "NVIDIA H200", "cpu"
  std::string driver_version;  // the NVIDIA driver; "" on the CPU backend
  std::string qgate_version;   // qgated's version
  std::string cli_version;     // this qgate's version
  std::string error;           // why the daemon's facts are missing ("" when they are not)
};

/// The daemon's facts from its GetDevice answer, with this CLI's version.
ReportContext report_context(const v1::DeviceStatus& device, const std::string& cli_version);
/// Only the CLI's version, and why the daemon's facts could not be had.
ReportContext report_context_without_daemon(const std::string& cli_version, const std::string& why);

/// {"host", "backend", "device", "gpu_name", "driver_version", "qgate_version", "cli_version"}, every
/// key present ("" when unknown), plus "error" when the daemon's facts are missing.
nlohmann::json context_json(const ReportContext& context);

/// {"schema_version": kJsonSchemaVersion, "context": context_json(context), key: data}.
nlohmann::json json_report(const ReportContext& context, const std::string& key, nlohmann::json data);

}  // namespace qgate::client
