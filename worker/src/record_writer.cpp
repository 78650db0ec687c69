// Record output in three formats; protobuf is the pipe qgated reads, the others are for people.
#include "qgate/worker/record_writer.h"

#include <google/protobuf/util/delimited_message_util.h>
#include <google/protobuf/util/json_util.h>

#include <cstdio>

#include "qgate/v1/record_words.h"
#include "qgate/worker/worker_errors.h"

namespace qgate::worker {

std::optional<OutputFormat> parse_output_format(const std::string& text) {
  if (text == "proto") return OutputFormat::proto;
  if (text == "json") return OutputFormat::json;
  if (text == "table") return OutputFormat::table;
  return std::nullopt;
}

std::string to_json(const google::protobuf::Message& message, bool pretty) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = pretty;
  options.preserve_proto_field_names = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!pretty) {
    // MessageToJsonString never emits raw newlines without add_whitespace; keep lines whole.
    while (!out.empty() && out.back() == '\n') out.pop_back();
  }
  return out;
}

const char* outcome_name(v1::CaseOutcome outcome) {
  switch (outcome) {
    case v1::CASE_OUTCOME_PASSED: return "PASS";
    case v1::CASE_OUTCOME_INCORRECT: return "INCORRECT";
    case v1::CASE_OUTCOME_ERROR: return "ERROR";
    case v1::CASE_OUTCOME_NOT_SUPPORTED: return "NOT_SUPPORTED";
    case v1::CASE_OUTCOME_INVALID_PROBLEM: return "INVALID_PROBLEM";
    default: return "UNSPECIFIED";
  }
}

std::string describe_memory(const v1::MemoryReading& reading) {
  char buf[160];
  const double mib = 1024.0 * 1024.0;
  if (reading.device_source().empty())
    std::snprintf(buf, sizeof buf, "host %.1f MiB", double(reading.host_rss_bytes()) / mib);
  else
    std::snprintf(buf, sizeof buf, "device %.1f MiB (%s), host %.1f MiB", double(reading.device_bytes()) / mib,
                  reading.device_source().c_str(), double(reading.host_rss_bytes()) / mib);
  return buf;
}

namespace {
std::string describe_cuda(const v1::CudaFailure& cuda) {
  return " [" + cuda.error() + (cuda.last_build_call().empty() ? "" : " after " + cuda.last_build_call()) +
         (cuda.context_lost() ? ", context lost" : "") + "]";
}
}  // namespace

std::string describe_record(const v1::WorkerRecord& record) {
  char buf[512];
  switch (record.record_case()) {
    case v1::WorkerRecord::kContext: {
      const auto& c = record.context();
      std::snprintf(buf, sizeof buf, "# %s on %s (%s) build %s %s abi %u", c.qgate_version().c_str(),
                    c.device_name().c_str(), c.backend() == v1::BACKEND_CUDA ? "cuda" : "cpu",
                    c.build().name().c_str(), c.build().version().c_str(), c.build().abi_version());
      return buf;
    }
    case v1::WorkerRecord::kParity: {
      const auto& p = record.parity();
      std::snprintf(buf, sizeof buf,
                    "%-15s %-5s %-4s %-16s %-7s max|diff| %.3e  of bound %5.3f  rel %.2e  nmse(exact) %.2e  %s",
                    outcome_name(p.outcome()), p.type().c_str(), words::word(p.path()).data(),
                    (std::to_string(p.shape().nt()) + "x" + std::to_string(p.shape().od()) + "x" +
                     std::to_string(p.shape().k())).c_str(),
                    words::word(p.activation()).data(), p.max_abs_diff(), p.worst_tolerance_fraction(),
                    p.max_rel_diff(), p.exact_nmse(), p.message().c_str());
      return buf;
    }
    case v1::WorkerRecord::kTiming: {
      const auto& t = record.timing();
      std::snprintf(buf, sizeof buf, "%-13s %-5s %-8s %-18s %10.1f us  %7.2f TMAC/s  %s",
                    outcome_name(t.outcome()), t.type().c_str(), words::word(t.path()).data(),
                    (std::to_string(t.shape().nt()) + "x" + std::to_string(t.shape().od()) + "x" +
                     std::to_string(t.shape().k())).c_str(),
                    t.median_us(), t.tmac_per_s(), t.message().c_str());
      return buf;
    }
    case v1::WorkerRecord::kPlan: {
      const auto& p = record.plan();
      return "# " + std::to_string(p.cases()) + " cases; MMQ judged in " +
             std::string(words::word(p.numerics())) + " numerics (" + p.numerics_source() + ")";
    }
    case v1::WorkerRecord::kError:
      return std::string("error (") + std::string(words::word(record.error().kind())) + "): " + record.error().message();
    case v1::WorkerRecord::kSummary: {
      const auto& s = record.summary();
      std::snprintf(buf, sizeof buf, "# %d cases: %d passed, %d failed, %d skipped (%.1f s)",
                    s.cases(), s.passed(), s.failed(), s.skipped(), s.wall_s());
      std::string line = buf;
      if (s.has_memory_before() && s.has_memory_after())
        line += "; memory before " + describe_memory(s.memory_before()) + ", after " + describe_memory(s.memory_after());
      return line;
    }
    case v1::WorkerRecord::kPrepared: {
      const auto& p = record.prepared();
      std::string line = std::string(outcome_name(p.outcome())) + " prepared " + p.profile() + " (" +
                         words::word(p.path()).data() + ")";
      if (p.has_memory_before()) line += "; memory before " + describe_memory(p.memory_before());
      if (p.has_memory_after()) line += ", after " + describe_memory(p.memory_after());
      if (!p.message().empty()) line += "; " + p.message();
      if (p.has_cuda()) line += describe_cuda(p.cuda());
      return line;
    }
    case v1::WorkerRecord::kProfileRun: {
      const auto& r = record.profile_run();
      std::snprintf(buf, sizeof buf, "%s run %lld %s: %.1f tok/s", outcome_name(r.outcome()),
                    static_cast<long long>(r.run_id()), r.profile().c_str(), r.tokens_per_s());
      std::string line = buf;
      if (r.has_memory()) line += "; memory " + describe_memory(r.memory());
      if (!r.message().empty()) line += "; " + r.message();
      if (r.has_cuda()) line += describe_cuda(r.cuda());
      return line;
    }
    case v1::WorkerRecord::kReleased: {
      const auto& r = record.released();
      return "# released " + std::to_string(r.released_gemms()) + " GEMM(s); memory " + describe_memory(r.memory());
    }
    default:
      return "(empty record)";
  }
}

void RecordWriter::write(const v1::WorkerRecord& record) {
  switch (format_) {
    case OutputFormat::proto:
      google::protobuf::util::SerializeDelimitedToOstream(record, &out_);
      break;
    case OutputFormat::json:
      out_ << to_json(record) << '\n';
      break;
    case OutputFormat::table:
      out_ << describe_record(record) << '\n';
      break;
  }
  out_.flush();
}

}  // namespace qgate::worker
