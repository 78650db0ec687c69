// qgated's options, grouped with their defaults beside them; printed into every job's context.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "qgate/jobs/job_policy.h"

namespace qgate::server {

// The backend, GPUs, queue bound, model folders and command switch are declared in jobs::JobPolicy,
// the part of these options the application layer reads.
struct DaemonOptions : jobs::JobPolicy {
  using ServedDevice = jobs::ServedDevice;

  std::string listen;                 // "unix:///path" or "host:port"; empty = <data dir>/qgated.sock
  std::string data_dir;               // empty = qgate::paths::default_data_dir()
  std::string db_path;                // empty = <data dir>/qgate.db
  // A PostgreSQL store (postgresql://..., docs/fleet.md) instead of the SQLite file db_path.
  std::string postgres_address;
  // How long this daemon's claim on a running job holds without a renewal: a job whose daemon died
  // goes back to the queue this long after (docs/fleet.md).
  int lease_s = 60;
  // The host this daemon answers for: its runs, claims and GPUs are recorded under it, and --host
  // filters read it (docs/fleet.md). Empty = the machine's hostname; in a container, give the
  // node's name so that a restarted container claims as the same host.
  std::string host_name;
  // Filled by the daemon at start: its id as a claimant of jobs (host and data dir, docs/fleet.md).
  std::string claimant_id;
  // Several GPUs (docs/two-gpus.md): --gpus 0,1 or all serves each with its own queue and sampler;
  // empty = just `gpu`. On the CPU backend each is a fake device: cpu_device_names gives their names
  // (one per entry, default "cpu") and cpu_slowdowns a simulated slowdown each (tests, default 1).
  std::vector<int> gpus;
  bool all_gpus = false;              // --gpus all: every GPU the workers can open
  std::vector<std::string> cpu_device_names;
  std::vector<double> cpu_slowdowns;
  std::string worker_binary;          // empty = qgate-worker beside qgated
  int cpu_threads = 0;                // CPU backend threads per worker, 0 = all
  int64_t max_upload_bytes = int64_t(512) << 20;
  // A job whose daemon died under it this many times is CRASHED and not run again (docs/security.md).
  int max_daemon_deaths = 2;
  // The workers' sandbox (qgate-worker --sandbox): auto (Landlock where the kernel has it), on, off.
  std::string worker_sandbox = "auto";
  // A cgroup per worker (worker_cgroups.h): auto (where one can be made), on (refuse to start
  // without), off; and its limits: memory (0 = half the host's memory) and processes.
  std::string worker_cgroup = "auto";
  int64_t worker_memory_max = 0;
  int64_t worker_pids_max = 4096;
  int max_streams = 256;              // concurrent WatchJob streams; more are refused (RESOURCE_EXHAUSTED)
  int max_uploads = 32;               // concurrent SubmitBuild uploads; more are refused likewise
  int64_t upload_timeout_s = 300;     // an upload not finished by then is ended (DEADLINE_EXCEEDED)
  int run_timeout_s = 300;            // one timed run (or the parity sweep's case) may take this long
  int prepare_timeout_s = 900;        // preparing a profile's weights
  int parity_timeout_s = 1800;        // the whole parity phase
  int64_t job_timeout_s = 4 * 3600;   // a whole job, unless its spec sets timeout_s
  bool fresh_process_default = false;
  // Security (see daemon.cpp): on TCP, submit and cancel need the token of auth_token_file; a
  // non-loopback address needs TLS and a token unless `insecure`.
  // Co-tenant sampling of every run: "auto" (NVML on CUDA, none on the CPU), "nvml", "none", or
  // "replay" of replay_samples_file (a JSON-lines trace, for tests and simulations).
  std::string sampler = "auto";
  std::string replay_samples_file;
  std::string record_samples_file;    // also write every reading to this trace
  // The quiet policy of quiet-window jobs (remeasure): no foreign process above this SM%, no
  // thermal or power slowdown, held this long. Defaults as in docs/measurement.md.
  double quiet_max_foreign_sm_percent = 5.0;
  double quiet_hold_s = 30.0;
  // The HTTP dashboard (docs/dashboard.md): off unless `http` names a host:port; served under the
  // same token, TLS and non-loopback rules as the gRPC TCP listener. Its page and chart libraries
  // come from http_root (empty = <qgated's dir>/../share/qgate/dashboard).
  std::string http;
  std::string http_root;
  std::string auth_token_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  bool insecure = false;
  // The log (daemon_log.h): stderr, and this file too unless empty.
  std::string log_level = "info";     // trace, debug, info, warn, error or off
  std::string log_file;
  std::string log_format = "text";    // text (kLogPattern) or json (one object a line; daemon_log.h)
};

}  // namespace qgate::server
