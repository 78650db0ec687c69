// The --json envelope (see json_report.h).
#include "qgate/client/json_report.h"

namespace qgate::client {

ReportContext report_context(const v1::DeviceStatus& device, const std::string& cli_version) {
  ReportContext c;
  c.host = device.host();
  c.backend = device.backend();
  c.device = device.device();
  c.gpu_name = device.name();
  c.driver_version = device.driver_version();
  c.qgate_version = device.qgate_version();
  c.cli_version = cli_version;
  return c;
}

ReportContext report_context_without_daemon(const std::string& cli_version, const std::string& why) {
  ReportContext c;
  c.cli_version = cli_version;
  c.error = why.empty() ? "the daemon did not describe its device" : why;
  return c;
}

nlohmann::json context_json(const ReportContext& c) {
  nlohmann::json out = {
      {"host", c.host},
      {"backend", c.backend},
      {"device", c.device},
      {"gpu_name", c.gpu_name},
      {"driver_version", c.driver_version},
      {"qgate_version", c.qgate_version},
      {"cli_version", c.cli_version},
  };
  if (!c.error.empty()) out["error"] = c.error;
  return out;
}

nlohmann::json json_report(const ReportContext& context, const std::string& key, nlohmann::json data) {
  nlohmann::json out = nlohmann::json::object();
  out["schema_version"] = kJsonSchemaVersion;
  out["context"] = context_json(context);
  out[key] = std::move(data);
  return out;
}

}  // namespace qgate::client
