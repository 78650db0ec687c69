// ArmSession: one arm's worker, from prepare through timed runs to release.
#include "qgate/server/arm_session.h"

#include <filesystem>

#include "qgate/server/artifact_store.h"
#include "qgate/server/fault_classifier.h"
#include "qgate/v1/record_words.h"

namespace qgate::server {

ArmSession::ArmSession(ArmSpec spec, const ArmSettings& settings, WorkerLauncher& launcher,
                       const JobControl& control)
    : spec_(std::move(spec)), settings_(settings), launcher_(launcher), control_(control) {}

ArmSession::~ArmSession() {
  if (worker_) worker_->kill_group();
}

int ArmSession::pid() const { return worker_ ? worker_->pid() : 0; }

std::string ArmSession::log_path() const {
  if (settings_.log_dir.empty()) return "";
  std::filesystem::create_directories(settings_.log_dir);
  return (std::filesystem::path(settings_.log_dir) /
          ("job-" + std::to_string(settings_.job_id) + "-arm-" + (spec_.log_name.empty() ? spec_.name : spec_.log_name) +
           ".log"))
      .string();
}

void ArmSession::start() {
  WorkerLaunch launch;
  launch.binary = settings_.worker_binary;
  if (spec_.command) launch.args = {"command"};
  else launch.args = {"serve", "--build", spec_.build.artifact_path};
  // Every worker start: a baseline edited on disk since its upload must not run as itself.
  if (!spec_.command)
    if (const std::string why = stored_build_mismatch(spec_.build.artifact_path, spec_.build.sha256); !why.empty())
      throw JobFailure("arm " + spec_.name + ": " + why);
  for (const auto& a : settings_.common_args) launch.args.push_back(a);
  for (const auto& a : spec_.device_args) launch.args.push_back(a);
  launch.env = clean_worker_environment(spec_.env);
  launch.stderr_path = log_path();
  worker_ = launcher_.launch(launch);
  memory_.emplace_back();
  memory_.back().arm = spec_.name;
  const std::string who = "arm " + spec_.name;

  v1::WorkerRequest request;
  *request.mutable_prepare() = settings_.prepare;
  if (spec_.command) *request.mutable_prepare()->mutable_command() = *spec_.command;
  if (!worker_->send(request)) throw JobFailure(who + ": the worker closed its input at start");
  const auto deadline = JobControl::Clock::now() + std::chrono::seconds(settings_.prepare_timeout_s);
  while (true) {
    v1::WorkerRecord record;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - JobControl::Clock::now());
    const ReadEnd end = worker_->read(&record, control_.within(std::max(left, std::chrono::milliseconds(1))));
    if (end == ReadEnd::timeout) control_.overran(*worker_, who, "prepare", settings_.prepare_timeout_s);
    if (end != ReadEnd::record) {
      const WorkerExit exit = worker_->wait_exit(std::chrono::seconds(5));
      throw JobFailure(who + ": the worker ended (" + exit.text + ") while preparing: " + worker_->stderr_tail(400),
                       FaultClassifier::died(exit, "prepare"));
    }
    if (record.has_context()) context_ = record.context();
    if (record.has_error())
      throw JobFailure(who + ": " + std::string(words::word(record.error().kind())) + ": " + record.error().message(),
                       FaultClassifier::worker_error(record.error()));
    if (!record.has_prepared()) continue;
    const v1::PrepareDone& prepared = record.prepared();
    memory_.back().prepared = prepared;
    if (spec_.command && prepared.outcome() == v1::CASE_OUTCOME_INVALID_PROBLEM)
      throw JobFailure(who + " cannot run its command: " + prepared.message(),
                       Fault{v1::DISPOSITION_REJECTED, prepared.message()});
    if (prepared.outcome() != v1::CASE_OUTCOME_PASSED)
      throw JobFailure(who + " could not prepare " + settings_.prepare.profile().name() + ": " + prepared.message(),
                       FaultClassifier::failed("prepare failed", prepared.message(), prepared.cuda(), "prepare"));
    path_ = spec_.command ? spec_.label : std::string(words::word(prepared.path()));
    return;
  }
}

std::optional<v1::ProfileRun> ArmSession::run(int64_t run_id, RunFailure* failure) {
  v1::WorkerRequest request;
  *request.mutable_run() = settings_.run;
  request.mutable_run()->set_run_id(run_id);
  auto gone = [&](const std::string& phase, const std::string& why_prefix) {
    const WorkerExit exit = worker_->wait_exit(std::chrono::seconds(5));
    failure->fault = FaultClassifier::died(exit, phase);
    failure->why = why_prefix + " (" + exit.text + "): " + worker_->stderr_tail(300);
    worker_.reset();
    return std::nullopt;
  };
  if (!worker_->send(request)) return gone("a timed run", "the worker's input is closed");
  v1::WorkerRecord record;
  const ReadEnd end = worker_->read(&record, control_.within(std::chrono::seconds(settings_.run_timeout_s)));
  if (end == ReadEnd::timeout) {
    if (control_.time_up()) control_.overran(*worker_, "arm " + spec_.name, "run", settings_.run_timeout_s);
    const std::string call = kill_hung(*worker_);
    failure->fault = FaultClassifier::timed_out("run", settings_.run_timeout_s, call);
    failure->why = "TIMEOUT after " + std::to_string(settings_.run_timeout_s) + " s";
    worker_.reset();
    return std::nullopt;
  }
  if (end != ReadEnd::record) return gone("a timed run", "the worker ended");
  if (!record.has_profile_run()) {
    worker_->kill_group();
    worker_.reset();
    *failure = {"unexpected worker record", Fault{v1::DISPOSITION_ERROR, "unexpected worker record"}};
    return std::nullopt;
  }
  const v1::ProfileRun& result = record.profile_run();
  if (!memory_.empty()) memory_.back().runs.push_back(result.memory());
  if (result.outcome() != v1::CASE_OUTCOME_PASSED) {
    failure->why = result.message();
    failure->fault = FaultClassifier::failed("timed run failed", result.message(), result.cuda(), "a timed run");
    worker_->kill_group();
    worker_.reset();
    return std::nullopt;
  }
  return result;
}

void ArmSession::restart() {
  stop_worker();
  start();
}

void ArmSession::stop_worker() {
  if (!worker_) return;
  worker_->kill_group();
  worker_.reset();
}

void ArmSession::freeze(bool frozen) {
  if (worker_) worker_->freeze_group(frozen);
}

void ArmSession::shutdown() {
  if (!worker_) return;
  v1::WorkerRequest stop;
  stop.set_shutdown(true);
  if (worker_->send(stop)) {
    // The worker answers with what it holds after releasing everything, then exits.
    v1::WorkerRecord record;
    const auto deadline = JobControl::Clock::now() + std::chrono::seconds(10);
    while (JobControl::Clock::now() < deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - JobControl::Clock::now());
      if (worker_->read(&record, std::max(left, std::chrono::milliseconds(1))) != ReadEnd::record) break;
      if (record.has_released()) {
        if (!memory_.empty()) memory_.back().released = record.released();
        break;
      }
    }
  }
  worker_->wait_exit(std::chrono::seconds(10));
  worker_.reset();
}

}  // namespace qgate::server
