// Runs qgate-worker as a subprocess through the shell, with stdout and stderr in temp files.
#include "worker_process.h"

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/delimited_message_util.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace qgate::worker::testing {

namespace {
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

std::string worker_binary() {
  const char* env = std::getenv("QGATE_WORKER_BINARY");
  return env && *env ? env : QGATE_WORKER_BINARY;
}

std::string ref_library() {
  const char* env = std::getenv("QGATE_REF_LIBRARY");
  return env && *env ? env : QGATE_REF_LIBRARY;
}

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
  char out_tpl[] = "/tmp/qgate-worker-out-XXXXXX";
  char err_tpl[] = "/tmp/qgate-worker-err-XXXXXX";
  char in_tpl[] = "/tmp/qgate-worker-in-XXXXXX";
  int out_fd = mkstemp(out_tpl), err_fd = mkstemp(err_tpl), in_fd = mkstemp(in_tpl);
  close(out_fd);
  close(err_fd);
  close(in_fd);
  std::ofstream(in_tpl, std::ios::binary) << input;
  const std::string cmd = (env.empty() ? "" : "env " + env + " ") + worker_binary() + " " + args +
                          " >" + out_tpl + " 2>" + err_tpl + " <" + in_tpl;
  const int status = std::system(cmd.c_str());
  ProcessResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out_tpl);
  r.err = slurp(err_tpl);
  unlink(out_tpl);
  unlink(err_tpl);
  unlink(in_tpl);
  return r;
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
