// JobSubmission: the checks a submit header must pass, and a finished upload stored as a build and
// a queued job.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <tuple>

#include "qgate/common/sha256.h"
#include "qgate/interop/output_reader.h"
#include "qgate/profiles/model_profile.h"
#include "qgate/v1/record_words.h"
#include "qgate/v1/spec_words.h"
#include "qgate/common/weight_types.h"
#include "qgate/jobs/gpu_choice.h"
#include "qgate/jobs/job_messages.h"
#include "qgate/jobs/jobs_application.h"

namespace qgate::jobs {
namespace {

constexpr std::int64_t kMaxTokens = 65536;
constexpr int kMaxPairs = 1000;
// A build's free-text metadata is stored with every job and served to every reader (the job list,
// the dashboard): bounded so one submitter cannot make those answers huge.
constexpr size_t kMaxCommitBytes = 256;
constexpr size_t kMaxBranchBytes = 256;
constexpr size_t kMaxFlagsBytes = 4096;

[[noreturn]] void refuse(const std::string& message) {
  throw ApplicationError(ApplicationErrorKind::InvalidArgument, message);
}

bool valid_build_name(const std::string& name) {
  static const std::regex pattern("[A-Za-z0-9_][A-Za-z0-9._-]{0,127}");
  return std::regex_match(name, pattern);
}

void check_custom_profile(const v1::JobSpec& job) {
  if (!job.profile().empty()) refuse("give a profile name or a custom profile, not both");
  const auto& profile = job.custom_profile();
  if (profile.gemms().empty()) refuse("the custom profile has no GEMMs");
  if (profile.gemms_size() > 4096) refuse("the custom profile has more than 4096 GEMM entries");
  if (!valid_build_name(profile.name())) refuse("custom profile name '" + profile.name() + "' is not a plain name");
  for (const auto& gemm : profile.gemms()) {
    auto type = quant::parse_type(gemm.type());
    if (!type) refuse("custom profile: unknown weight type '" + gemm.type() + "'");
    const int block = quant::traits(*type).block_elems;
    if (gemm.od() <= 0 || gemm.k() <= 0 || gemm.od() > (1 << 20) || gemm.k() > (1 << 20) || gemm.k() % block != 0)
      refuse("custom profile: GEMM " + gemm.type() + " " + std::to_string(gemm.od()) + "x" +
             std::to_string(gemm.k()) + " needs 0 < od, k <= 2^20 and k a multiple of " + std::to_string(block));
    if (gemm.count() < 1 || gemm.count() > 100000) refuse("custom profile: a GEMM count must be in [1, 100000]");
  }
}

/// The spec's enumerations: a client built against a newer schema may send values this daemon does
/// not know, which must be refused rather than read as the default.
void check_enums(const v1::JobSpec& job) {
  if (!v1::RunOrder_IsValid(job.order()))
    refuse("order " + std::to_string(job.order()) + " is not one of abba, sequential");
  if (!v1::TimingMode_IsValid(job.timing()))
    refuse("timing " + std::to_string(job.timing()) + " is not one of gemm, pass");
  if (!v1::ShapeSet_IsValid(job.parity_shapes()))
    refuse("parity_shapes " + std::to_string(job.parity_shapes()) + " is not one of standard, quick, none");
  if (!v1::NumericsProfile_IsValid(job.numerics()))
  {
    std::string known;
    for (const auto& w : words::numerics_words()) known += (known.empty() ? "" : ", ") + w;
    refuse("numerics " + std::to_string(job.numerics()) + " is not one of " + known);
  }
}

void check_parity_source(const v1::JobSpec& job, const std::vector<std::string>& models_dirs) {
  if (!job.parity_gguf().empty()) {
    // The worker opens it as the daemon's user: only inside a folder the operator allowed, so a job
    // cannot have the daemon read any file it can (docs/security.md). Refuse now what it could not read.
    if (models_dirs.empty())
      refuse("this qgated reads no model files: start it with --models-dir FOLDER to allow parity_gguf");
    const std::filesystem::path model(job.parity_gguf());
    std::error_code error;
    if (!model.is_absolute()) refuse("parity_gguf must be an absolute path on the daemon's host");
    const std::filesystem::path real = std::filesystem::weakly_canonical(model, error);
    bool allowed = false;
    for (const auto& dir : models_dirs) {
      const std::filesystem::path root = std::filesystem::weakly_canonical(dir, error);
      const auto rel = real.lexically_relative(root);
      allowed = allowed || (!rel.empty() && *rel.begin() != "..");
    }
    if (!allowed) refuse("parity_gguf '" + job.parity_gguf() + "' is outside the daemon's --models-dir folders");
    if (!std::filesystem::is_regular_file(real, error) || ::access(real.c_str(), R_OK) != 0)
      refuse("parity_gguf '" + job.parity_gguf() + "' is not a readable file on the daemon's host");
  }
  if (!job.parity_tensors().empty() && job.parity_gguf().empty()) refuse("parity_tensors needs parity_gguf");
  if (job.kind() == v1::JOB_KIND_PARITY && job.parity_shapes() == v1::SHAPE_SET_NONE && job.parity_gguf().empty())
    refuse("a parity job with parity_shapes none has nothing to run (give a shape set or a GGUF file)");
}

constexpr int kMaxCommandWords = 256;
constexpr size_t kMaxCommandBytes = 64 * 1024;

bool valid_variable_name(const std::string& name) {
  static const std::regex pattern("[A-Za-z_][A-Za-z0-9_]{0,127}");
  return std::regex_match(name, pattern);
}

void check_words(const google::protobuf::RepeatedPtrField<std::string>& words, const std::string& what,
                 size_t* bytes) {
  if (words.size() > kMaxCommandWords) refuse(what + " has more than " + std::to_string(kMaxCommandWords) + " words");
  for (const auto& w : words) {
    if (w.find('\0') != std::string::npos) refuse(what + " has a NUL byte in a word");
    *bytes += w.size();
  }
  if (!words.empty() && words.Get(0).empty()) refuse(what + " starts with an empty word");
}

/// A command job's spec (docs/command-mode.md); the token and --allow-commands are checked before.
void check_command(const v1::SubmitHeader& header) {
  const v1::JobSpec& job = header.job();
  const v1::CommandSpec& command = job.command();
  if (!v1::CommandToggle_IsValid(command.toggle()))
    refuse("command toggle " + std::to_string(command.toggle()) + " is not one of env, commands, builds");
  size_t bytes = 0;
  if (command.argv().empty()) refuse("a command job needs a command (argv)");
  check_words(command.argv(), "the command", &bytes);
  check_words(command.argv_b(), "the second command", &bytes);
  check_words(command.output_argv(), "the output command", &bytes);
  for (const auto& [name, value] : command.env()) {
    if (!valid_variable_name(name)) refuse("'" + name + "' is not a variable name");
    bytes += name.size() + value.size();
  }
  if (bytes > kMaxCommandBytes) refuse("the command spec is over " + std::to_string(kMaxCommandBytes) + " bytes");
  const v1::CommandToggle toggle = command.toggle();
  if (toggle == v1::COMMAND_TOGGLE_COMMANDS && command.argv_b().empty())
    refuse("the commands toggle needs arm B's command (argv_b)");
  if (toggle != v1::COMMAND_TOGGLE_COMMANDS && !command.argv_b().empty())
    refuse("argv_b is only for the commands toggle");
  if (toggle == v1::COMMAND_TOGGLE_ENV || toggle == v1::COMMAND_TOGGLE_UNSPECIFIED) {
    if (!command.variable().empty() && !valid_variable_name(command.variable()))
      refuse("'" + command.variable() + "' is not a variable name");
    const std::string variable = command.variable().empty() ? "MINFER_MMQ" : command.variable();
    const std::string a = command.value_a().empty() ? "1" : command.value_a();
    const std::string b = command.value_b().empty() ? "0" : command.value_b();
    if (a == b) refuse("the toggle's two values are the same (" + variable + "=" + a + ")");
  }
  if (toggle == v1::COMMAND_TOGGLE_BUILDS) {
    bool has_placeholder = false;
    for (const auto& w : command.argv()) has_placeholder |= w.find("{build}") != std::string::npos;
    if (!has_placeholder) refuse("the builds toggle needs {build} in the command, where each arm's build goes");
    if (header.size_bytes() <= 0) refuse("the builds toggle needs the candidate build uploaded");
  } else if (header.size_bytes() != 0) {
    refuse("a command job of the " + std::string(words::spec_word(toggle)) + " toggle takes no upload (size_bytes 0)");
  }
  if (const std::string bad = interop::check_reader(command.tokens_per_s());
      !bad.empty() && command.tokens_per_s().format() != v1::OUTPUT_FORMAT_UNSPECIFIED)
    refuse("tok/s reader: " + bad);
  if (command.output().format() != v1::OUTPUT_FORMAT_UNSPECIFIED)
    if (const std::string bad = interop::check_reader(command.output()); !bad.empty()) refuse("output reader: " + bad);
  if (!command.output_argv().empty() && command.output().format() == v1::OUTPUT_FORMAT_UNSPECIFIED)
    refuse("an output command needs an output reader");
  if (command.run_timeout_s() < 0 || command.run_timeout_s() > 24 * 3600) refuse("run_timeout_s must be in [0, 1 day]");
  if (!job.profile().empty() && !valid_build_name(job.profile()))
    refuse("a command job's profile '" + job.profile() + "' must be a plain name");
  if (job.has_custom_profile()) refuse("a command job takes no custom profile");
}

/// The identity of a command job's build row: its name, commit and command, hashed.
std::string command_identity(const v1::SubmitHeader& header) {
  const v1::CommandSpec& command = header.job().command();
  std::string text = "qgate-command\n" + header.build().name() + "\n" + header.build().commit() + "\n" +
                     std::string(words::spec_word(command.toggle())) + "\n";
  for (const auto* argv : {&command.argv(), &command.argv_b(), &command.output_argv()}) {
    for (const auto& w : *argv) text += w + '\0';
    text += "\n";
  }
  const std::map<std::string, std::string> env(command.env().begin(), command.env().end());
  for (const auto& [k, v] : env) text += k + "=" + v + '\0';
  text += command.variable() + "\n" + command.value_a() + "\n" + command.value_b() + "\n";
  return common::sha256_hex(text.data(), text.size());
}

}  // namespace

JobSubmission::JobSubmission(db::Store& store, DaemonHooks& daemon, const JobPolicy& options)
    : store_(store), daemon_(daemon), options_(options) {}

std::optional<db::Build> JobSubmission::validate_header(const v1::SubmitHeader& header) const {
  const auto& build = header.build();
  if (!valid_build_name(build.name()))
    refuse("build name '" + build.name() +
           "' must be 1-128 letters, digits, '.', '_' or '-', not starting with '.' or '-'");
  for (const auto& [field, text, limit] : {std::tuple{"commit", &build.commit(), kMaxCommitBytes},
                                           std::tuple{"branch", &build.branch(), kMaxBranchBytes},
                                           std::tuple{"flags", &build.flags(), kMaxFlagsBytes}})
    if (text->size() > limit)
      refuse(std::string("the build's ") + field + " is " + std::to_string(text->size()) + " bytes; at most " +
             std::to_string(limit) + " are kept");
  const auto& job = header.job();
  if (!v1::JobKind_IsValid(job.kind()) || job.kind() == v1::JOB_KIND_UNSPECIFIED)
    refuse("job kind " + std::to_string(job.kind()) + " is not one of gate, ab, parity, command");
  const bool command = job.kind() == v1::JOB_KIND_COMMAND;
  if (command && !options_.allow_commands)
    throw ApplicationError(ApplicationErrorKind::PermissionDenied,
                           "this qgated does not run commands: start it with --allow-commands (and --auth-token-file)");
  if (!command && job.has_command()) refuse("a command spec is only for command jobs");
  if (job.tokens() < 0 || job.tokens() > kMaxTokens)
    refuse("tokens " + std::to_string(job.tokens()) + " is outside [1, " + std::to_string(kMaxTokens) + "]");
  // The declared size is how the end of an upload is told from a message gRPC could not decode
  // (both end the stream the same way), so it is required.
  if (command) check_command(header);
  else if (header.size_bytes() <= 0) refuse("size_bytes must give the build's size in bytes");
  if (!command && !job.profile().empty() && !profiles::find_builtin_profile(job.profile())) {
    std::string names;
    for (const auto& name : profiles::builtin_profile_names()) names += (names.empty() ? "" : ", ") + name;
    refuse("unknown profile '" + job.profile() + "' (built in: " + names + ")");
  }
  if (job.has_custom_profile()) check_custom_profile(job);
  if (!job.path().empty() && job.path() != "mmq" && job.path() != "f16")
    refuse("path must be mmq or f16, got '" + job.path() + "'");
  check_enums(job);
  check_parity_source(job, options_.models_dirs);
  check_gpu_choice(job, options_);
  const auto& policy = job.policy();
  if (policy.slowdown_threshold() < 0 || policy.slowdown_threshold() >= 1 || !std::isfinite(policy.slowdown_threshold()))
    refuse("slowdown_threshold must be in [0, 1)");
  if (policy.min_pairs() < 0 || policy.max_pairs() < 0 || policy.max_pairs() > kMaxPairs ||
      policy.min_pairs() > kMaxPairs)
    refuse("pairs must be in [0, " + std::to_string(kMaxPairs) + "]");
  if (policy.max_pairs() > 0 && policy.min_pairs() > policy.max_pairs())
    refuse("min_pairs " + std::to_string(policy.min_pairs()) + " is more than max_pairs " +
           std::to_string(policy.max_pairs()));
  if (job.repetitions() < 0 || job.repetitions() > 1000) refuse("repetitions must be in [0, 1000]");
  if (job.timeout_s() < 0 || job.timeout_s() > 30 * 24 * 3600)
    refuse("timeout_s must be in [0, 30 days] (0 = the daemon's --job-timeout)");
  const bool needs_baseline =
      job.kind() == v1::JOB_KIND_GATE || (command && job.command().toggle() == v1::COMMAND_TOGGLE_BUILDS);
  if (!needs_baseline) return std::nullopt;
  if (job.baseline().empty()) refuse(std::string(command ? "the builds toggle" : "a gate job") + " needs a baseline build (name or id)");
  auto baseline = resolve_build(store_, job.baseline());
  if (!baseline) refuse("no build named or numbered '" + job.baseline() + "'");
  return baseline;
}

SubmitOutcome JobSubmission::accept(const v1::SubmitHeader& header, const StoredUpload& upload) {
  std::lock_guard lock(mutex_);
  const std::optional<db::Build> baseline = validate_header(header);
  const auto& metadata = header.build();
  // The same name and commit must mean the same bytes: anything else is a mislabelled build.
  if (!metadata.commit().empty())
    if (auto prior = store_.find_latest_build_by_name(metadata.name());
        prior && prior->commit_sha == metadata.commit() && prior->sha256 != upload.sha256)
      refuse("build '" + metadata.name() + "' at commit " + metadata.commit() +
             " was already submitted with other bytes (" + prior->sha256.substr(0, 12) + ")");
  db::Build build;
  build.sha256 = upload.sha256;
  build.size_bytes = upload.size_bytes;
  build.artifact_path = upload.artifact_path;
  return store_job(header, baseline, std::move(build));
}

bool JobSubmission::takes_no_upload(const v1::SubmitHeader& header) {
  return header.job().kind() == v1::JOB_KIND_COMMAND && header.job().command().toggle() != v1::COMMAND_TOGGLE_BUILDS;
}

SubmitOutcome JobSubmission::accept_command(const v1::SubmitHeader& header) {
  std::lock_guard lock(mutex_);
  const std::optional<db::Build> baseline = validate_header(header);
  if (!takes_no_upload(header)) refuse("this job needs its build uploaded");
  db::Build build;
  build.sha256 = command_identity(header);
  return store_job(header, baseline, std::move(build));
}

SubmitOutcome JobSubmission::store_job(const v1::SubmitHeader& header, const std::optional<db::Build>& baseline,
                                       db::Build build) {
  const auto& metadata = header.build();
  db::JobFilter queued_jobs;
  queued_jobs.state = db::JobState::Queued;
  const std::int64_t queued = store_.count_jobs(queued_jobs);
  if (queued >= options_.max_queued_jobs)
    throw ApplicationError(ApplicationErrorKind::ResourceExhausted,
                           "the queue is full (" + std::to_string(queued) + " jobs)");
  build.name = metadata.name();
  build.commit_sha = metadata.commit();
  build.branch = metadata.branch();
  build.flags = metadata.flags();
  const db::BuildInsert inserted = store_.insert_build(build);

  db::Job job = job_row(header.job());
  job.build_id = inserted.id;
  if (baseline) job.baseline_build_id = baseline->id;
  job.backend = options_.backend;
  job.device = queued_device(header.job());
  SubmitOutcome outcome;
  outcome.job_id = store_.create_job(job);  // committed before the client hears of it
  outcome.build = store_.find_build(inserted.id).value_or(build);
  outcome.build_existed = !inserted.inserted;
  daemon_.job_queued();
  return outcome;
}

}  // namespace qgate::jobs
