// `qgate-worker command`: the worker of a command-mode arm. It speaks the same protocol as
// `serve` (prepare, timed runs, shutdown), so qgated drives it through the same arm session; but a
// run starts the arm's program instead of timing GEMMs. The program runs in the job's working
// directory with this worker's environment (qgated's clean one plus the arm's variables), in this
// worker's process group (a kill of the group reaches it), its stderr into this worker's stderr
// (the arm's log). Its tok/s and its output are read from its stdout with the arm's readers.
//
// A program that dies of a signal takes this worker down with the same signal, and one that exits
// non-zero makes it exit with that status, so qgated classifies it as it classifies a crashed
// kernel worker (CRASHED, with the stderr tail). No figure in the output is an INCORRECT run.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "qgate/worker/record_writer.h"
#include "qgate/v1/worker.pb.h"

namespace qgate::worker {

/// What one run of a program left: its stdout (up to the limit), how it ended, and how long it took.
struct ProgramRun {
  std::string stdout_text;
  bool stdout_truncated = false;
  int exit_status = 0;   // valid when signal == 0
  int signal = 0;        // the signal that ended it, 0 when it exited
  double wall_ms = 0;
  std::string start_error;  // set when it could not be started (exec failed); nothing else is
};

/// Runs `argv` (argv[0] a path, or a name searched on PATH) in `workdir` with the caller's
/// environment and stderr, keeping up to `max_stdout` bytes of its stdout, and waits for it.
ProgramRun run_program(const std::vector<std::string>& argv, const std::string& workdir, size_t max_stdout);

/// "" when argv[0] names an executable file (directly, or found on PATH); otherwise why not.
std::string check_program(const std::vector<std::string>& argv, const std::string& workdir);

/// What a command arm's program may read besides the system trees (docs/security.md): the arm's
/// read_paths; each program's folder (libraries beside it); and every word of its commands, or the
/// part after `=`, that names an existing file or folder (relative words against the workdir).
/// A word that is, lies under, or holds one of the arm's protected_paths is left out.
std::vector<std::string> command_read_paths(const v1::CommandArm& arm);

/// Restricts this worker (and so every program it starts) for `arm`; returns what was applied.
using CommandSandbox = std::function<std::string(const v1::CommandArm& arm)>;

/// Serves one command arm: requests from `input_fd`, records to `writer`, until shutdown or end
/// of input. `context` is sent once, before the first answer. `sandbox`, when set, runs once, at
/// the first prepare that passes and before any program starts. Returns the process exit status.
int serve_command_arm(const v1::RunContext& context, int input_fd, RecordWriter& writer,
                      const CommandSandbox& sandbox = {});

}  // namespace qgate::worker
