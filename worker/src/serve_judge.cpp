// The A/B worker's judge: starting it between qgated and the worker, and its loop (serve_judge.h).
#include "qgate/worker/serve_judge.h"

#include <fcntl.h>
#include <unistd.h>

#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/util/delimited_message_util.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "qgate/worker/output_head.h"
#include "qgate/worker/record_writer.h"
#include "qgate/worker/worker_errors.h"

namespace qgate::worker {
namespace {

/// The head the last prepare asked for, as the judge derives it.
struct ExpectedHead {
  int64_t rows = 0;
  int64_t od = 0;
  std::vector<int64_t> targets;
};

class HeadBook {
 public:
  void expect(const v1::PrepareProfileRequest& prepare, qgate_backend backend) {
    ExpectedHead head;
    const OutputHeadChoice choice = choose_output_head(prepare.profile(), backend);
    head.rows = output_head_rows(prepare.tokens());
    head.od = choice.od;
    if (head.rows > 0 && head.od >= 2)
      head.targets = output_head_targets(head.od, head.rows, output_head_seed(prepare.seed(), choice, head.rows));
    std::lock_guard<std::mutex> lock(mu_);
    head_ = std::move(head);
  }
  std::optional<ExpectedHead> current() const {
    std::lock_guard<std::mutex> lock(mu_);
    return head_;
  }

 private:
  mutable std::mutex mu_;
  std::optional<ExpectedHead> head_;
};

/// Makes a run's greedy tokens from the logits the worker handed over; "" when done, else what
/// the worker did that the protocol does not allow.
std::string judge_run(v1::ProfileRun& run, const HeadBook& heads) {
  if (run.output_tokens_size() > 0 || run.has_output() || !run.output_text().empty())
    return "the worker sent greedy tokens of its own (only the judge makes them)";
  if (run.head_logits().empty()) return "";
  const auto head = heads.current();
  if (!head || head->targets.empty()) return "output head logits for a head no prepare asked for";
  const size_t expected = size_t(head->rows) * size_t(head->od) * sizeof(float);
  if (run.head_logits().size() != expected)
    return "output head logits of " + std::to_string(run.head_logits().size()) + " bytes; the head is " +
           std::to_string(head->rows) + " x " + std::to_string(head->od) + " f32 (" + std::to_string(expected) +
           " bytes)";
  std::vector<float> logits(size_t(head->rows) * size_t(head->od));
  std::memcpy(logits.data(), run.head_logits().data(), expected);
  const std::vector<int64_t> tokens = greedy_tokens(logits.data(), head->rows, head->od);
  int64_t off_target = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    run.add_output_tokens(tokens[i]);
    off_target += tokens[i] != head->targets[i] ? 1 : 0;
  }
  run.set_has_output(true);
  run.set_output_off_target(off_target);
  run.clear_head_logits();
  return "";
}

/// The record stream qgated reads, written from both of the judge's threads.
class SharedRecords {
 public:
  void write(const v1::WorkerRecord& record) {
    std::lock_guard<std::mutex> lock(mu_);
    out_.write(record);
    std::cout.flush();
  }

 private:
  std::mutex mu_;
  RecordWriter out_{OutputFormat::proto, std::cout};
};

/// qgated's requests on to the worker, each prepare noted first; ends at the end of qgated's input
/// (or a request that does not parse, which is answered as the worker would answer it).
void forward_requests(int to_worker_fd, HeadBook& heads, qgate_backend backend, SharedRecords& records) {
  google::protobuf::io::FileInputStream input(STDIN_FILENO);
  google::protobuf::io::FileOutputStream output(to_worker_fd);
  while (true) {
    v1::WorkerRequest request;
    bool clean_eof = false;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&request, &input, &clean_eof)) {
      if (!clean_eof) records.write(error_record(v1::WORKER_ERROR_KIND_INVALID_REQUEST, "malformed request on stdin"));
      break;
    }
    if (request.has_prepare()) heads.expect(request.prepare(), backend);
    if (!google::protobuf::util::SerializeDelimitedToZeroCopyStream(request, &output) || !output.Flush()) break;
  }
  output.Close();  // the worker's end of input: it finishes as it would at qgated's
}

}  // namespace

ServeJudgeChannel start_serve_judge(const std::vector<std::string>& args, int record_fd) {
  int to_worker[2], from_worker[2];
  if (pipe2(to_worker, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  if (pipe2(from_worker, O_CLOEXEC) != 0) {
    close(to_worker[0]);
    close(to_worker[1]);
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  std::vector<std::string> argv_store = {"/proc/self/exe"};
  argv_store.insert(argv_store.end(), args.begin(), args.end());
  argv_store.insert(argv_store.end(), {"--to-worker-fd", std::to_string(to_worker[1]), "--from-worker-fd",
                                       std::to_string(from_worker[0])});
  std::vector<char*> argv;
  for (auto& a : argv_store) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {to_worker[0], to_worker[1], from_worker[0], from_worker[1]}) close(fd);
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Only async-signal-safe calls until exec: its two ends of the pipes survive exec, nothing else.
    if (dup2(record_fd, STDOUT_FILENO) < 0 || fcntl(to_worker[1], F_SETFD, 0) != 0 ||
        fcntl(from_worker[0], F_SETFD, 0) != 0)
      _exit(127);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  // From here on the worker reads the judge's requests and reaches qgated only through it.
  if (dup2(to_worker[0], STDIN_FILENO) < 0) throw std::runtime_error(std::string("dup2: ") + std::strerror(errno));
  close(to_worker[0]);
  close(to_worker[1]);
  close(from_worker[0]);
  close(record_fd);
  signal(SIGPIPE, SIG_IGN);  // a judge that stopped reading is an error code, not a signal
  return {STDIN_FILENO, from_worker[1], pid};
}

int run_serve_judge(qgate_backend backend, int to_worker_fd, int from_worker_fd) {
  signal(SIGPIPE, SIG_IGN);
  HeadBook heads;
  SharedRecords out;
  std::thread requests(forward_requests, to_worker_fd, std::ref(heads), backend, std::ref(out));
  requests.detach();  // it ends at qgated's end of input, which may come after the worker's
  google::protobuf::io::FileInputStream replies(from_worker_fd);
  auto tampered = [&](const std::string& what) {
    const std::string message = what + " (the judge stopped; nothing more of this worker's is passed on)";
    out.write(error_record(v1::WORKER_ERROR_KIND_CHANNEL_TAMPERED, message));
    std::cerr << "qgate-worker serve-judge: " << message << "\n";
    return 5;
  };
  while (true) {
    v1::WorkerRecord record;
    bool clean_eof = false;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&record, &replies, &clean_eof)) {
      if (clean_eof) break;
      return tampered("bytes on the worker's channel that are not a record");
    }
    if (record.has_profile_run())
      if (std::string why = judge_run(*record.mutable_profile_run(), heads); !why.empty()) return tampered(why);
    out.write(record);
  }
  return 0;
}

}  // namespace qgate::worker
