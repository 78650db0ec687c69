// Child-process plumbing for qgate-worker: fork/exec with pipes, a fresh process group, non-
// blocking reads of length-delimited records with a deadline, death seen by pid (a pidfd), group
// kills, and whatever the worker left outside its group ended once it is reaped (OrphanReaper).
#include "qgate/server/worker_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <thread>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "qgate/common/signal_names.h"
#include "qgate/server/orphan_reaper.h"

namespace qgate::server {
namespace {

std::string describe_status(int status, int* term_signal) {
  *term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (WIFEXITED(status)) return "exit " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "status " + std::to_string(status);
}

}  // namespace

std::map<std::string, std::string> clean_worker_environment(const std::map<std::string, std::string>& arm_env) {
  std::map<std::string, std::string> env;
  for (const char* keep : {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "CUDA_VISIBLE_DEVICES",
                           "CUDA_DEVICE_ORDER", "LD_LIBRARY_PATH"}) {
    if (const char* v = std::getenv(keep)) env[keep] = v;
  }
  if (!env.count("PATH")) env["PATH"] = "/usr/bin:/bin";
  for (const auto& [k, v] : arm_env) env[k] = v;
  return env;
}

WorkerProcess::WorkerProcess(const WorkerLaunch& launch) : stderr_path_(launch.stderr_path), cgroup_(launch.cgroup) {
  int in_pipe[2], out_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    close(in_pipe[0]);
    close(in_pipe[1]);
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  // Everything the child needs is prepared before fork: only async-signal-safe calls after it.
  std::vector<std::string> argv_store = {launch.binary};
  argv_store.insert(argv_store.end(), launch.args.begin(), launch.args.end());
  std::vector<char*> argv;
  for (auto& a : argv_store) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_store;
  for (const auto& [k, v] : launch.env) env_store.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string err_path = launch.stderr_path.empty() ? "/dev/null" : launch.stderr_path;
  const int64_t cpu_seconds = launch.cpu_seconds, open_files = launch.open_files, file_bytes = launch.file_bytes;
  const WorkerCgroup* cgroup = launch.cgroup.get();

  pid_ = OrphanReaper::instance().fork_recorded();
  if (pid_ < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid_ == 0) {
    setpgid(0, 0);  // its own group, so a kill reaches whatever it starts too
    // Its cgroup before anything else: all it starts is born inside, bounded and killed with it.
    if (cgroup && !cgroup->join_from_child()) {
      static const char kNoCgroup[] = "qgate-worker: cannot join its cgroup\n";
      const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
      if (err >= 0) (void)!write(err, kNoCgroup, sizeof kNoCgroup - 1);
      _exit(125);
    }
    // A worker must not outlive its daemon (kill -9 included): the kernel kills it with us.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) _exit(126);
    dup2(in_pipe[0], STDIN_FILENO);
    dup2(out_pipe[1], STDOUT_FILENO);
    int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (err_fd >= 0) dup2(err_fd, STDERR_FILENO);
    // No core dumps of crashing kernel builds, bounded CPU time and descriptors; nothing
    // inherited but the pipes (close_range reaches descriptors above any fixed bound).
    const struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    const struct rlimit cpu = {rlim_t(cpu_seconds), rlim_t(cpu_seconds + 5)};
    setrlimit(RLIMIT_CPU, &cpu);
    const struct rlimit files = {rlim_t(open_files), rlim_t(open_files)};
    setrlimit(RLIMIT_NOFILE, &files);
    // Writes past the cap fail (EFBIG) instead of raising SIGXFSZ: the log stops, the worker runs on.
    signal(SIGXFSZ, SIG_IGN);
    const struct rlimit sizes = {rlim_t(file_bytes), rlim_t(file_bytes)};
    setrlimit(RLIMIT_FSIZE, &sizes);
    syscall(SYS_close_range, 3u, ~0u, 0u);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  setpgid(pid_, pid_);
  // Readable once the worker has exited, whoever else still holds its pipe (a child it started).
  pidfd_ = int(syscall(SYS_pidfd_open, pid_, 0));
  close(in_pipe[0]);
  close(out_pipe[1]);
  stdin_fd_ = in_pipe[1];
  stdout_fd_ = out_pipe[0];
  fcntl(stdout_fd_, F_SETFL, fcntl(stdout_fd_, F_GETFL) | O_NONBLOCK);
  signal(SIGPIPE, SIG_IGN);  // a dead worker's pipe must be an error code, not a daemon crash
}

WorkerProcess::~WorkerProcess() {
  if (!reaped_) kill_group();
  if (stdin_fd_ >= 0) close(stdin_fd_);
  if (stdout_fd_ >= 0) close(stdout_fd_);
  if (pidfd_ >= 0) close(pidfd_);
}

bool WorkerProcess::send(const v1::WorkerRequest& request) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream raw(&bytes);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.WriteVarint32(uint32_t(request.ByteSizeLong()));
    request.SerializeToCodedStream(&coded);
  }
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = write(stdin_fd_, bytes.data() + off, bytes.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += size_t(n);
  }
  return true;
}

bool WorkerProcess::fill(std::chrono::steady_clock::time_point deadline) {
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    pollfd pfds[2] = {{stdout_fd_, POLLIN, 0}, {pidfd_, POLLIN, 0}};
    int ms = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count()) + 1;
    // Without a pidfd (a kernel before 5.3), look at the pid every 100 ms instead.
    if (pidfd_ < 0) ms = std::min(ms, 100);
    const int r = poll(pfds, pidfd_ >= 0 ? 2 : 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (pfds[0].revents != 0) {
      char chunk[65536];
      const ssize_t n = ::read(stdout_fd_, chunk, sizeof chunk);
      if (n > 0) {
        parser_.append(chunk, size_t(n));
        return true;
      }
      if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        eof_ = true;
        return false;
      }
    }
    if (worker_exited(pfds[1].revents != 0)) {
      // Everything it wrote before it ended is in the pipe: take that, then it is the end, even
      // when a process it started still holds the pipe open.
      drain_after_exit();
      eof_ = true;
      return false;
    }
  }
}

bool WorkerProcess::worker_exited(bool pidfd_readable) const {
  if (reaped_) return true;
  if (pidfd_ >= 0) return pidfd_readable;
  siginfo_t info{};
  return waitid(P_PID, id_t(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_;
}

void WorkerProcess::drain_after_exit() {
  char chunk[65536];
  while (true) {
    const ssize_t n = ::read(stdout_fd_, chunk, sizeof chunk);
    if (n > 0) {
      parser_.append(chunk, size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return;  // empty (EAGAIN), closed, or an error
  }
}

ReadEnd WorkerProcess::read(v1::WorkerRecord* record, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    switch (parser_.next(record)) {
      case RecordStreamParser::Result::record: return ReadEnd::record;
      case RecordStreamParser::Result::malformed: return ReadEnd::malformed;
      case RecordStreamParser::Result::need_more: break;
    }
    if (eof_) return ReadEnd::eof;
    if (!fill(deadline)) {
      if (eof_) continue;  // parse whatever remains, then report eof
      return ReadEnd::timeout;
    }
  }
}

void WorkerProcess::freeze_group(bool frozen) {
  if (pid_ <= 1 || reaped_) return;
  ::kill(-pid_, frozen ? SIGSTOP : SIGCONT);
}

void WorkerProcess::kill_group() {
  if (pid_ <= 0 || reaped_) return;
  ::kill(-pid_, SIGKILL);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  exit_text_ = describe_status(status, &term_signal_);
  end_what_it_left();
}

void WorkerProcess::end_what_it_left() {
  if (cgroup_) {
    memory_limit_killed_ = cgroup_->memory_limit_killed();
    cgroup_->kill_all();  // whatever it started, in any session
  }
  OrphanReaper::instance().forget(pid_);
  OrphanReaper::instance().reap_orphans();
}

std::string WorkerProcess::wait_exit(std::chrono::milliseconds timeout) {
  if (reaped_) return exit_text_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      exit_text_ = describe_status(status, &term_signal_);
      ::kill(-pid_, SIGKILL);  // anything it left behind in its group
      end_what_it_left();      // and outside it
      return exit_text_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill_group();
  return exit_text_ + " (killed after not exiting in time)";
}

std::string WorkerProcess::where_is_it(std::chrono::milliseconds timeout) {
  if (pid_ <= 0 || reaped_ || stderr_path_.empty()) return "";
  // Only what the worker writes after the signal counts: read from the log's size before it.
  std::ifstream log(stderr_path_, std::ios::binary | std::ios::ate);
  if (!log) return "";
  const std::streamoff before = log.tellg();
  if (::kill(pid_, SIGUSR1) != 0) return "";
  const std::string marker = "qgate-worker: status:";
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    log.clear();
    log.seekg(before);
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    const size_t at = text.find(marker);
    const size_t end = at == std::string::npos ? std::string::npos : text.find('\n', at);
    if (end == std::string::npos) continue;  // not written yet, or not a whole line yet
    const std::string line = text.substr(at, end - at);
    const size_t in = line.find(" in ");
    return in == std::string::npos ? "" : line.substr(in + 4);
  }
  return "";
}

std::string signal_name(int sig) {
  const char* known = common::known_signal_name(sig);
  return known ? known : "signal " + std::to_string(sig);
}

std::string fatal_signal_call(const std::string& stderr_text) {
  const std::string marker = "qgate-worker: fatal signal ";
  const size_t at = stderr_text.rfind(marker);
  if (at == std::string::npos) return "";
  const size_t end = stderr_text.find('\n', at);
  const std::string line = stderr_text.substr(at, end == std::string::npos ? std::string::npos : end - at);
  const size_t in = line.find(" in ");
  return in == std::string::npos ? "" : line.substr(in + 4);
}

std::string WorkerProcess::stderr_tail(size_t max_bytes) const {
  if (stderr_path_.empty()) return "";
  std::ifstream in(stderr_path_, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > std::streamoff(max_bytes) ? size - std::streamoff(max_bytes) : 0;
  in.seekg(start);
  std::string text(size_t(size - start), '\0');
  in.read(text.data(), std::streamsize(text.size()));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace qgate::server
