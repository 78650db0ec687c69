// What a worker leaves behind when it dies. A build's process that starts its own session or
// process group (setsid) escapes the kill of the worker's group. qgated makes itself the subreaper
// of everything it starts (PR_SET_CHILD_SUBREAPER), so such a process becomes qgated's own child
// when its parent dies, and the OrphanReaper kills it when the worker it came from is reaped
// (docs/security.md, "Nothing outlives its job").
#pragma once

#include <sys/types.h>

#include <mutex>
#include <set>
#include <string>

namespace qgate::server {

class OrphanReaper {
 public:
  /// The process's one reaper: children are a per-process fact.
  static OrphanReaper& instance();

  /// Makes this process the subreaper of its descendants. Until this is called, reap_orphans()
  /// does nothing (a test process has children of its own). False, with why, when the kernel refuses.
  bool adopt(std::string* why);
  bool adopting() const;

  /// fork(), with the child recorded as one this process started, not an orphan. In the child it
  /// returns 0 and the child must exec or _exit.
  pid_t fork_recorded();
  /// The child was reaped: from now on a process with its pid is not one of ours.
  void forget(pid_t pid);

  /// Kills (SIGKILL) and reaps every child of this process that fork_recorded did not start,
  /// round by round, until none is left (an orphan's own children are adopted as it dies).
  /// Returns how many it ended.
  int reap_orphans();

 private:
  OrphanReaper() = default;
  mutable std::mutex mutex_;
  std::set<pid_t> ours_;
  bool adopting_ = false;
};

}  // namespace qgate::server
