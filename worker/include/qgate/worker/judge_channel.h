// The parity judge's channel (docs/security.md). A kernel build runs inside the worker's process
// and can write to any descriptor that process holds, so the worker gives up the record stream
// qgated reads before it loads the build: a judge process, started first and never loading the
// build, owns that stream, and the worker hands it outputs on a pipe of their own.
#pragma once

#include <sys/types.h>

#include <ext/stdio_filebuf.h>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "qgate/v1/worker.pb.h"

namespace qgate::worker {

/// Moves the record stream off stdout: returns a private (close-on-exec) descriptor for what
/// stdout was, and points stdout at stderr, so whatever a build prints lands in the worker's log
/// and never among records. -1 with `error` set when the descriptors cannot be moved.
int take_record_stream(std::string* error);

/// An std::ostream over a descriptor it owns (the private record stream of take_record_stream).
class DescriptorStream {
 public:
  explicit DescriptorStream(int fd);
  std::ostream& stream() { return stream_; }

 private:
  __gnu_cxx::stdio_filebuf<char> buffer_;
  std::ostream stream_;
};

/// A `qgate-worker judge` process started from this executable with `args`: its stdin is the
/// pipe send() writes, its stdout is `record_fd`, which this process closes once the judge holds
/// it. Throws std::runtime_error when the judge cannot be started.
class JudgeProcess {
 public:
  JudgeProcess(const std::vector<std::string>& args, int record_fd);
  ~JudgeProcess();
  JudgeProcess(const JudgeProcess&) = delete;
  JudgeProcess& operator=(const JudgeProcess&) = delete;

  /// False when the judge is gone (it stops reading at the first thing it refuses).
  bool send(const v1::JudgeInput& input);
  /// Closes the channel, waits for the judge and returns its exit code (128 + signal if killed).
  int finish();

 private:
  pid_t pid_ = -1;
  int channel_fd_ = -1;
};

/// Reads the length-delimited JudgeInput messages of a channel.
class JudgeInputReader {
 public:
  explicit JudgeInputReader(int fd);
  ~JudgeInputReader();
  enum class Read { message, end, malformed };
  Read next(v1::JudgeInput* input);

 private:
  struct Stream;
  std::unique_ptr<Stream> stream_;
};

}  // namespace qgate::worker
