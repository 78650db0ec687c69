// The parity judge's channel: moving the record stream off stdout, starting the judge, and the
// length-delimited messages between the worker and the judge (see judge_channel.h).
#include "qgate/worker/judge_channel.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/util/delimited_message_util.h>
#include <stdexcept>

namespace qgate::worker {

int take_record_stream(std::string* error) {
  const int fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (fd < 0) {
    *error = std::string("cannot keep the record stream: ") + std::strerror(errno);
    return -1;
  }
  if (dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    *error = std::string("cannot point stdout at the log: ") + std::strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

DescriptorStream::DescriptorStream(int fd) : buffer_(fd, std::ios::out), stream_(&buffer_) {}

JudgeProcess::JudgeProcess(const std::vector<std::string>& args, int record_fd) {
  int channel[2];
  if (pipe2(channel, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::vector<std::string> argv_store = {"/proc/self/exe"};
  argv_store.insert(argv_store.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_store) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0) {
    close(channel[0]);
    close(channel[1]);
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (pid_ == 0) {
    // Only async-signal-safe calls until exec. dup2 clears close-on-exec on the targets.
    if (dup2(channel[0], STDIN_FILENO) < 0 || dup2(record_fd, STDOUT_FILENO) < 0) _exit(127);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  close(channel[0]);
  close(record_fd);  // from here on only the judge can reach what qgated reads
  channel_fd_ = channel[1];
  // A judge that stopped reading must be an error code here, not a signal.
  signal(SIGPIPE, SIG_IGN);
}

JudgeProcess::~JudgeProcess() {
  if (pid_ > 0) finish();
}

bool JudgeProcess::send(const v1::JudgeInput& input) {
  if (channel_fd_ < 0) return false;
  google::protobuf::io::FileOutputStream out(channel_fd_);
  return google::protobuf::util::SerializeDelimitedToZeroCopyStream(input, &out) && out.Flush();
}

int JudgeProcess::finish() {
  if (channel_fd_ >= 0) close(channel_fd_);
  channel_fd_ = -1;
  if (pid_ <= 0) return 127;
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 127;
}

struct JudgeInputReader::Stream {
  explicit Stream(int fd) : file(fd) {}
  google::protobuf::io::FileInputStream file;
};

JudgeInputReader::JudgeInputReader(int fd) : stream_(std::make_unique<Stream>(fd)) {}
JudgeInputReader::~JudgeInputReader() = default;

JudgeInputReader::Read JudgeInputReader::next(v1::JudgeInput* input) {
  bool clean_eof = false;
  if (google::protobuf::util::ParseDelimitedFromZeroCopyStream(input, &stream_->file, &clean_eof))
    return Read::message;
  return clean_eof ? Read::end : Read::malformed;
}

}  // namespace qgate::worker
