// Runs qgate-worker as a subprocess (tests/support/process_run) and reads its record streams.
#include "worker_process.h"

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/delimited_message_util.h>
#include <gtest/gtest.h>

namespace qgate::worker::testing {

std::string worker_binary() { return test_support::path_from_env("QGATE_WORKER_BINARY", QGATE_WORKER_BINARY); }

std::string ref_library() { return test_support::path_from_env("QGATE_REF_LIBRARY", QGATE_REF_LIBRARY); }

ProcessResult run_worker(const std::string& args, const std::string& env) {
  return run_worker_with_input(args, "", env);
}

std::string serialize_requests(const std::vector<v1::WorkerRequest>& requests) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    for (const auto& r : requests) google::protobuf::util::SerializeDelimitedToZeroCopyStream(r, &out);
  }
  return bytes;
}

ProcessResult run_worker_with_input(const std::string& args, const std::string& input, const std::string& env) {
  return test_support::run_process(worker_binary(), args, input, env);
}

std::vector<v1::WorkerRecord> parse_records(const std::string& bytes) {
  std::vector<v1::WorkerRecord> records;
  google::protobuf::io::ArrayInputStream input(bytes.data(), int(bytes.size()));
  while (true) {
    v1::WorkerRecord r;
    bool clean_eof = false;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&r, &input, &clean_eof)) {
      EXPECT_TRUE(clean_eof) << "malformed record stream after " << records.size() << " records";
      break;
    }
    records.push_back(std::move(r));
  }
  return records;
}

}  // namespace qgate::worker::testing
