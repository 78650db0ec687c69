// The worker's sandbox (docs/security.md): after it opens the device and before it loads a build,
// the worker restricts itself, and so the build and anything it starts, with Landlock. Files: read
// and execute under the system trees, the qgate installation the worker runs from and the build
// itself; read and write on /dev (GPU nodes) and on a private scratch folder that becomes TMPDIR;
// nothing else, so the daemon's data folder (its database, uploads, logs) and a token file outside
// those trees cannot be opened.
// Network: no TCP bind or connect. Signals: none to processes outside the sandbox (the daemon, the
// other arm). What the kernel's Landlock version does not know is left open, and said.
#pragma once

#include <string>
#include <vector>

namespace qgate::worker {

enum class SandboxMode { automatic, on, off };

/// "auto", "on" or "off".
bool parse_sandbox_mode(const std::string& text, SandboxMode* out);

struct SandboxPlan {
  std::vector<std::string> read_paths;   // files or folders: read and execute
  std::vector<std::string> write_paths;  // folders that exist: read, write and execute
  std::string scratch_dir;               // created before, read and write
};

/// The plan for a worker that runs `build_path` (and reads `extra_reads`, e.g. a model file).
SandboxPlan sandbox_plan(const std::string& build_path, const std::vector<std::string>& extra_reads);

/// Applies the plan to this process and every process it starts from now on. Returns what was
/// applied ("landlock abi 7: files, tcp, signals"); with `automatic`, a kernel without Landlock
/// gives "off: <why>" and nothing is restricted; with `on`, that throws std::runtime_error.
std::string apply_sandbox(SandboxMode mode, const SandboxPlan& plan);

/// A scratch folder of this worker's own (mkdtemp under the system's temporary folder). Its contents
/// go with the object; the folder itself goes when the worker process ends, removed by a janitor
/// process started outside the sandbox. Make it before apply_sandbox, while the worker has no threads.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int janitor_pipe_ = -1;  // held open for the life of this process; its end lets the janitor clean up
};

}  // namespace qgate::worker
