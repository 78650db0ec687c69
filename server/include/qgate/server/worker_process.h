// A qgate-worker child process: started in its own process group with a clean environment and
// only its pipes, fed WorkerRequests on stdin, read WorkerRecords from stdout with a deadline,
// and killed with its whole group when it overruns or the job is cancelled.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qgate/server/record_stream.h"
#include "qgate/server/worker_cgroups.h"
#include "qgate/v1/worker.pb.h"

namespace qgate::server {

/// The default cap on a worker's log (and on any file a worker writes): 64 MiB.
inline constexpr int64_t kWorkerLogCapBytes = int64_t(64) << 20;

struct WorkerLaunch {
  std::string binary;                          // path of qgate-worker
  std::vector<std::string> args;               // e.g. {"serve", "--build", path, "--backend", "cuda"}
  std::map<std::string, std::string> env;      // the whole environment of the child
  std::string stderr_path;                     // where the worker's stderr goes ("" = /dev/null)
  // Resource limits of the child (setrlimit). No address-space limit: CUDA reserves large
  // virtual ranges at start, so RLIMIT_AS would break every GPU worker.
  int64_t cpu_seconds = 4 * 3600;              // RLIMIT_CPU: a runaway build is killed (SIGXCPU/SIGKILL)
  int64_t open_files = 1024;                   // RLIMIT_NOFILE
  // RLIMIT_FSIZE: no file the child writes, its log included, grows past this, so a build that
  // floods stdout or stderr stops at the cap instead of filling the data directory's disk.
  int64_t file_bytes = kWorkerLogCapBytes;
  // The worker's own cgroup (worker_cgroups.h), which the child joins before it execs; null: none.
  std::shared_ptr<WorkerCgroup> cgroup;
};

/// How a read ended when no record came.
enum class ReadEnd { record, eof, timeout, malformed };

class WorkerProcess {
 public:
  /// Starts the process; throws std::runtime_error when it cannot be started.
  explicit WorkerProcess(const WorkerLaunch& launch);
  ~WorkerProcess();  // kills the group if still running
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  pid_t pid() const { return pid_; }
  /// False when the pipe is closed (the worker died).
  bool send(const v1::WorkerRequest& request);
  /// Waits up to `timeout` for the next record.
  ReadEnd read(v1::WorkerRecord* record, std::chrono::milliseconds timeout);
  /// SIGKILL to the whole process group, then reaps it.
  void kill_group();
  /// SIGSTOP (true) or SIGCONT (false) to the whole process group: a frozen worker's threads, and
  /// whatever it started, take no CPU and issue no GPU work until it is thawed.
  void freeze_group(bool frozen);
  /// Waits for exit (after EOF or a shutdown request); returns a description such as
  /// "exit 0", "exit 3", "signal 11 (Segmentation fault)".
  std::string wait_exit(std::chrono::milliseconds timeout);
  /// The last lines the worker wrote to stderr (for error messages), when captured to a file.
  std::string stderr_tail(size_t max_bytes = 2000) const;
  /// Once reaped: the signal that ended the process (SIGSEGV, SIGKILL, ...), 0 when it exited.
  int term_signal() const { return term_signal_; }
  /// Asks a running worker where it is (SIGUSR1: it writes "qgate-worker: status: in <call>" to
  /// stderr) and returns the build call it names, waiting up to `timeout`; "" when it does not
  /// answer. qgate-worker answers between any two instructions, a hung build call included.
  std::string where_is_it(std::chrono::milliseconds timeout);
  /// Once reaped: true when the kernel killed a process of its cgroup at the memory limit.
  bool memory_limit_killed() const { return memory_limit_killed_; }

 private:
  bool fill(std::chrono::steady_clock::time_point deadline);
  bool worker_exited(bool pidfd_readable) const;
  void drain_after_exit();
  void end_what_it_left();
  pid_t pid_ = -1;
  int pidfd_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  RecordStreamParser parser_;
  bool eof_ = false;
  bool reaped_ = false;
  std::string exit_text_;
  int term_signal_ = 0;
  bool memory_limit_killed_ = false;
  std::string stderr_path_;
  std::shared_ptr<WorkerCgroup> cgroup_;
};

/// "SIGSEGV" for 11 and so on ("signal 42" for one without a name).
std::string signal_name(int sig);

/// The build call a worker's stderr says it died in: "qgate_gemm_prepare" from the line
/// "qgate-worker: fatal signal SIGSEGV in qgate_gemm_prepare"; "" when no such line is there.
std::string fatal_signal_call(const std::string& stderr_text);

/// The environment a worker is started with: nothing inherited but PATH and the CUDA/locale
/// variables a runtime needs, plus the arm's own variables.
std::map<std::string, std::string> clean_worker_environment(const std::map<std::string, std::string>& arm_env);

}  // namespace qgate::server
