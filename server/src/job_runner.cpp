// The parity phase and the interleaved A/B of one job. Worker processes are started with each
// arm's environment and kept for the job; a worker that dies is restarted and its run retried once.
// Every job that ends gets a disposition (OK, CRASHED, TIMEOUT, INCORRECT, REJECTED, ERROR) saying
// what its build did, with a detail such as "SIGSEGV in gemm_prepare".
#include "qgate/server/job_runner.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "qgate/cotenant/periodic_sampling.h"
#include "qgate/db/store_error.h"
#include "qgate/cotenant/summary.h"
#include "qgate/profiles/model_profile.h"
#include "qgate/server/job_records.h"
#include "qgate/server/worker_process.h"
#include "qgate/stats/ab_statistics.h"
#include "qgate/stats/sequential.h"

namespace qgate::server {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kDefaultSeed = 20260831;
constexpr int kDefaultRepetitions = 5;

/// A failure that ends the job; the message is what the user reads, the disposition and its
/// detail what the build did (DISPOSITION_ERROR: nothing, qgate itself failed).
struct JobFailure : std::runtime_error {
  explicit JobFailure(const std::string& message, v1::Disposition d = v1::DISPOSITION_ERROR, std::string why = "")
      : std::runtime_error(message), disposition(d), detail(why.empty() ? message : std::move(why)) {}
  v1::Disposition disposition;
  std::string detail;
};
struct JobCancelled : std::runtime_error {
  JobCancelled() : std::runtime_error("cancelled") {}
};
struct DaemonStopping : std::runtime_error {
  DaemonStopping() : std::runtime_error("daemon stopping") {}
};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string outcome_text(v1::CaseOutcome o) {
  switch (o) {
    case v1::CASE_OUTCOME_PASSED: return "passed";
    case v1::CASE_OUTCOME_INCORRECT: return "incorrect";
    case v1::CASE_OUTCOME_ERROR: return "error";
    case v1::CASE_OUTCOME_NOT_SUPPORTED: return "not_supported";
    case v1::CASE_OUTCOME_INVALID_PROBLEM: return "invalid_problem";
    default: return "unspecified";
  }
}

std::string path_text(v1::GemmPath p) {
  switch (p) {
    case v1::GEMM_PATH_MMQ: return "mmq";
    case v1::GEMM_PATH_F16: return "f16";
    case v1::GEMM_PATH_CUBLASLT_F16: return "cublaslt";
    default: return "unknown";
  }
}

std::string numerics_text(v1::NumericsProfile n) { return n == v1::NUMERICS_PROFILE_GGML ? "ggml" : "qgate"; }

std::string activation_text(v1::ActivationKind a) {
  switch (a) {
    case v1::ACTIVATION_KIND_ZERO: return "zero";
    case v1::ACTIVATION_KIND_OUTLIER: return "outlier";
    case v1::ACTIVATION_KIND_TINY: return "tiny";
    case v1::ACTIVATION_KIND_TIES: return "ties";
    case v1::ACTIVATION_KIND_LARGE: return "large";
    default: return "random";
  }
}

v1::Comparison to_proto(stats::Comparison c) {
  switch (c) {
    case stats::Comparison::same: return v1::COMPARISON_SAME;
    case stats::Comparison::different: return v1::COMPARISON_DIFFERENT;
    default: return v1::COMPARISON_UNKNOWN;
  }
}

v1::Verdict to_proto(stats::Verdict v) {
  switch (v) {
    case stats::Verdict::pass: return v1::VERDICT_PASS;
    case stats::Verdict::fail: return v1::VERDICT_FAIL;
    default: return v1::VERDICT_INCONCLUSIVE;
  }
}

// ---- dispositions: what a build did when it did not run to a verdict ----
struct Fault {
  v1::Disposition disposition = v1::DISPOSITION_ERROR;
  std::string detail;
};

std::string call_name(const std::string& abi_call) {  // "qgate_gemm_run" -> "gemm_run"
  return abi_call.rfind("qgate_", 0) == 0 ? abi_call.substr(6) : abi_call;
}

/// A worker that ended before finishing: CRASHED, with its signal and the build call it died in
/// (its stderr names it), else the phase qgated had it in.
Fault worker_death(WorkerProcess& worker, const std::string& phase) {
  const std::string exit = worker.wait_exit(std::chrono::seconds(5));
  const std::string call = call_name(fatal_signal_call(worker.stderr_tail(4000)));
  if (worker.term_signal() == 0) return {v1::DISPOSITION_CRASHED, "the worker exited (" + exit + ") during " + phase};
  return {v1::DISPOSITION_CRASHED, signal_name(worker.term_signal()) + (call.empty() ? " during " + phase : " in " + call)};
}

/// A worker's fatal error record: a build it could not load is REJECTED, anything else is qgate's.
Fault worker_error(const v1::WorkerError& e) {
  static const std::map<std::string, std::string> refused = {{"not_elf", "not an ELF shared object"},
                                                             {"dlopen_failed", "cannot be loaded"},
                                                             {"missing_symbol", "missing ABI symbols"},
                                                             {"abi_mismatch", "wrong ABI version"}};
  if (auto it = refused.find(e.kind()); it != refused.end())
    return {v1::DISPOSITION_REJECTED, it->second + ": " + e.message()};
  return {v1::DISPOSITION_ERROR, e.kind() + ": " + e.message()};
}

/// The CUDA error in a worker's message after which the context is unusable (a kernel of the
/// build faulted); "" when there is none.
std::string lost_cuda_context(const std::string& message) {
  for (const char* error : {"cudaErrorIllegalAddress", "cudaErrorLaunchFailure", "cudaErrorMisalignedAddress",
                            "cudaErrorIllegalInstruction", "cudaErrorHardwareStackError",
                            "cudaErrorInvalidAddressSpace", "cudaErrorInvalidPc", "cudaErrorAssert",
                            "cudaErrorLaunchTimeout"})
    if (message.find(error) != std::string::npos) return error;
  return "";
}

/// CRASHED for a lost CUDA context; the worker tags the message with the build call the error
/// followed ("[last build call: qgate_gemm_run]"), else `phase` says where it was.
Fault lost_context_fault(const std::string& message, const std::string& error, const std::string& phase) {
  const std::string tag = "[last build call: ";
  std::string call;
  if (const size_t at = message.find(tag); at != std::string::npos) {
    const size_t end = message.find(']', at);
    call = call_name(message.substr(at + tag.size(), end == std::string::npos ? std::string::npos : end - at - tag.size()));
  }
  return {v1::DISPOSITION_CRASHED, error + " in " + (call.empty() ? phase : call) + " (the CUDA context is lost)"};
}

/// Asks an overrunning worker which build call it is stuck in, then kills its whole process group.
std::string kill_hung(WorkerProcess& worker) {
  const std::string call = call_name(worker.where_is_it(std::chrono::milliseconds(500)));
  worker.kill_group();
  return call;
}

/// One side of the A/B: which build, in which environment, and its worker process.
struct Arm {
  std::string name;  // "A" or "B"
  std::string label;
  db::Build build;
  std::map<std::string, std::string> env;
  std::string path;  // "mmq" or "f16", as the arm's environment selects
  std::unique_ptr<WorkerProcess> worker;
  v1::RunContext context;
  std::vector<double> tokens_per_s;
};

class JobExecution {
 public:
  JobExecution(db::Store& store, EventHub& events, const DaemonOptions& options, cotenant::Sampler& sampler,
               const db::Job& job, const std::atomic<int>& cancelled)
      : store_(store), events_(events), options_(options), sampler_(sampler), job_(job), cancelled_(cancelled) {
    spec_ = spec_from_json(job.spec_json);
    job_limit_s_ = spec_.timeout_s() > 0 ? spec_.timeout_s() : options_.job_timeout_s;
    job_deadline_ = Clock::now() + std::chrono::seconds(job_limit_s_);
  }

  void run() {
    auto build = store_.find_build(job_.build_id);
    if (!build) throw JobFailure("the job's build " + std::to_string(job_.build_id) + " is not in the store");
    candidate_ = *build;
    if (!std::filesystem::exists(candidate_.artifact_path))
      throw JobFailure("the build's file is missing: " + candidate_.artifact_path);
    report_.set_backend(options_.backend);
    // A gate with parity_shapes "none" and no model file skips the parity phase (the service
    // refuses a parity job that would have nothing to run).
    const bool parity_phase = spec_.parity_shapes() != "none" || !spec_.parity_gguf().empty();
    if ((spec_.kind() == v1::JOB_KIND_GATE || spec_.kind() == v1::JOB_KIND_PARITY) && parity_phase) run_parity();
    if (spec_.kind() == v1::JOB_KIND_PARITY) {
      finish_parity_only();
      return;
    }
    if (spec_.kind() == v1::JOB_KIND_GATE && report_.parity_failed() > 0) {
      report_.set_verdict(v1::VERDICT_FAIL);
      report_.add_reasons(std::to_string(report_.parity_failed()) + " parity case(s) failed; the A/B was not run");
      finish();
      return;
    }
    run_ab();
    finish();
  }

 private:
  std::vector<std::string> worker_common_args(const std::string& build_path) const {
    return {"--build", build_path, "--backend", options_.backend, "--device", std::to_string(options_.gpu),
            "--threads", std::to_string(options_.cpu_threads), "--seed",
            std::to_string(spec_.seed() ? spec_.seed() : kDefaultSeed)};
  }

  std::string log_path(const std::string& what) const {
    std::filesystem::path dir = std::filesystem::path(options_.data_dir) / "logs";
    std::filesystem::create_directories(dir);
    return (dir / ("job-" + std::to_string(job_.id) + "-" + what + ".log")).string();
  }

  void check_cancelled() const {
    const int stop = cancelled_.load();
    if (stop == JobRunner::kCancel) throw JobCancelled();
    if (stop == JobRunner::kShutdown) throw DaemonStopping();
    if (job_time_up()) {
      const std::string detail = "job exceeded " + std::to_string(job_limit_s_) + " s";
      throw JobFailure("TIMEOUT: " + detail, v1::DISPOSITION_TIMEOUT, detail);
    }
  }

  // ---- time limits: a run's, the phase's, and the whole job's (spec timeout_s, else --job-timeout) ----
  bool job_time_up() const { return Clock::now() >= job_deadline_; }

  /// `limit`, cut to what is left of the job's own time limit.
  std::chrono::milliseconds within_job(std::chrono::milliseconds limit) const {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(job_deadline_ - Clock::now());
    return std::max(std::chrono::milliseconds(1), std::min(limit, left));
  }

  /// Ends the job TIMEOUT: `worker` overran `what`'s limit of `limit_s` (or the job its own), so
  /// its whole process group is killed.
  [[noreturn]] void overran(WorkerProcess& worker, const std::string& who, const std::string& what, int64_t limit_s) {
    const std::string call = kill_hung(worker);
    std::string detail = job_time_up() ? "job exceeded " + std::to_string(job_limit_s_) + " s"
                                       : what + " exceeded " + std::to_string(limit_s) + " s";
    if (!call.empty()) detail += " in " + call;
    throw JobFailure("TIMEOUT: " + who + ": " + detail + "; its worker's process group was killed",
                     v1::DISPOSITION_TIMEOUT, detail);
  }

  void publish(const std::string& message = "") {
    v1::JobEvent e;
    e.set_job_id(job_.id);
    e.set_unix_ms(now_ms());
    e.set_state(v1::JOB_STATE_RUNNING);
    *e.mutable_progress() = progress_;
    e.set_message(message);
    store_.update_job_progress(job_.id, progress_json(progress_, nullptr));
    events_.publish(e);
  }

  // ---- parity ----
  void run_parity() {
    progress_.set_phase("parity");
    const std::string shapes = spec_.parity_shapes().empty() ? "standard" : spec_.parity_shapes();
    publish("parity sweep started");
    WorkerLaunch launch;
    launch.binary = options_.worker_binary;
    launch.args = {"parity"};
    for (auto& a : worker_common_args(candidate_.artifact_path)) launch.args.push_back(a);
    for (const char* a : {"--types", "all", "--path", "both", "--format", "proto"}) launch.args.push_back(a);
    // A model file's tensors are the sweep on their own unless a shape set was asked for too.
    if (spec_.parity_gguf().empty() || !spec_.parity_shapes().empty()) {
      launch.args.push_back("--shapes");
      launch.args.push_back(shapes);
    }
    if (!spec_.parity_gguf().empty()) {
      for (const std::string& a : {std::string("--gguf"), spec_.parity_gguf(), std::string("--tensors"),
                                   spec_.parity_tensors().empty() ? std::string("blk.0.*") : spec_.parity_tensors()})
        launch.args.push_back(a);
    }
    if (spec_.numerics() != v1::NUMERICS_PROFILE_UNSPECIFIED) {
      launch.args.push_back("--numerics");
      launch.args.push_back(spec_.numerics() == v1::NUMERICS_PROFILE_GGML ? "ggml" : "qgate");
    }
    launch.env = clean_worker_environment({});
    launch.stderr_path = log_path("parity");
    WorkerProcess worker(launch);
    std::vector<db::ParityCaseRecord> cases;
    bool summary = false;
    const auto deadline = Clock::now() + std::chrono::seconds(options_.parity_timeout_s);
    while (!summary) {
      check_cancelled();
      v1::WorkerRecord rec;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      const ReadEnd end =
          worker.read(&rec, within_job(std::min(left, std::chrono::milliseconds(1000) * options_.run_timeout_s)));
      if (end == ReadEnd::timeout) {
        if (Clock::now() >= deadline) overran(worker, "parity", "the parity phase", options_.parity_timeout_s);
        overran(worker, "parity", "run", options_.run_timeout_s);
      }
      if (end == ReadEnd::malformed) {
        worker.kill_group();
        throw JobFailure("the parity worker's output is not a record stream (does the build write to stdout?)");
      }
      if (end != ReadEnd::record) {
        const Fault f = worker_death(worker, "the parity sweep");
        throw JobFailure("the parity worker ended (" + worker.wait_exit(std::chrono::seconds(5)) +
                             ") before finishing: " + worker.stderr_tail(400),
                         f.disposition, f.detail);
      }
      if (rec.has_error()) {
        const Fault f = worker_error(rec.error());
        throw JobFailure("parity worker: " + rec.error().kind() + ": " + rec.error().message(), f.disposition, f.detail);
      }
      if (rec.has_summary()) summary = true;
      if (rec.has_plan()) {
        progress_.set_parity_total(rec.plan().cases());
        publish("parity: " + std::to_string(rec.plan().cases()) + " cases, MMQ judged in " +
                numerics_text(rec.plan().numerics()) + " numerics (" + rec.plan().numerics_source() + ")");
      }
      if (!rec.has_parity()) continue;
      const auto& p = rec.parity();
      db::ParityCaseRecord c;
      c.job_id = job_.id;
      c.build_id = candidate_.id;
      c.path = path_text(p.path());
      c.weight_type = p.type();
      c.nt = p.shape().nt();
      c.od = p.shape().od();
      c.k = p.shape().k();
      c.seed = p.seed();
      c.outcome = outcome_text(p.outcome());
      c.reference = p.reference();
      c.tolerance = p.tolerance();
      c.max_abs_diff = p.max_abs_diff();
      c.nmse = p.nmse();
      c.nan_count = p.nan_count();
      c.inf_count = p.inf_count();
      c.unwritten_count = p.unwritten_count();
      c.message = p.message();
      c.numerics = numerics_text(p.numerics());
      c.activation = activation_text(p.activation());
      c.atol = p.atol();
      c.rtol = p.rtol();
      c.worst_tolerance_fraction = p.worst_tolerance_fraction();
      c.max_rel_diff = p.max_rel_diff();
      c.exact_nmse = p.exact_nmse();
      c.exact_nmse_limit = p.exact_nmse_limit();
      c.weights_source = p.weights_source();
      cases.push_back(c);
      const bool ok = p.outcome() == v1::CASE_OUTCOME_PASSED || p.outcome() == v1::CASE_OUTCOME_NOT_SUPPORTED;
      if (ok) report_.set_parity_passed(report_.parity_passed() + (p.outcome() == v1::CASE_OUTCOME_PASSED));
      else report_.set_parity_failed(report_.parity_failed() + 1);
      progress_.set_parity_done(int32_t(cases.size()));
      const std::string case_name = p.type() + " " + c.path + " " + std::to_string(c.nt) + "x" + std::to_string(c.od) +
                                    "x" + std::to_string(c.k) +
                                    (c.activation == "random" ? std::string() : " (" + c.activation + " rows)");
      if (!ok && first_parity_failure_.empty()) first_parity_failure_ = case_name + ": " + p.message();
      if (const std::string lost = lost_cuda_context(p.message()); !lost.empty()) {
        // Every later case would fail the same way: the build's kernel took the context down.
        store_.add_parity_cases(cases);
        worker.kill_group();
        const Fault f = lost_context_fault(p.message(), lost, "parity");
        throw JobFailure("parity " + case_name + ": " + p.message(), f.disposition, f.detail);
      }
      if (!ok) publish("parity FAILED: " + case_name + ": " + p.message());
      else if (cases.size() % 8 == 0) publish();
    }
    worker.wait_exit(std::chrono::seconds(10));
    store_.add_parity_cases(cases);
    publish("parity: " + std::to_string(report_.parity_passed()) + " passed, " +
            std::to_string(report_.parity_failed()) + " failed");
  }

  void finish_parity_only() {
    const bool ok = report_.parity_failed() == 0 && report_.parity_passed() > 0;
    report_.set_verdict(ok ? v1::VERDICT_PASS : v1::VERDICT_FAIL);
    report_.add_reasons(ok ? "all " + std::to_string(report_.parity_passed()) + " parity cases passed"
                           : std::to_string(report_.parity_failed()) + " parity case(s) failed");
    finish();
  }

  // ---- A/B ----
  void start_worker(Arm& arm) {
    WorkerLaunch launch;
    launch.binary = options_.worker_binary;
    launch.args = {"serve"};
    for (auto& a : worker_common_args(arm.build.artifact_path)) launch.args.push_back(a);
    launch.env = clean_worker_environment(arm.env);
    launch.stderr_path = log_path("arm-" + arm.name);
    arm.worker = std::make_unique<WorkerProcess>(launch);
    own_worker_pids_.insert(int(arm.worker->pid()));
    v1::WorkerRequest req;
    auto* prep = req.mutable_prepare();
    prep->set_tokens(tokens_);
    prep->set_seed(spec_.seed() ? spec_.seed() : kDefaultSeed);
    *prep->mutable_profile() = profile_message_;
    if (!arm.worker->send(req)) throw JobFailure("arm " + arm.name + ": the worker closed its input at start");
    const auto deadline = Clock::now() + std::chrono::seconds(options_.prepare_timeout_s);
    while (true) {
      v1::WorkerRecord rec;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      const ReadEnd end = arm.worker->read(&rec, within_job(std::max(left, std::chrono::milliseconds(1))));
      if (end == ReadEnd::timeout) overran(*arm.worker, "arm " + arm.name, "prepare", options_.prepare_timeout_s);
      if (end != ReadEnd::record) {
        const Fault f = worker_death(*arm.worker, "prepare");
        throw JobFailure("arm " + arm.name + ": the worker ended (" + arm.worker->wait_exit(std::chrono::seconds(5)) +
                             ") while preparing: " + arm.worker->stderr_tail(400),
                         f.disposition, f.detail);
      }
      if (rec.has_context()) arm.context = rec.context();
      if (rec.has_error()) {
        const Fault f = worker_error(rec.error());
        throw JobFailure("arm " + arm.name + ": " + rec.error().kind() + ": " + rec.error().message(), f.disposition,
                         f.detail);
      }
      if (rec.has_prepared()) {
        if (rec.prepared().outcome() != v1::CASE_OUTCOME_PASSED) {
          const std::string& message = rec.prepared().message();
          const std::string lost = lost_cuda_context(message);
          const Fault f = lost.empty() ? Fault{v1::DISPOSITION_INCORRECT, "prepare failed: " + message}
                                       : lost_context_fault(message, lost, "prepare");
          throw JobFailure("arm " + arm.name + " could not prepare " + profile_.name + ": " + message, f.disposition,
                           f.detail);
        }
        arm.path = path_text(rec.prepared().path());
        return;
      }
    }
  }

  /// One timed run; returns nullopt when the worker failed (the caller restarts and retries), with
  /// what went wrong in `why` and what the build did in `fault`.
  std::optional<v1::ProfileRun> try_run(Arm& arm, int64_t run_id, std::string* why, Fault* fault) {
    v1::WorkerRequest req;
    auto* r = req.mutable_run();
    r->set_warmup(1);
    r->set_repetitions(spec_.repetitions() > 0 ? spec_.repetitions() : kDefaultRepetitions);
    r->set_cold(true);
    r->set_whole_pass(spec_.timing() == "pass");
    r->set_run_id(run_id);
    if (!arm.worker->send(req)) {
      *fault = worker_death(*arm.worker, "a timed run");
      *why = "the worker's input is closed (" + arm.worker->wait_exit(std::chrono::seconds(2)) + ")";
      return std::nullopt;
    }
    v1::WorkerRecord rec;
    const ReadEnd end = arm.worker->read(&rec, within_job(std::chrono::seconds(options_.run_timeout_s)));
    if (end == ReadEnd::timeout) {
      if (job_time_up()) overran(*arm.worker, "arm " + arm.name, "run", options_.run_timeout_s);
      const std::string call = kill_hung(*arm.worker);
      *fault = {v1::DISPOSITION_TIMEOUT,
                "run exceeded " + std::to_string(options_.run_timeout_s) + " s" + (call.empty() ? "" : " in " + call)};
      *why = "TIMEOUT after " + std::to_string(options_.run_timeout_s) + " s";
      return std::nullopt;
    }
    if (end != ReadEnd::record) {
      *fault = worker_death(*arm.worker, "a timed run");
      *why = "the worker ended (" + arm.worker->wait_exit(std::chrono::seconds(5)) + "): " + arm.worker->stderr_tail(300);
      return std::nullopt;
    }
    if (!rec.has_profile_run()) {
      *fault = {v1::DISPOSITION_ERROR, "unexpected worker record"};
      *why = "unexpected worker record";
      return std::nullopt;
    }
    if (rec.profile_run().outcome() != v1::CASE_OUTCOME_PASSED) {
      *why = rec.profile_run().message();
      const std::string lost = lost_cuda_context(*why);
      *fault = lost.empty() ? Fault{v1::DISPOSITION_INCORRECT, "timed run failed: " + *why}
                            : lost_context_fault(*why, lost, "a timed run");
      arm.worker->kill_group();
      return std::nullopt;
    }
    return rec.profile_run();
  }

  v1::ProfileRun timed_run(Arm& arm, int pair_index, int seq) {
    check_cancelled();
    if (spec_.fresh_process() || !arm.worker) start_worker(arm);
    db::Run run;
    run.job_id = job_.id;
    run.build_id = arm.build.id;
    run.arm = arm.name;
    run.path = arm.path;
    run.pair_index = pair_index;
    run.seq = seq;
    run.host = arm.context.host();
    run.gpu_name = arm.context.device_name();
    run.gpu_uuid = arm.context.device_uuid();
    run.driver_version = arm.context.driver_version();
    run.cuda_version = arm.context.cuda_runtime_version();
    run.backend = options_.backend;
    run.qgate_version = arm.context.qgate_version();
    run.profile = profile_.name;
    run.tokens = tokens_;
    nlohmann::json opts = {{"repetitions", spec_.repetitions() > 0 ? spec_.repetitions() : kDefaultRepetitions},
                           {"fresh_process", spec_.fresh_process()}, {"cold_l2", true}, {"worker_pid", arm.worker->pid()}};
    run.options_json = opts.dump();
    const db::RowId run_id = store_.add_run(run);
    std::string why;
    Fault fault;
    std::vector<cotenant::Sample> samples_read;
    // The sampler reads the GPU while the run's worker works. The job's own workers are not
    // foreign: the other arm's worker is idle during this run, but NVML's per-process samples
    // look back a few hundred ms and would carry its previous run into this one.
    auto sampled_run = [&](std::string* failure, Fault* what) {
      cotenant::PeriodicSampling sampling(sampler_);
      std::set<int> own = own_worker_pids_;
      own.insert(int(arm.worker->pid()));
      sampling.start(own);
      auto r = try_run(arm, run_id, failure, what);
      samples_read = sampling.stop();
      return r;
    };
    auto result = sampled_run(&why, &fault);
    if (!result) {
      // One restart and one retry; a second failure ends the job with both reasons.
      publish("arm " + arm.name + ": run failed (" + why + "); restarting its worker and retrying once");
      start_worker(arm);
      std::string why2;
      Fault fault2;
      result = sampled_run(&why2, &fault2);
      if (!result) {
        store_.finish_run(run_id, db::RunResult{db::RunState::Failed, 0, tokens_, std::nullopt, std::nullopt, std::nullopt}, {});
        throw JobFailure("arm " + arm.name + " failed twice: " + why + "; then: " + why2, fault2.disposition,
                         fault2.detail);
      }
      recovered_.push_back("arm " + arm.name + ": worker restarted once after " + fault.detail);
    }
    std::vector<db::Sample> samples = {{"tokens_per_s", "tok/s", result->tokens_per_s()},
                                       {"gemm_ms", "ms", result->gemm_ms()}};
    for (const auto& g : result->gemms())
      samples.push_back({"gemm_us:" + g.gemm().type() + ":" + std::to_string(g.gemm().od()) + "x" +
                             std::to_string(g.gemm().k()) + ":" + g.gemm().role(),
                         "us", g.median_us()});
    db::RunResult done;
    done.state = db::RunState::Done;
    done.tokens = tokens_;
    done.tokens_per_s = result->tokens_per_s();
    done.gemm_ms = result->gemm_ms();
    store_.finish_run(run_id, done, samples);
    last_contended_ = record_cotenant(run_id, samples_read, sampler_.available() ? "" : sampler_.unavailable_reason());
    arm.tokens_per_s.push_back(result->tokens_per_s());
    return *result;
  }

  /// Stores the run's co-tenant summary and readings; returns its contended flag (none = unknown).
  std::optional<bool> record_cotenant(db::RowId run_id, const std::vector<cotenant::Sample>& samples,
                                      const std::string& unavailable) {
    cotenant::QuietPolicy policy;
    policy.max_foreign_sm_percent = options_.quiet_max_foreign_sm_percent;
    const cotenant::RunCotenant c = cotenant::summarize(samples, policy, cotenant::kDefaultSamplePeriodMs);
    db::CotenantSummary row;
    row.run_id = run_id;
    row.available = c.available;
    row.sample_period_ms = c.sample_period_ms;
    row.max_foreign_sm = c.max_foreign_sm;
    row.mean_foreign_sm = c.mean_foreign_sm;
    row.device_util_mean = c.device_util_mean;
    row.top_processes = c.top_processes;
    row.throttle_reasons = c.available ? c.throttle_reasons : "cotenant=unavailable: " + unavailable;
    row.min_sm_clock_mhz = c.min_sm_clock_mhz;
    row.median_sm_clock_mhz = c.median_sm_clock_mhz;
    row.max_sm_clock_mhz = c.max_sm_clock_mhz;
    row.temperature_max_c = c.temperature_max_c;
    row.power_max_w = c.power_max_w;
    row.contended = c.contended;
    row.policy = c.policy;
    std::vector<db::CotenantSample> rows;
    for (const auto& r : cotenant::to_rows(samples)) {
      db::CotenantSample d;
      d.t_ms = r.t_ms;
      d.foreign_sm = r.foreign_sm;
      d.device_util = r.device_util;
      d.sm_clock_mhz = r.sm_clock_mhz;
      d.throttle_reasons = r.throttle_reasons;
      d.foreign_processes = r.foreign_processes;
      rows.push_back(d);
    }
    store_.put_cotenant(row, rows);
    return c.contended;
  }

  static std::map<std::string, double> time_by_type(const v1::ProfileRun& run) {
    std::map<std::string, double> out;
    for (const auto& g : run.gemms()) out[g.gemm().type()] += g.median_us() * g.gemm().count();
    return out;
  }

  void run_ab() {
    if (spec_.has_custom_profile()) {
      // A profile the client read from a GGUF header; validated when it was submitted.
      profile_ = profiles::ModelProfile{};
      profile_.name = spec_.custom_profile().name();
      profile_.description = "read from a GGUF header";
      for (const auto& g : spec_.custom_profile().gemms())
        profile_.add_gemm(*quant::parse_type(g.type()), g.od(), g.k(), g.role(), g.count());
    } else {
      const std::string default_profile = options_.backend == "cpu" ? "cpu-tiny" : "llama-7b-q4_K_M";
      const std::string profile_name = spec_.profile().empty() ? default_profile : spec_.profile();
      auto profile = profiles::find_builtin_profile(profile_name);
      if (!profile) throw JobFailure("unknown profile '" + profile_name + "'");
      profile_ = *profile;
    }
    tokens_ = spec_.tokens() > 0 ? spec_.tokens() : profile_.default_tokens;
    profile_message_.set_name(profile_.name);
    for (const auto& g : profile_.gemms) {
      auto* m = profile_message_.add_gemms();
      m->set_type(std::string(quant::traits(g.type).name));
      m->set_od(g.od);
      m->set_k(g.k);
      m->set_count(g.count);
      m->set_role(g.role);
    }
    report_.set_profile(profile_.name);
    report_.set_tokens(tokens_);

    Arm a, b;
    a.name = "A";
    b.name = "B";
    if (spec_.kind() == v1::JOB_KIND_AB) {
      a.build = b.build = candidate_;
      a.label = "mmq";
      b.label = "f16";
      a.env["MINFER_MMQ"] = "1";
      b.env["MINFER_MMQ"] = "0";
    } else {
      auto base = store_.find_build(job_.baseline_build_id.value_or(0));
      if (!base) throw JobFailure("the gate's baseline build is not in the store");
      a.build = candidate_;
      b.build = *base;
      a.label = candidate_.name + "@" + candidate_.sha256.substr(0, 8);
      b.label = base->name + "@" + base->sha256.substr(0, 8);
      const std::string mmq = spec_.path() == "f16" ? "0" : "1";
      a.env["MINFER_MMQ"] = mmq;
      b.env["MINFER_MMQ"] = mmq;
    }
    stats::GatePolicy policy;
    if (spec_.policy().slowdown_threshold() > 0) policy.slowdown_threshold = spec_.policy().slowdown_threshold();
    if (spec_.policy().min_pairs() > 0) policy.min_pairs = spec_.policy().min_pairs();
    if (spec_.policy().max_pairs() > 0) policy.max_pairs = spec_.policy().max_pairs();
    if (spec_.policy().target_halfwidth() > 0) policy.target_halfwidth = spec_.policy().target_halfwidth();
    policy.min_pairs = std::max(2, std::min(policy.min_pairs, policy.max_pairs));
    policy.max_pairs = std::max(policy.max_pairs, policy.min_pairs);
    // Pairs are judged only at the design's planned looks (docs/ab-statistics.md).
    const stats::SequentialDesign design = stats::SequentialDesign::from_policy(policy);

    progress_.set_phase("ab");
    progress_.set_pairs_max(policy.max_pairs);
    publish("starting the arms: A = " + a.label + ", B = " + b.label + ", profile " + profile_.name + ", " +
            std::to_string(tokens_) + " tokens");
    if (!spec_.fresh_process()) {
      start_worker(a);
      start_worker(b);
    }

    std::vector<stats::AbPair> pairs;
    std::map<std::string, std::vector<stats::AbPair>> type_pairs;
    std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> type_times;
    std::optional<stats::LookResult> look;
    size_t next_look = 0;
    int seq = 0;
    int contended_pairs = 0;
    auto add_pair = [&](const v1::ProfileRun& ra, std::optional<bool> ca, const v1::ProfileRun& rb,
                        std::optional<bool> cb) {
      // Flagged when the sampler saw different load on the two runs of the pair.
      const bool mismatch = ca.has_value() && cb.has_value() && *ca != *cb;
      contended_pairs += (ca.value_or(false) || cb.value_or(false)) ? 1 : 0;
      pairs.push_back({ra.tokens_per_s(), rb.tokens_per_s(), mismatch});
      auto ta = time_by_type(ra), tb = time_by_type(rb);
      for (const auto& [type, us] : ta) {
        if (!tb.count(type) || us <= 0 || tb[type] <= 0) continue;
        type_pairs[type].push_back({1.0 / us, 1.0 / tb[type], false});
        type_times[type].first.push_back(us);
        type_times[type].second.push_back(tb[type]);
      }
    };
    if (spec_.order() == "sequential") {
      // Every A run, then every B run: the order llama.cpp's compare-commits uses, kept only to
      // show what a co-tenant or drift does to it. No early stop: both arms get max_pairs runs.
      std::vector<v1::ProfileRun> runs_a, runs_b;
      std::vector<std::optional<bool>> load_a, load_b;
      for (int i = 0; i < policy.max_pairs; ++i) {
        runs_a.push_back(timed_run(a, i, seq++));
        load_a.push_back(last_contended_);
        publish("sequential: A run " + std::to_string(i + 1) + " of " + std::to_string(policy.max_pairs));
      }
      for (int i = 0; i < policy.max_pairs; ++i) {
        runs_b.push_back(timed_run(b, i, seq++));
        load_b.push_back(last_contended_);
        publish("sequential: B run " + std::to_string(i + 1) + " of " + std::to_string(policy.max_pairs));
      }
      for (int i = 0; i < policy.max_pairs; ++i) add_pair(runs_a[i], load_a[i], runs_b[i], load_b[i]);
      progress_.set_pairs_done(int32_t(pairs.size()));
      look = stats::evaluate_look(pairs, design, design.last_look());
      report_.add_reasons("sequential order (all A runs, then all B runs): drift and co-tenant phases are not balanced");
    }
    // ABBA: each block yields two pairs, (A, B) then (B, A), so drift hits both arms alike.
    while (spec_.order() != "sequential") {
      const int index = int(pairs.size());
      if (index % 2 == 0) {
        auto ra = timed_run(a, index, seq++);
        const auto ca = last_contended_;
        auto rb = timed_run(b, index, seq++);
        add_pair(ra, ca, rb, last_contended_);
      } else {
        auto rb = timed_run(b, index, seq++);
        const auto cb = last_contended_;
        auto ra = timed_run(a, index, seq++);
        add_pair(ra, last_contended_, rb, cb);
      }
      progress_.set_pairs_done(int32_t(pairs.size()));
      if (int(pairs.size()) < design.looks[next_look]) {
        publish();
        continue;
      }
      // A planned look: the interval, verdict and comparison are read here and only here.
      look = stats::evaluate_look(pairs, design, next_look);
      progress_.set_ratio(look->ratio);
      progress_.set_ci_low(look->lower);
      progress_.set_ci_high(look->upper);
      publish("look " + std::to_string(next_look + 1) + " of " + std::to_string(design.looks.size()) + " at " +
              std::to_string(pairs.size()) + " pairs: " + std::string(stats::to_string(look->verdict)) + " (" +
              std::string(stats::to_string(look->comparison)) + "), " +
              std::string(stats::to_string(look->decision)));
      if (look->decision == stats::LookDecision::stop) break;
      ++next_look;
    }
    for (Arm* arm : {&a, &b}) {
      if (!arm->worker) continue;
      v1::WorkerRequest stop;
      stop.set_shutdown(true);
      arm->worker->send(stop);
      arm->worker->wait_exit(std::chrono::seconds(10));
    }

    const stats::LookResult& decision = look.value();
    std::vector<double> log_ratios;
    for (const auto& p : pairs) log_ratios.push_back(std::log(p.a) - std::log(p.b));
    report_.set_verdict(to_proto(decision.verdict));
    report_.set_comparison(to_proto(decision.comparison));
    report_.set_ratio(decision.ratio);
    report_.set_ci_low(decision.lower);
    report_.set_ci_high(decision.upper);
    report_.set_p_value(stats::wilcoxon_signed_rank_p(log_ratios));
    report_.set_pairs(int32_t(pairs.size()));
    report_.set_contended_pairs(contended_pairs);
    if (!sampler_.available())
      report_.add_reasons("co-tenant load unknown (cotenant=unavailable: " + sampler_.unavailable_reason() + ")");
    else if (contended_pairs > 0)
      report_.add_reasons(std::to_string(contended_pairs) + " of " + std::to_string(pairs.size()) +
                          " pairs ran under co-tenant load; " + std::to_string(decision.contention_mismatches) +
                          " saw different load on their two runs");
    report_.mutable_arm_a()->set_label(a.label);
    report_.mutable_arm_a()->set_tokens_per_s(stats::geometric_mean(a.tokens_per_s));
    report_.mutable_arm_a()->set_runs(int32_t(a.tokens_per_s.size()));
    report_.mutable_arm_b()->set_label(b.label);
    report_.mutable_arm_b()->set_tokens_per_s(stats::geometric_mean(b.tokens_per_s));
    report_.mutable_arm_b()->set_runs(int32_t(b.tokens_per_s.size()));
    for (const auto& r : decision.reasons) report_.add_reasons(r);
    report_.add_reasons("tok/s is prefill throughput of " + profile_.name + "'s linear layers at " +
                        std::to_string(tokens_) + " tokens (summed GEMM time, cold L2)");
    for (const auto& [type, tp] : type_pairs) {
      // The same interval as the headline, at the look the A/B stopped at (a type missing from some
      // runs has fewer pairs and gets none).
      if (tp.size() != pairs.size()) continue;
      const auto e = stats::judge_look(tp, design, decision.look_index);
      auto* t = report_.add_per_type();
      t->set_weight_type(type);
      t->set_ratio(e.ratio);
      t->set_ci_low(e.lower);
      t->set_ci_high(e.upper);
      t->set_comparison(to_proto(e.comparison));
      t->set_gemm_us_a(stats::geometric_mean(type_times[type].first));
      t->set_gemm_us_b(stats::geometric_mean(type_times[type].second));
    }
  }

  void finish() {
    db::Verdict v;
    v.job_id = job_.id;
    v.verdict = report_.verdict() == v1::VERDICT_PASS ? db::VerdictValue::Pass
                : report_.verdict() == v1::VERDICT_FAIL ? db::VerdictValue::Fail
                                                        : db::VerdictValue::Inconclusive;
    v.comparison = report_.comparison() == v1::COMPARISON_SAME        ? db::Comparison::Same
                   : report_.comparison() == v1::COMPARISON_DIFFERENT ? db::Comparison::Different
                                                                      : db::Comparison::Unknown;
    if (report_.pairs() > 0) {
      v.ratio = report_.ratio();
      v.ci_low = report_.ci_low();
      v.ci_high = report_.ci_high();
      v.tokens_per_s_a = report_.arm_a().tokens_per_s();
      v.tokens_per_s_b = report_.arm_b().tokens_per_s();
    }
    v.pairs = report_.pairs();
    v.contended_pairs = report_.contended_pairs();
    for (const auto& r : report_.reasons()) v.reasons.push_back(r);
    progress_.set_phase("done");
    // Ran to a verdict: OK, unless the numbers were wrong. A run saved by a retry says so.
    v1::Disposition disposition = v1::DISPOSITION_OK;
    std::string detail;
    if (report_.parity_failed() > 0) {
      disposition = v1::DISPOSITION_INCORRECT;
      detail = std::to_string(report_.parity_failed()) + " parity case(s) failed; first: " + first_parity_failure_;
    }
    for (const auto& r : recovered_) detail += (detail.empty() ? "" : "; ") + r;
    store_.finish_job_with_verdict(v, progress_json(progress_, &report_, disposition, detail));
    v1::JobEvent e;
    e.set_job_id(job_.id);
    e.set_unix_ms(now_ms());
    e.set_state(v1::JOB_STATE_DONE);
    *e.mutable_progress() = progress_;
    *e.mutable_verdict() = report_;
    events_.publish(e);
  }

  db::Store& store_;
  EventHub& events_;
  const DaemonOptions& options_;
  cotenant::Sampler& sampler_;
  std::optional<bool> last_contended_;
  std::set<int> own_worker_pids_;  // every worker this job started (see timed_run)
  std::string first_parity_failure_;  // "q4_0 mmq 1x256x256: 256 NaN", for the disposition's detail
  std::vector<std::string> recovered_;  // runs that a worker restart saved
  int64_t job_limit_s_ = 0;
  Clock::time_point job_deadline_;
  db::Job job_;
  const std::atomic<int>& cancelled_;
  v1::JobSpec spec_;
  db::Build candidate_;
  profiles::ModelProfile profile_;
  v1::ModelProfile profile_message_;
  int64_t tokens_ = 0;
  v1::JobProgress progress_;
  v1::VerdictReport report_;
};

}  // namespace

JobRunner::JobRunner(db::Store& store, EventHub& events, const DaemonOptions& options, cotenant::Sampler& sampler)
    : store_(store), events_(events), options_(options), sampler_(sampler) {}

void JobRunner::run(const db::Job& job, const std::atomic<int>& cancelled) {
  auto end_job = [&](db::JobState state, const std::string& error, v1::Disposition disposition,
                     const std::string& detail) {
    try {
      if (disposition != v1::DISPOSITION_UNSPECIFIED)
        if (auto stored = store_.find_job(job.id))
          store_.update_job_progress(job.id, with_disposition(stored->progress_json, disposition, detail));
      store_.update_job_state(job.id, state, error, db::JobState::Running);
    } catch (const std::exception& e) {
      // The store refused (disk full, read-only): the job stays running and is re-run at restart.
      std::cerr << "qgated: job " << job.id << " ended (" << error << ") but the database refused to record it: "
                << e.what() << "; it stays unfinished and is run again at the next start\n";
    }
    v1::JobEvent e;
    e.set_job_id(job.id);
    e.set_unix_ms(now_ms());
    e.set_state(to_proto(state));
    e.set_message(error);
    events_.publish(e);
  };
  try {
    JobExecution(store_, events_, options_, sampler_, job, cancelled).run();
  } catch (const DaemonStopping&) {
    // Left in state running on purpose: the next start requeues it and runs it again.
  } catch (const JobCancelled&) {
    end_job(db::JobState::Cancelled, "cancelled", v1::DISPOSITION_UNSPECIFIED, "");
  } catch (const JobFailure& e) {
    end_job(db::JobState::Failed, e.what(), e.disposition, e.detail);
  } catch (const db::StoreError& e) {
    // qgate's own failure, not the build's: no verdict was recorded, and none is half written.
    const std::string why = std::string("qgated could not write its database (disk full or read-only?): ") + e.what();
    end_job(db::JobState::Failed, why, v1::DISPOSITION_ERROR, why);
  } catch (const std::exception& e) {
    end_job(db::JobState::Failed, std::string("internal error: ") + e.what(), v1::DISPOSITION_ERROR,
            std::string("internal error: ") + e.what());
  }
}

}  // namespace qgate::server
