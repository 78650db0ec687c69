// A cgroup per worker (docs/security.md, "Bounds"): each worker and everything it starts run in a
// cgroup of their own, with a memory limit and a process-count limit, and the whole cgroup is killed
// when the worker is reaped, so nothing it started outlives it, whatever session it made.
//
// WorkerCgroups finds where qgated may make cgroups: under its own cgroup on the unified hierarchy
// (cgroup v2, with the memory and pids controllers delegated to it), or else under its own cgroups
// of the v1 memory and pids hierarchies. Where neither can be written, it says why and qgated runs
// workers without (the process group, the subreaper and rlimits still hold).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace qgate::server {

/// The limits of one worker's cgroup.
struct CgroupLimits {
  int64_t memory_bytes = 0;  // memory.max (v2) or memory.limit_in_bytes (v1); 0 = no limit
  int64_t pids = 0;          // pids.max; 0 = no limit
};

/// One worker's cgroup: made before the fork, joined by the child before it execs, killed and
/// removed when the object goes.
class WorkerCgroup {
 public:
  WorkerCgroup(std::vector<std::string> dirs, bool unified);
  ~WorkerCgroup();
  WorkerCgroup(const WorkerCgroup&) = delete;
  WorkerCgroup& operator=(const WorkerCgroup&) = delete;

  /// Called in the forked child (async-signal-safe): moves the calling process into the cgroup.
  /// False when a write failed.
  bool join_from_child() const;
  /// Kills every process in the cgroup and waits (up to 2 s) until it is empty.
  void kill_all();
  /// True when the kernel killed a process of this cgroup for its memory limit.
  bool memory_limit_killed() const;
  /// The processes in the cgroup now.
  std::vector<pid_t> processes() const;
  const std::vector<std::string>& dirs() const { return dirs_; }

 private:
  std::vector<std::string> dirs_;  // v2: one; v1: the memory and the pids cgroup
  std::vector<int> procs_fds_;     // each dir's cgroup.procs, opened for the child's write
  bool unified_;
};

class WorkerCgroups {
 public:
  /// Where workers' cgroups go, or nullptr with *why set when no hierarchy can be used.
  static std::unique_ptr<WorkerCgroups> find(std::string* why);

  /// A new cgroup named `name` with `limits`; throws std::runtime_error when it cannot be made.
  std::unique_ptr<WorkerCgroup> make(const std::string& name, const CgroupLimits& limits) const;
  /// "cgroup v2 at <dir>" or "cgroup v1 at <memory dir>, <pids dir>".
  std::string describe() const;
  /// Removes the workers' cgroups that a daemon no longer running left behind (a qgated killed with
  /// SIGKILL cannot remove its own): `worker-<pid>-<n>` whose pid is gone. Returns how many.
  int remove_left_behind() const;

 private:
  WorkerCgroups(std::vector<std::string> parents, bool unified)
      : parents_(std::move(parents)), unified_(unified) {}
  std::vector<std::string> parents_;  // v2: one; v1: the memory and the pids parent
  bool unified_;
};

}  // namespace qgate::server
