// JobRunner: reads a job's spec, runs its phases in order, and ends it once. A gate whose parity
// fails stops before the A/B; a build that leaks fails unless the policy allows it.
#include "qgate/server/job_runner.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>

#include "qgate/db/store_error.h"
#include "qgate/profiles/model_profile.h"
#include "qgate/server/ab_phase.h"
#include "qgate/server/artifact_store.h"
#include "qgate/server/build_files.h"
#include "qgate/jobs/job_gpu_records.h"
#include "qgate/jobs/job_profile.h"
#include "qgate/jobs/job_messages.h"
#include "qgate/server/job_recorder.h"
#include "qgate/server/parity_phase.h"
#include "qgate/v1/verdict_words.h"
#include "qgate/v1/record_words.h"
#include "qgate/v1/spec_words.h"

namespace qgate::server {

// The application layer (jobs/) this file uses.
using jobs::JobGpuRecords;
using jobs::gate_policy;
using jobs::job_profile;
using jobs::job_tokens;
using jobs::spec_of;

namespace {

constexpr uint64_t kDefaultSeed = 20260831;
constexpr int kDefaultRepetitions = 5;

/// The model profile an A/B times (job_profile.h); a name no longer built in fails the job.
profiles::ModelProfile profile_of(const v1::JobSpec& spec, const std::string& backend) {
  auto profile = job_profile(spec, backend);
  if (!profile) throw JobFailure("unknown profile '" + spec.profile() + "'");
  return *profile;
}

/// One job's run: its spec, its recorder, its phases.
class JobPlan {
 public:
  JobPlan(db::Store& store, const DaemonOptions& options, cotenant::Sampler& sampler, WorkerLauncher& launcher,
          BuildFiles& build_files, JobRecorder& recorder, const JobControl& control, const db::Job& job,
          const JobPlacement& placement)
      : store_(store),
        options_(options),
        sampler_(sampler),
        launcher_(launcher),
        build_files_(build_files),
        recorder_(recorder),
        control_(control),
        job_(job),
        spec_(spec_of(job)),
        placement_(placement) {}

  void run() {
    auto build = store_.find_build(job_.build_id);
    if (!build) throw JobFailure("the job's build " + std::to_string(job_.build_id) + " is not in the store");
    candidate_ = *build;
    const bool command = spec_.kind() == v1::JOB_KIND_COMMAND;
    // A command job's build is a file only when the two builds are substituted into its command.
    const bool has_file = !command || spec_.command().toggle() == v1::COMMAND_TOGGLE_BUILDS;
    if (has_file) {
      candidate_ = on_this_host(std::move(candidate_));
      if (const std::string why = stored_build_mismatch(candidate_.artifact_path, candidate_.sha256); !why.empty())
        throw JobFailure(why);
    }
    report_.set_backend(options_.backend);
    check_split();
    const bool gate = spec_.kind() == v1::JOB_KIND_GATE;
    const bool parity_only = spec_.kind() == v1::JOB_KIND_PARITY;
    // A gate with parity_shapes none and no model file skips parity (the service refuses a parity
    // job that would have nothing to run).
    const bool parity_phase = spec_.parity_shapes() != v1::SHAPE_SET_NONE || !spec_.parity_gguf().empty();
    if ((gate || parity_only) && parity_phase) run_parity();
    if (command) {
      run_command_ab();
      finish();
      return;
    }
    if (parity_only) {
      const bool ok = report_.parity_failed() == 0 && report_.parity_passed() > 0;
      report_.set_verdict(ok ? v1::VERDICT_PASS : v1::VERDICT_FAIL);
      report_.add_reasons(ok ? "all " + std::to_string(report_.parity_passed()) + " parity cases passed"
                             : std::to_string(report_.parity_failed()) + " parity case(s) failed");
    } else if (gate && report_.parity_failed() > 0) {
      report_.set_verdict(v1::VERDICT_FAIL);
      report_.add_reasons(std::to_string(report_.parity_failed()) + " parity case(s) failed; the A/B was not run");
    } else {
      run_ab();
    }
    finish();
  }

 private:
  std::vector<std::string> common_args() const {
    return {"--backend", options_.backend, "--threads", std::to_string(options_.cpu_threads), "--seed",
            std::to_string(seed()), "--sandbox", options_.worker_sandbox};
  }
  /// How a worker opens the placement's i-th GPU; the options' GPU when the placement has none.
  std::vector<std::string> device_args(size_t i) const {
    if (i < placement_.gpus.size() && !placement_.gpus[i]->worker_args.empty()) return placement_.gpus[i]->worker_args;
    const int ordinal = i < placement_.gpus.size() ? placement_.gpus[i]->ordinal : options_.gpu;
    return {"--device", std::to_string(ordinal)};
  }
  cotenant::Sampler& sampler(size_t i) const {
    if (i < placement_.gpus.size() && placement_.gpus[i]->sampler) return *placement_.gpus[i]->sampler;
    return sampler_;
  }
  static v1::GpuRef gpu_ref(const ServedGpu& g) {
    v1::GpuRef ref;
    ref.set_ordinal(g.ordinal);
    ref.set_name(g.name);
    ref.set_uuid(g.uuid);
    return ref;
  }
  /// A split job runs on two GPUs of one model, or not at all.
  void check_split() const {
    if (!spec_.split_gpus()) return;
    if (placement_.gpus.size() != 2)
      throw JobFailure("a split job needs two GPUs of one model and the daemon has no second one for it (serve "
                       "them with qgated --gpus, or submit without --split-gpus)");
    if (placement_.gpus[0]->name != placement_.gpus[1]->name)
      throw JobFailure("a split job needs two identical GPUs: GPU " + std::to_string(placement_.gpus[0]->ordinal) +
                       " is " + placement_.gpus[0]->name + ", GPU " + std::to_string(placement_.gpus[1]->ordinal) +
                       " is " + placement_.gpus[1]->name);
  }
  /// The split part of an A/B setup: the pair, how workers open each GPU, and each GPU's sampler.
  void add_split(AbSetup& setup) const {
    if (!spec_.split_gpus()) return;
    SplitSetup split;
    split.first = gpu_ref(*placement_.gpus[0]);
    split.second = gpu_ref(*placement_.gpus[1]);
    split.first_args = device_args(0);
    split.second_args = device_args(1);
    split.first_sampler = &sampler(0);
    split.second_sampler = &sampler(1);
    setup.split = split;
  }
  uint64_t seed() const { return spec_.seed() ? spec_.seed() : kDefaultSeed; }
  /// The build with artifact_path naming the file this host runs it from (BuildFiles): the phases,
  /// arms and {build} substitutions read that path alone.
  db::Build on_this_host(db::Build build) {
    build.artifact_path = build_files_.local_path(build);
    return build;
  }
  std::string log_dir() const { return (std::filesystem::path(options_.data_dir) / "logs").string(); }

  void run_parity() {
    ParitySetup setup;
    setup.worker_binary = options_.worker_binary;
    setup.common_args = {"--build", candidate_.artifact_path};
    for (const auto& a : common_args()) setup.common_args.push_back(a);
    for (const auto& a : device_args(0)) setup.common_args.push_back(a);
    std::filesystem::create_directories(log_dir());
    setup.log_path = (std::filesystem::path(log_dir()) / ("job-" + std::to_string(job_.id) + "-parity.log")).string();
    setup.build_id = candidate_.id;
    setup.shapes = spec_.parity_shapes();
    setup.gguf = spec_.parity_gguf();
    setup.tensors = spec_.parity_tensors();
    setup.numerics = spec_.numerics();
    setup.phase_timeout_s = options_.parity_timeout_s;
    setup.case_timeout_s = options_.run_timeout_s;
    const ParityOutcome parity = ParityPhase(setup, launcher_, recorder_, control_).run(progress_);
    report_.set_parity_passed(parity.passed);
    report_.set_parity_failed(parity.failed);
    first_parity_failure_ = parity.first_failure;
    if (parity.leak) *report_.add_leaks() = *parity.leak;
  }

  void run_ab() {
    const profiles::ModelProfile profile = profile_of(spec_, options_.backend);
    AbSetup setup = ab_setup_base();
    setup.profile = profile.name;
    setup.tokens = job_tokens(spec_, profile);
    auto* prepare = &setup.arms.prepare;
    prepare->set_tokens(setup.tokens);
    prepare->set_seed(seed());
    prepare->mutable_profile()->set_name(profile.name);
    for (const auto& g : profile.gemms) {
      auto* m = prepare->mutable_profile()->add_gemms();
      m->set_type(std::string(quant::traits(g.type).name));
      m->set_od(g.od);
      m->set_k(g.k);
      m->set_count(g.count);
      m->set_role(g.role);
    }
    setup.arms.run.set_warmup(1);
    setup.arms.run.set_repetitions(spec_.repetitions() > 0 ? spec_.repetitions() : kDefaultRepetitions);
    setup.arms.run.set_cold(true);
    setup.arms.run.set_whole_pass(spec_.timing() == v1::TIMING_MODE_PASS);

    if (spec_.kind() == v1::JOB_KIND_AB) {
      setup.a.build = setup.b.build = candidate_;
      setup.a.label = "mmq";
      setup.b.label = "f16";
      setup.a.env["MINFER_MMQ"] = "1";
      setup.b.env["MINFER_MMQ"] = "0";
    } else {
      auto base = store_.find_build(job_.baseline_build_id.value_or(0));
      if (!base) throw JobFailure("the gate's baseline build is not in the store");
      setup.a.build = candidate_;
      setup.b.build = on_this_host(*base);
      setup.a.label = db::build_label(candidate_.name, candidate_.sha256);
      setup.b.label = db::build_label(base->name, base->sha256);
      const std::string mmq = spec_.path() == "f16" ? "0" : "1";
      setup.a.env["MINFER_MMQ"] = mmq;
      setup.b.env["MINFER_MMQ"] = mmq;
    }
    add_split(setup);
    AbOutcome ab = AbPhase(std::move(setup), launcher_, recorder_, control_, sampler(0)).run(progress_);
    // The A/B's part of the report, beside what parity already put there.
    const int passed = report_.parity_passed(), failed = report_.parity_failed();
    const auto parity_leaks = report_.leaks();
    const std::string backend = report_.backend();
    report_ = std::move(ab.report);
    report_.set_parity_passed(passed);
    report_.set_parity_failed(failed);
    report_.set_backend(backend);
    *report_.mutable_leaks() = parity_leaks;
    for (const auto& leak : ab.leaks) *report_.add_leaks() = leak;
    recovered_ = std::move(ab.recovered);
    judge_with_calibration();
  }

  /// A split job's verdict against the pair's stored A/A calibration (docs/two-gpus.md): an A/A that
  /// read DIFFERENT on this pair means split runs on it are not fair, and the verdict cannot stand.
  void judge_with_calibration() {
    if (!report_.has_split()) return;
    v1::SplitGpus& s = *report_.mutable_split();
    s.set_is_calibration(JobGpuRecords::is_calibration(job_, spec_));
    const std::string pair = "GPUs " + std::to_string(s.first().ordinal()) + " and " + std::to_string(s.second().ordinal());
    if (s.is_calibration()) {
      report_.add_reasons("this A/A calibrates the pair " + pair + ": split verdicts on it are judged against it");
      return;
    }
    const int64_t started = job_.started_ms.value_or(job_.created_ms);
    const auto cal = JobGpuRecords(store_).calibration(s.first(), s.second(), started, job_.id);
    JobGpuRecords::describe_calibration(s, cal);
    if (!cal) {
      report_.add_reasons("the pair " + pair + " has no A/A calibration yet: the blocks cancel the GPUs' speed, but " +
                          "only an A/A shows the split is fair (qgate gate --split-gpus B --baseline B)");
      return;
    }
    char text[200];
    std::snprintf(text, sizeof text, "calibrated by job %lld: the pair's A/A read %s, ratio %.4f [%.4f, %.4f]",
                  static_cast<long long>(cal->job_id), std::string(words::comparison_word(cal->comparison)).c_str(), cal->ratio,
                  cal->ci_low, cal->ci_high);
    if (cal->comparison == v1::COMPARISON_DIFFERENT) {
      report_.set_verdict(v1::VERDICT_INCONCLUSIVE);
      report_.set_comparison(v1::COMPARISON_UNKNOWN);
      report_.add_reasons(std::string(text) + ": split runs on this pair are not fair, so the verdict is " +
                          "INCONCLUSIVE; calibrate again or run on one GPU");
      return;
    }
    report_.add_reasons(text);
    if (s.gpu_ci_low() > 0 && (s.calibration_gpu_ratio() < s.gpu_ci_low() || s.calibration_gpu_ratio() > s.gpu_ci_high())) {
      std::snprintf(text, sizeof text, "the GPUs' speed ratio moved since the calibration (%.4f then, %.4f [%.4f, %.4f] "
                    "now); it cancels in the blocks either way", s.calibration_gpu_ratio(), s.gpu_ratio(),
                    s.gpu_ci_low(), s.gpu_ci_high());
      report_.add_reasons(text);
    }
  }

  /// The job's own working directory, where its commands run: <data dir>/jobs/job-<id>.
  std::string job_workdir() const {
    const auto dir = std::filesystem::path(options_.data_dir) / "jobs" / ("job-" + std::to_string(job_.id));
    std::filesystem::create_directories(dir);
    return dir.string();
  }

  /// What of the daemon's own a command may never open, whatever its words name: the database,
  /// uploads, logs, every job's folder (its own is granted apart), the socket, token and key files.
  std::vector<std::string> daemon_private_paths() const {
    const std::filesystem::path data(options_.data_dir);
    std::vector<std::string> paths = {options_.db_path,
                                      options_.db_path + "-wal",
                                      options_.db_path + "-shm",
                                      (data / "artifacts").string(),
                                      log_dir(),
                                      (data / "jobs").string()};
    for (const std::string* file : {&options_.auth_token_file, &options_.tls_key_file, &options_.log_file,
                                    &options_.record_samples_file})
      if (!file->empty()) paths.push_back(*file);
    if (options_.listen.rfind("unix://", 0) == 0) paths.push_back(options_.listen.substr(7));
    return paths;
  }

  /// The shared part of every A/B setup: the policy, order, timeouts and the arms' worker settings.
  AbSetup ab_setup_base() const {
    AbSetup setup;
    setup.policy = gate_policy(spec_.policy());
    setup.order = spec_.order();
    setup.fresh_process = spec_.fresh_process();
    setup.quiet_max_foreign_sm_percent = options_.quiet_max_foreign_sm_percent;
    setup.arms.worker_binary = options_.worker_binary;
    setup.arms.common_args = common_args();
    setup.arms.log_dir = log_dir();
    setup.arms.job_id = job_.id;
    setup.arms.prepare_timeout_s = options_.prepare_timeout_s;
    setup.arms.run_timeout_s = options_.run_timeout_s;
    setup.a.name = "A";
    setup.b.name = "B";
    setup.a.device_args = setup.b.device_args = device_args(0);
    return setup;
  }

  /// A command job: the two arms run the job's program (docs/command-mode.md), toggled by a
  /// variable, by a second command, or by the two builds substituted for {build}.
  void run_command_ab() {
    const v1::CommandSpec& command = spec_.command();
    AbSetup setup = ab_setup_base();
    setup.profile = !spec_.profile().empty() ? spec_.profile() : "command";
    setup.tokens = spec_.tokens();
    if (command.run_timeout_s() > 0) setup.arms.run_timeout_s = command.run_timeout_s();
    setup.arms.prepare.set_tokens(setup.tokens);
    setup.arms.prepare.set_seed(seed());
    setup.arms.prepare.mutable_profile()->set_name(setup.profile);
    v1::CommandArm arm;
    arm.set_workdir(job_workdir());
    for (const std::string& path : daemon_private_paths()) arm.add_protected_paths(path);
    *arm.mutable_tokens_per_s() = command.tokens_per_s();
    if (arm.tokens_per_s().format() == v1::OUTPUT_FORMAT_UNSPECIFIED)
      arm.mutable_tokens_per_s()->set_format(v1::OUTPUT_FORMAT_LLAMA_BENCH_JSON);
    *arm.mutable_output() = command.output();
    *arm.mutable_output_argv() = command.output_argv();
    for (const auto& [k, v] : command.env()) setup.a.env[k] = setup.b.env[k] = v;
    setup.a.build = setup.b.build = candidate_;
    *arm.mutable_argv() = command.argv();
    setup.a.command = setup.b.command = arm;
    switch (command.toggle()) {
      case v1::COMMAND_TOGGLE_COMMANDS:
        *setup.b.command->mutable_argv() = command.argv_b();
        setup.a.label = "command-a";
        setup.b.label = "command-b";
        break;
      case v1::COMMAND_TOGGLE_BUILDS: {
        auto base = store_.find_build(job_.baseline_build_id.value_or(0));
        if (!base) throw JobFailure("the command job's baseline build is not in the store");
        setup.b.build = on_this_host(*base);
        setup.a.label = db::build_label(candidate_.name, candidate_.sha256);
        setup.b.label = db::build_label(base->name, base->sha256);
        for (auto* arm_spec : {&setup.a, &setup.b}) {
          for (auto* argv : {arm_spec->command->mutable_argv(), arm_spec->command->mutable_output_argv()})
            for (std::string& word : *argv) substitute_build(word, arm_spec->build.artifact_path);
          arm_spec->command->add_read_paths(arm_spec->build.artifact_path);  // under the protected uploads
        }
        break;
      }
      default: {
        const std::string variable = command.variable().empty() ? "MINFER_MMQ" : command.variable();
        const std::string value_a = command.value_a().empty() ? "1" : command.value_a();
        const std::string value_b = command.value_b().empty() ? "0" : command.value_b();
        setup.a.env[variable] = value_a;
        setup.b.env[variable] = value_b;
        setup.a.label = variable + "=" + value_a;
        setup.b.label = variable + "=" + value_b;
      }
    }
    setup.throughput_note = "tok/s as the command printed it (" + std::string(words::word(arm.tokens_per_s().format())) +
                            (arm.tokens_per_s().expression().empty() ? "" : " " + arm.tokens_per_s().expression()) +
                            "), one process per run, in " + arm.workdir();
    add_split(setup);
    AbOutcome ab = AbPhase(std::move(setup), launcher_, recorder_, control_, sampler(0)).run(progress_);
    const std::string backend = report_.backend();
    report_ = std::move(ab.report);
    report_.set_backend(backend);
    recovered_ = std::move(ab.recovered);
    judge_with_calibration();
  }

  /// The first memory finding that is a leak, not memory kept once; nullptr when none.
  static const v1::MemoryLeak* first_leak(const v1::VerdictReport& report) {
    for (const v1::MemoryLeak& leak : report.leaks())
      if (!leak.kept_once()) return &leak;
    return nullptr;
  }

  static void substitute_build(std::string& word, const std::string& path) {
    for (size_t at = word.find("{build}"); at != std::string::npos; at = word.find("{build}", at + path.size()))
      word.replace(at, 7, path);
  }

  void finish() {
    // Ran to a verdict: OK, unless the numbers were wrong or memory was kept. A run saved by a
    // retry says so.
    Fault disposition{v1::DISPOSITION_OK, ""};
    if (report_.identity().checked() && !report_.identity().identical()) {
      disposition = {v1::DISPOSITION_INCORRECT, "outputs differ: " + report_.identity().detail()};
    } else if (report_.parity_failed() > 0) {
      disposition = {v1::DISPOSITION_INCORRECT, std::to_string(report_.parity_failed()) +
                                                    " parity case(s) failed; first: " + first_parity_failure_};
    } else if (const v1::MemoryLeak* leak = first_leak(report_)) {
      disposition = {v1::DISPOSITION_LEAKED, leak->where() + ": " + leak->detail()};
      if (!spec_.policy().allow_leaks()) {
        report_.set_verdict(v1::VERDICT_FAIL);
        report_.add_reasons("the build leaked memory (" + disposition.detail +
                            "); a leak fails the gate unless the policy allows leaks");
      } else {
        report_.add_reasons("the build leaked memory (" + disposition.detail + "); allowed by the policy");
      }
    }
    // Memory a library keeps once is said, on its own line, and judges nothing.
    for (const v1::MemoryLeak& leak : report_.leaks())
      if (leak.kept_once()) report_.add_reasons(leak.where() + ": " + leak.detail() + " (not a leak)");
    for (const auto& r : recovered_) disposition.detail += (disposition.detail.empty() ? "" : "; ") + r;
    if (report_.gpus().empty())
      for (const ServedGpu* g : placement_.gpus) *report_.add_gpus() = gpu_ref(*g);
    recorder_.finish(report_, progress_, disposition);
  }

  db::Store& store_;
  const DaemonOptions& options_;
  cotenant::Sampler& sampler_;
  WorkerLauncher& launcher_;
  BuildFiles& build_files_;
  JobRecorder& recorder_;
  const JobControl& control_;
  db::Job job_;
  v1::JobSpec spec_;
  const JobPlacement& placement_;
  db::Build candidate_;
  v1::JobProgress progress_;
  v1::VerdictReport report_;
  std::string first_parity_failure_;
  std::vector<std::string> recovered_;
};

}  // namespace

JobRunner::JobRunner(db::Store& store, EventHub& events, const DaemonOptions& options, cotenant::Sampler& sampler,
                     std::shared_ptr<WorkerLauncher> launcher)
    : store_(store),
      events_(events),
      options_(options),
      sampler_(sampler),
      launcher_(launcher ? std::move(launcher) : std::make_shared<ProcessLauncher>()),
      build_files_(store, (std::filesystem::path(options.data_dir) / "artifacts").string()) {}

void JobRunner::run(const db::Job& job, const std::atomic<int>& stop) {
  // The options' GPU, opened as the options say.
  ServedGpu gpu;
  gpu.ordinal = options_.gpu;
  gpu.sampler = &sampler_;
  JobPlacement placement;
  placement.gpus.push_back(&gpu);
  run(job, stop, placement);
}

void JobRunner::run(const db::Job& job, const std::atomic<int>& stop, const JobPlacement& placement) {
  JobRecorder recorder(store_, events_, job, options_.backend, options_.host_name);
  try {
    const v1::JobSpec spec = spec_of(job);
    const int64_t limit_s = spec.timeout_s() > 0 ? spec.timeout_s() : options_.job_timeout_s;
    const JobControl control(stop, std::chrono::seconds(limit_s));
    spdlog::info("job {} started: {} of build {}", job.id, words::spec_word(spec.kind()), job.build_id);
    JobPlan(store_, options_, sampler_, *launcher_, build_files_, recorder, control, job, placement).run();
  } catch (const DaemonStopping&) {
    // Left running here: the daemon queues it again once every runner has stopped (Daemon::shutdown).
    spdlog::info("job {} interrupted by the daemon stopping; it is queued again", job.id);
  } catch (const LeaseLost&) {
    // Its lease ran out under it (this daemon lost the database for longer than a lease): the job
    // was queued again, and may be running elsewhere. Its verdict is that daemon's to write.
    spdlog::warn("job {} stopped: this daemon no longer holds its lease; it was queued again for any daemon", job.id);
  } catch (const JobCancelled&) {
    recorder.end(db::JobState::Cancelled, "cancelled", std::nullopt);
  } catch (const JobFailure& e) {
    recorder.end(db::JobState::Failed, e.what(), e.fault);
  } catch (const db::StoreError& e) {
    if (e.kind() == db::StoreErrorKind::CannotOpen && unrecorded_) {
      // The store was lost (a network cut, a database restart): the job cannot be recorded, and
      // goes back to the queue once the store answers again (UnrecordedJobs).
      unrecorded_->add(job.id);
      spdlog::error("job {} stopped: the store was lost while it ran ({}); it goes back to the queue once the store "
                    "answers again",
                    job.id, e.what());
      return;
    }
    // qgate's own failure, not the build's: no verdict was recorded, and none is half written. The
    // job is not ended either (that write may half succeed on a full disk): it stays unfinished and
    // runs again when the daemon next starts.
    spdlog::error("job {} stopped: qgated could not write its database (disk full or read-only?): {}; the database "
                  "refused to record it, so it stays unfinished and is run again at the next start",
                  job.id, e.what());
  } catch (const std::exception& e) {
    const std::string why = std::string("internal error: ") + e.what();
    recorder.end(db::JobState::Failed, why, Fault{v1::DISPOSITION_ERROR, why});
  }
}

}  // namespace qgate::server
