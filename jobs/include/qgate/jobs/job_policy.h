// What the application layer needs of the daemon's configuration to accept and place a job: the
// backend, the GPUs served, the queue's bound, the model folders, and whether command jobs are
// allowed. qgated's DaemonOptions is a JobPolicy with the rest of its flags beside it, so each of
// these facts is declared once.
#pragma once

#include <string>
#include <vector>

namespace qgate::jobs {

/// One GPU qgated serves, as its worker described it.
struct ServedDevice {
  int ordinal = 0;
  std::string name;
  std::string uuid;
};

struct JobPolicy {
  std::string backend = "cuda";       // "cuda" or "cpu"
  int gpu = 0;                        // CUDA device ordinal
  // Filled by the daemon at start, not a flag: the GPUs it serves as their workers described them.
  std::vector<ServedDevice> served;
  int max_queued_jobs = 1000;
  // Folders whose model files a parity job may name (--models-dir, repeatable); none: no model files.
  std::vector<std::string> models_dirs;
  // Command jobs run programs the client names (docs/command-mode.md): refused unless this is set,
  // and then only from a client holding the token of auth_token_file, even on the unix socket.
  bool allow_commands = false;
  // The daemon's labels (--label, repeatable; docs/fleet.md): it claims only jobs whose labels are
  // all among them.
  std::vector<std::string> labels;
  // Filled by the daemon at start: the store is one a fleet of daemons shares (PostgreSQL), so a job
  // this daemon cannot run may still be accepted for another to claim.
  bool fleet = false;
};

}  // namespace qgate::jobs
