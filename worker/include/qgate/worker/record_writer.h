// Writes worker records to a stream: length-delimited protobuf for qgated, JSON lines for people
// and scripts, or a readable table line per record.
#pragma once

#include <ostream>
#include <string>
#include <optional>

#include "qgate/v1/worker.pb.h"

namespace qgate::worker {

enum class OutputFormat { proto, json, table };
std::optional<OutputFormat> parse_output_format(const std::string& text);

class RecordWriter {
 public:
  RecordWriter(OutputFormat format, std::ostream& out) : format_(format), out_(out) {}
  void write(const v1::WorkerRecord& record);

 private:
  OutputFormat format_;
  std::ostream& out_;
};

/// A one-line human description of a record (what the table format prints).
std::string describe_record(const v1::WorkerRecord& record);
/// "host 41.2 MiB", or "device 1024.0 MiB (nvml-process), host 41.2 MiB" where device memory was read.
std::string describe_memory(const v1::MemoryReading& reading);
std::string to_json(const google::protobuf::Message& message, bool pretty = false);
const char* outcome_name(v1::CaseOutcome outcome);

}  // namespace qgate::worker
