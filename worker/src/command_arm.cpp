// The command arm's worker: starts the arm's program for each timed run and reads its figure.
#include "qgate/worker/command_arm.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/util/delimited_message_util.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>

#include "qgate/interop/output_reader.h"
#include "qgate/v1/record_words.h"
#include "qgate/worker/worker_errors.h"

namespace qgate::worker {
namespace {

constexpr size_t kDefaultMaxStdout = 16u << 20;

int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool executable_file(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

/// argv[0] as it will be executed: a path as given (relative to workdir), else the first match on PATH.
std::optional<std::string> resolve_program(const std::string& name, const std::string& workdir) {
  if (name.find('/') != std::string::npos) {
    const std::string path = name.front() == '/' || workdir.empty() ? name : workdir + "/" + name;
    return executable_file(path) ? std::optional<std::string>(path) : std::nullopt;
  }
  const char* path_env = std::getenv("PATH");
  std::string dirs = path_env ? path_env : "/usr/bin:/bin";
  size_t pos = 0;
  while (pos <= dirs.size()) {
    size_t end = dirs.find(':', pos);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = dirs.substr(pos, end - pos);
    pos = end + 1;
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (executable_file(candidate)) return candidate;
  }
  return std::nullopt;
}

/// A program's death, passed on: the same signal, or the same exit status. Never returns.
[[noreturn]] void end_like(const ProgramRun& run) {
  std::cerr.flush();
  if (run.signal != 0) {
    signal(run.signal, SIG_DFL);
    raise(run.signal);
  }
  _exit(run.exit_status != 0 ? run.exit_status : 1);
}

void note(const std::string& line) { std::cerr << "qgate-worker: " << line << "\n" << std::flush; }

v1::ProfileRun timed_run(const v1::CommandArm& arm, const std::string& profile, const v1::RunProfileRequest& req) {
  v1::ProfileRun result;
  result.set_run_id(req.run_id());
  result.set_profile(profile);
  result.set_path(v1::GEMM_PATH_COMMAND);
  result.set_worker_pid(getpid());
  const size_t max_stdout = arm.max_stdout_bytes() > 0 ? size_t(arm.max_stdout_bytes()) : kDefaultMaxStdout;
  result.set_started_unix_ms(now_unix_ms());
  const ProgramRun run = run_program({arm.argv().begin(), arm.argv().end()}, arm.workdir(), max_stdout);
  result.set_finished_unix_ms(now_unix_ms());
  if (!run.start_error.empty()) {
    result.set_outcome(v1::CASE_OUTCOME_ERROR);
    result.set_message(run.start_error);
    return result;
  }
  if (run.signal != 0 || run.exit_status != 0) {
    note(run.signal ? "the command died of signal " + std::to_string(run.signal)
                    : "the command exited with status " + std::to_string(run.exit_status));
    end_like(run);
  }
  result.set_pass_ms(run.wall_ms);
  try {
    result.set_tokens_per_s(interop::read_figure(arm.tokens_per_s(), run.stdout_text));
  } catch (const interop::OutputReadError& e) {
    result.set_outcome(v1::CASE_OUTCOME_INCORRECT);
    result.set_message(std::string("no tok/s figure in the command's output: ") + e.what());
    return result;
  }
  if (arm.output().format() != v1::OUTPUT_FORMAT_UNSPECIFIED) {
    std::string printed = run.stdout_text;
    if (!arm.output_argv().empty()) {
      const ProgramRun out = run_program({arm.output_argv().begin(), arm.output_argv().end()}, arm.workdir(),
                                         max_stdout);
      if (!out.start_error.empty()) {
        result.set_outcome(v1::CASE_OUTCOME_ERROR);
        result.set_message("the output command: " + out.start_error);
        return result;
      }
      if (out.signal != 0 || out.exit_status != 0) {
        note("the output command failed");
        end_like(out);
      }
      printed = out.stdout_text;
    }
    try {
      const interop::ProgramOutput output = interop::read_output(arm.output(), printed);
      result.set_has_output(true);
      if (output.is_tokens)
        for (int64_t t : output.tokens) result.add_output_tokens(t);
      else
        result.set_output_text(output.text);
    } catch (const interop::OutputReadError& e) {
      result.set_outcome(v1::CASE_OUTCOME_INCORRECT);
      result.set_message(std::string("no output in the command's output: ") + e.what());
      return result;
    }
  }
  result.set_outcome(v1::CASE_OUTCOME_PASSED);
  return result;
}

extern "C" void report_status(int) {
  static const char kLine[] = "qgate-worker: status: in the command\n";
  [[maybe_unused]] ssize_t n = write(STDERR_FILENO, kLine, sizeof kLine - 1);
}

/// True when `p` is, lies under, or holds one of `guarded`.
bool touches(const std::filesystem::path& p, const std::vector<std::filesystem::path>& guarded) {
  auto under = [](const std::filesystem::path& inner, const std::filesystem::path& outer) {
    auto i = inner.begin();
    for (auto o = outer.begin(); o != outer.end(); ++o, ++i)
      if (i == inner.end() || *i != *o) return false;
    return true;
  };
  for (const auto& g : guarded)
    if (under(p, g) || under(g, p)) return true;
  return false;
}

}  // namespace

std::vector<std::string> command_read_paths(const v1::CommandArm& arm) {
  namespace fs = std::filesystem;
  std::vector<fs::path> guarded;
  for (const auto& p : arm.protected_paths())
    if (!p.empty()) guarded.push_back(fs::weakly_canonical(fs::absolute(p)));
  std::vector<std::string> out(arm.read_paths().begin(), arm.read_paths().end());
  auto consider = [&](const std::string& word) {
    if (word.empty()) return;
    std::error_code ec;
    const fs::path given = word.front() == '/' || arm.workdir().empty() ? fs::path(word) : fs::path(arm.workdir()) / word;
    if (!fs::exists(given, ec)) return;
    const fs::path real = fs::weakly_canonical(given, ec);
    if (ec || touches(real, guarded)) return;
    out.push_back(real.string());
  };
  for (const auto* argv : {&arm.argv(), &arm.output_argv()}) {
    if (argv->empty()) continue;
    if (const auto program = resolve_program(argv->Get(0), arm.workdir())) {
      consider(fs::path(*program).parent_path().string());
      consider(*program);
    }
    for (const std::string& word : *argv) {
      consider(word);
      if (const size_t eq = word.find('='); eq != std::string::npos) consider(word.substr(eq + 1));
    }
  }
  return out;
}

std::string check_program(const std::vector<std::string>& argv, const std::string& workdir) {
  if (argv.empty() || argv.front().empty()) return "the command is empty";
  if (!resolve_program(argv.front(), workdir))
    return "'" + argv.front() + "' is not an executable file" +
           (argv.front().find('/') == std::string::npos ? " on PATH" : "");
  return "";
}

ProgramRun run_program(const std::vector<std::string>& argv, const std::string& workdir, size_t max_stdout) {
  ProgramRun run;
  const auto program = argv.empty() ? std::nullopt : resolve_program(argv.front(), workdir);
  if (!program) {
    run.start_error = check_program(argv, workdir);
    return run;
  }
  int out_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    run.start_error = std::string("pipe: ") + std::strerror(errno);
    return run;
  }
  std::vector<std::string> args_store = argv;
  std::vector<char*> args;
  for (auto& a : args_store) args.push_back(a.data());
  args.push_back(nullptr);
  const auto started = std::chrono::steady_clock::now();
  std::cout.flush();
  const pid_t pid = fork();
  if (pid < 0) {
    run.start_error = std::string("fork: ") + std::strerror(errno);
    close(out_pipe[0]);
    close(out_pipe[1]);
    return run;
  }
  if (pid == 0) {
    // Stays in this worker's process group: qgated's kill of the group reaches the program.
    dup2(out_pipe[1], STDOUT_FILENO);
    const int null_in = open("/dev/null", O_RDONLY);
    if (null_in >= 0) dup2(null_in, STDIN_FILENO);
    if (!workdir.empty() && chdir(workdir.c_str()) != 0) _exit(127);
    signal(SIGUSR1, SIG_DFL);
    execv(program->c_str(), args.data());
    _exit(127);
  }
  close(out_pipe[1]);
  char buf[65536];
  while (true) {
    const ssize_t n = read(out_pipe[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    const size_t room = max_stdout - std::min(max_stdout, run.stdout_text.size());
    run.stdout_text.append(buf, std::min(size_t(n), room));
    if (size_t(n) > room) run.stdout_truncated = true;
  }
  close(out_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  run.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  if (WIFSIGNALED(status)) run.signal = WTERMSIG(status);
  else run.exit_status = WEXITSTATUS(status);
  return run;
}

int serve_command_arm(const v1::RunContext& context, int input_fd, RecordWriter& writer,
                      const CommandSandbox& sandbox) {
  bool restricted = false;
  signal(SIGUSR1, report_status);
  {
    v1::WorkerRecord r;
    *r.mutable_context() = context;
    writer.write(r);
  }
  google::protobuf::io::FileInputStream input(input_fd);
  std::optional<v1::CommandArm> arm;
  std::string profile;
  while (true) {
    v1::WorkerRequest req;
    bool clean_eof = false;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&req, &input, &clean_eof)) {
      if (clean_eof) return 0;
      v1::WorkerRecord r;
      r.mutable_error()->set_kind(v1::WORKER_ERROR_KIND_INVALID_REQUEST);
      r.mutable_error()->set_message("malformed request on stdin");
      writer.write(r);
      return 2;
    }
    v1::WorkerRecord r;
    switch (req.request_case()) {
      case v1::WorkerRequest::kPrepare: {
        // Preparing a command arm is checking that its program and readers can work.
        v1::PrepareDone* done = r.mutable_prepared();
        profile = req.prepare().profile().name();
        done->set_profile(profile);
        done->set_path(v1::GEMM_PATH_COMMAND);
        const v1::CommandArm& asked = req.prepare().command();
        std::string bad = check_program({asked.argv().begin(), asked.argv().end()}, asked.workdir());
        if (bad.empty() && !asked.output_argv().empty())
          bad = check_program({asked.output_argv().begin(), asked.output_argv().end()}, asked.workdir());
        if (bad.empty()) bad = interop::check_reader(asked.tokens_per_s());
        if (bad.empty() && asked.output().format() != v1::OUTPUT_FORMAT_UNSPECIFIED)
          bad = interop::check_reader(asked.output());
        if (!bad.empty()) {
          done->set_outcome(v1::CASE_OUTCOME_INVALID_PROBLEM);
          done->set_message(bad);
          arm.reset();
        } else {
          done->set_outcome(v1::CASE_OUTCOME_PASSED);
          arm = asked;
        }
        if (arm && sandbox && !restricted) {
          try {
            std::cerr << "qgate-worker: command sandbox: " << sandbox(*arm) << "\n";
            restricted = true;
          } catch (const std::exception& e) {
            std::cerr << "qgate-worker: command sandbox: " << e.what() << "\n";
            writer.write(error_record(v1::WORKER_ERROR_KIND_DEVICE, std::string("sandbox: ") + e.what()));
            return 3;
          }
        }
        break;
      }
      case v1::WorkerRequest::kRun:
        if (!arm) {
          r.mutable_profile_run()->set_run_id(req.run().run_id());
          r.mutable_profile_run()->set_outcome(v1::CASE_OUTCOME_INVALID_PROBLEM);
          r.mutable_profile_run()->set_message("run before a successful prepare");
        } else {
          *r.mutable_profile_run() = timed_run(*arm, profile, req.run());
        }
        break;
      case v1::WorkerRequest::kShutdown:
        r.mutable_released();
        writer.write(r);
        return 0;
      default:
        r.mutable_error()->set_kind(v1::WORKER_ERROR_KIND_INVALID_REQUEST);
        r.mutable_error()->set_message("empty request");
        break;
    }
    writer.write(r);
  }
}

}  // namespace qgate::worker
