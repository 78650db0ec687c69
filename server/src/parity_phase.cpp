// ParityPhase: the candidate's parity sweep in one qgate-worker process, every case stored.
#include "qgate/server/parity_phase.h"

#include <signal.h>

#include "qgate/server/fault_classifier.h"
#include "qgate/server/leak_check.h"
#include "qgate/v1/record_words.h"
#include "qgate/v1/spec_words.h"

namespace qgate::server {

ParityPhase::ParityPhase(ParitySetup setup, WorkerLauncher& launcher, JobRecorder& recorder,
                         const JobControl& control)
    : setup_(std::move(setup)), launcher_(launcher), recorder_(recorder), control_(control) {}

std::vector<std::string> ParityPhase::worker_args() const {
  std::vector<std::string> args = {"parity"};
  for (const auto& a : setup_.common_args) args.push_back(a);
  for (const char* a : {"--types", "all", "--path", "both", "--format", "proto"}) args.push_back(a);
  // A model file's tensors are the sweep on their own unless a shape set was asked for too.
  if (setup_.gguf.empty() || setup_.shapes != v1::SHAPE_SET_UNSPECIFIED) {
    args.push_back("--shapes");
    args.push_back(std::string(words::spec_word(setup_.shapes)));  // UNSPECIFIED reads as standard
  }
  if (!setup_.gguf.empty()) {
    args.insert(args.end(), {"--gguf", setup_.gguf, "--tensors", setup_.tensors.empty() ? "blk.0.*" : setup_.tensors});
  }
  if (setup_.numerics != v1::NUMERICS_PROFILE_UNSPECIFIED) {
    args.push_back("--numerics");
    args.push_back(std::string(words::word(setup_.numerics)));
  }
  return args;
}

ParityOutcome ParityPhase::run(v1::JobProgress& progress) {
  progress.set_phase("parity");
  recorder_.publish(progress, "parity sweep started");
  if (auto out = sweep(progress, /*last_attempt=*/false)) return *out;
  // Killed by something other than qgated (the OOM killer, an operator): nothing the build did
  // says so, so the sweep runs again from its start, once.
  recorder_.publish(progress, "parity: the worker was killed from outside (SIGKILL); running the sweep again, once");
  return *sweep(progress, /*last_attempt=*/true);
}

std::optional<ParityOutcome> ParityPhase::sweep(v1::JobProgress& progress, bool last_attempt) {
  progress.set_parity_done(0);
  WorkerLaunch launch;
  launch.binary = setup_.worker_binary;
  launch.args = worker_args();
  launch.env = clean_worker_environment({});
  launch.stderr_path = setup_.log_path;
  std::unique_ptr<WorkerChannel> worker = launcher_.launch(launch);

  ParityOutcome out;
  std::vector<v1::ParityCase> cases;
  int32_t planned = -1;
  const auto deadline = JobControl::Clock::now() + std::chrono::seconds(setup_.phase_timeout_s);
  while (true) {
    control_.check();
    v1::WorkerRecord record;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - JobControl::Clock::now());
    const ReadEnd end = worker->read(
        &record, control_.within(std::min(left, std::chrono::milliseconds(1000) * setup_.case_timeout_s)));
    if (end == ReadEnd::timeout) {
      if (JobControl::Clock::now() >= deadline)
        control_.overran(*worker, "parity", "the parity phase", setup_.phase_timeout_s);
      control_.overran(*worker, "parity", "run", setup_.case_timeout_s);
    }
    if (end == ReadEnd::malformed) {
      worker->kill_group();
      throw JobFailure("the parity judge's output is not a record stream");
    }
    if (end != ReadEnd::record) {
      const WorkerExit exit = worker->wait_exit(std::chrono::seconds(5));
      control_.check();  // a cancel kills the worker too: no reason to run it again
      if (exit.signal == SIGKILL && !exit.memory_limit && !last_attempt) return std::nullopt;
      throw JobFailure("the parity worker ended (" + exit.text + ") before finishing: " + worker->stderr_tail(400),
                       FaultClassifier::died(exit, "the parity sweep"));
    }
    if (record.has_error())
      throw JobFailure("parity worker: " + std::string(words::word(record.error().kind())) + ": " +
                           record.error().message(),
                       FaultClassifier::worker_error(record.error()));
    if (record.has_summary()) {
      // The judge announces its plan and reports every planned case: anything else is not a sweep.
      if (planned < 0 || int32_t(cases.size()) != planned) {
        worker->kill_group();
        throw JobFailure("the parity worker reported " + std::to_string(cases.size()) + " cases of a plan of " +
                         std::to_string(planned) + " (no verdict is taken from an incomplete sweep)");
      }
      out.leak = judge_parity_memory(record.summary());
      break;
    }
    if (record.has_plan()) {
      planned = record.plan().cases();
      progress.set_parity_total(record.plan().cases());
      recorder_.publish(progress, "parity: " + std::to_string(record.plan().cases()) + " cases, MMQ judged in " +
                                      std::string(words::word(record.plan().numerics())) +
                                      " numerics (" + record.plan().numerics_source() + ")");
    }
    if (!record.has_parity()) continue;
    const v1::ParityCase& p = record.parity();
    cases.push_back(p);
    const bool ok = p.outcome() == v1::CASE_OUTCOME_PASSED || p.outcome() == v1::CASE_OUTCOME_NOT_SUPPORTED;
    if (ok) out.passed += p.outcome() == v1::CASE_OUTCOME_PASSED;
    else ++out.failed;
    progress.set_parity_done(int32_t(cases.size()));
    const std::string case_name =
        p.type() + " " + std::string(words::word(p.path())) + " " + std::to_string(p.shape().nt()) + "x" +
        std::to_string(p.shape().od()) + "x" + std::to_string(p.shape().k()) +
        (p.activation() == v1::ACTIVATION_KIND_RANDOM || p.activation() == v1::ACTIVATION_KIND_UNSPECIFIED
             ? std::string()
             : " (" + std::string(words::word(p.activation())) + " rows)");
    if (!ok && out.first_failure.empty()) out.first_failure = case_name + ": " + p.message();
    if (FaultClassifier::context_lost(p.cuda())) {
      // Every later case would fail the same way: the build's kernel took the context down.
      recorder_.add_parity_cases(setup_.build_id, cases);
      worker->kill_group();
      throw JobFailure("parity " + case_name + ": " + p.message(),
                       FaultClassifier::failed("parity", p.message(), p.cuda(), "parity"));
    }
    if (!ok) recorder_.publish(progress, "parity FAILED: " + case_name + ": " + p.message());
    else if (cases.size() % 8 == 0) recorder_.publish(progress);
  }
  worker->wait_exit(std::chrono::seconds(10));
  recorder_.add_parity_cases(setup_.build_id, cases);
  recorder_.publish(progress, "parity: " + std::to_string(out.passed) + " passed, " + std::to_string(out.failed) +
                                  " failed");
  return out;
}

}  // namespace qgate::server
