// One side of an A/B: a build in an environment, and the qgate-worker serving it for the job.
// It prepares the profile's weights, answers timed runs, restarts its worker when asked, and keeps
// the worker's memory readings (after prepare, after each run, after release) for the leak check.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "qgate/db/records.h"
#include "qgate/server/job_control.h"
#include "qgate/server/job_failure.h"
#include "qgate/server/leak_check.h"
#include "qgate/server/worker_channel.h"
#include "qgate/v1/worker.pb.h"

namespace qgate::server {

/// Which build an arm runs, in which environment. A command arm (command set) runs a program
/// through `qgate-worker command` instead of serving the build's GEMMs; its runs' path is its label.
struct ArmSpec {
  std::string name;   // "A" or "B"
  std::string label;  // "mmq", "f16", "<build name>@<sha256 prefix>", or a command arm's "MINFER_MMQ=1"
  db::Build build;  // its artifact_path is this host's file of it (BuildFiles::local_path)
  std::map<std::string, std::string> env;  // e.g. MINFER_MMQ=1
  std::optional<v1::CommandArm> command;
  std::vector<std::string> device_args;  // how its worker opens its GPU (--device N, ...)
  std::string log_name;                  // its worker log's name; "" = name (a split arm has two workers)
};

/// What every arm of a job shares: how to start its worker and what to ask of it.
struct ArmSettings {
  std::string worker_binary;
  std::vector<std::string> common_args;  // --backend, --device, --threads, --seed (the build is added)
  std::string log_dir;                   // the worker's stderr goes to <log_dir>/job-<id>-arm-<name>.log
  db::RowId job_id = 0;
  v1::PrepareProfileRequest prepare;     // the profile, tokens and seed
  v1::RunProfileRequest run;             // warm-up, repetitions, cold L2, whole pass
  int64_t prepare_timeout_s = 900;
  int64_t run_timeout_s = 300;
};

/// A timed run that did not produce a result: why, for people, and what the build did.
struct RunFailure {
  std::string why;
  Fault fault;
};

class ArmSession {
 public:
  ArmSession(ArmSpec spec, const ArmSettings& settings, WorkerLauncher& launcher, const JobControl& control);
  ~ArmSession();

  const ArmSpec& spec() const { return spec_; }
  /// Starts a worker and prepares the profile. Throws JobFailure when the build cannot.
  void start();
  bool started() const { return worker_ != nullptr; }
  /// One timed run: the ProfileRun, or a RunFailure after which the worker is gone (restart()
  /// before the next run). Throws JobFailure only when the job's own time is up.
  std::optional<v1::ProfileRun> run(int64_t run_id, RunFailure* failure);
  /// Stops the current worker, if any, then start()s a new one.
  void restart();
  /// Asks the worker to release everything and exit, and keeps its last memory reading.
  void shutdown();
  /// Freezes the idle worker while the other arm is timed, and thaws it again (no-op when none).
  void freeze(bool frozen);

  int pid() const;
  const std::string& path() const { return path_; }  // "mmq" or "f16" as prepared; a command arm's label
  const v1::RunContext& context() const { return context_; }
  /// The memory readings of each worker process this arm started, oldest first.
  const std::vector<ArmMemory>& memory() const { return memory_; }

 private:
  std::string log_path() const;
  void stop_worker();

  ArmSpec spec_;
  const ArmSettings& settings_;
  WorkerLauncher& launcher_;
  const JobControl& control_;
  std::unique_ptr<WorkerChannel> worker_;
  std::string path_;
  v1::RunContext context_;
  std::vector<ArmMemory> memory_;
};

}  // namespace qgate::server
