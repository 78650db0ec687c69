// The qgate command line (see cli.h): CLI11 definitions of every command, and the handlers that
// call qgated and print. Rules live in options.cpp and text in format.cpp; this file is plumbing.
#include "qgate/client/cli.h"

#include <cmath>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>

#include "qgate/profiles/gguf.h"
#include "qgate/common/weight_types.h"
#include <fmt/format.h>

#include "qgate/client/exit_codes.h"
#include "qgate/client/format.h"
#include "qgate/client/harness_client.h"
#include "qgate/client/dashboard_command.h"
#include "qgate/client/health.h"
#include "qgate/client/json_report.h"
#include "qgate/client/options.h"
#include "qgate/interop/import_file.h"
#include "qgate/interop/llama_bench_export.h"
#include "qgate/v1/record_words.h"
#include "qgate/v1/spec_words.h"
#include "qgate/v1/state_words.h"
#include "qgate_revision.h"

#ifndef QGATE_VERSION
#define QGATE_VERSION "unknown"
#endif

namespace qgate::client {

// The CLI's version as it reports it: the release and the source revision, "0.1.0+<commit>".
constexpr const char* kCliVersion = QGATE_VERSION "+" QGATE_COMMIT;

namespace {

std::int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// The value of `name=` among a test-backend-ops case's params ("type_a=q4_0,m=16,n=1,k=256,..."), or 0.
std::int64_t case_param(const std::string& params, const std::string& name) {
  std::size_t at = 0;
  while (at < params.size()) {
    const std::size_t end = std::min(params.find(',', at), params.size());
    const std::string item = params.substr(at, end - at);
    if (item.rfind(name + "=", 0) == 0) {
      const std::string value = item.substr(name.size() + 1);
      char* rest = nullptr;
      const long long number = std::strtoll(value.c_str(), &rest, 10);
      return rest && *rest == '\0' && !value.empty() ? number : 0;
    }
    at = end + 1;
  }
  return 0;
}

/// A test-backend-ops correctness case as the daemon imports it (a parity case of the build's job).
v1::ExternalCheck external_check(const interop::BackendOpsCheck& check, std::int64_t file_time_ms) {
  using Outcome = interop::BackendOpsCheck::Outcome;
  v1::ExternalCheck c;
  c.set_tool("test-backend-ops");
  c.set_build_commit(check.build_commit);
  c.set_backend(check.backend);
  c.set_op(check.op);
  c.set_params(check.params);
  for (const char* type : {"type_a", "type", "type_src"}) {
    if (const auto it = check.types.find(type); it != check.types.end()) {
      c.set_weight_type(it->second);
      break;
    }
  }
  c.set_m(case_param(check.params, "m"));
  c.set_n(case_param(check.params, "n"));
  c.set_k(case_param(check.params, "k"));
  c.set_outcome(check.outcome == Outcome::Passed ? "passed" : check.outcome == Outcome::Failed ? "incorrect" : "not_supported");
  c.set_error(check.nmse.value_or(0.0));
  c.set_error_bound(check.error_bound.value_or(0.0));
  c.set_message(check.failure);
  c.set_checked_unix_ms(check.test_time_ms.value_or(file_time_ms));
  c.set_line(static_cast<std::int64_t>(check.line));
  return c;
}

// An error that is not a usage mistake or an RPC failure but still ends the command with 3
// (a missing build file, a job that failed). Its text is the whole line after "qgate: ".
class CommandError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct GlobalOptions {
  std::string server;
  bool server_given = false;
  bool json = false;
  double timeout_s = 30.0;
  std::string token_file;
  std::string tls_ca;
};

/// Which daemon of a fleet may take a job (docs/fleet.md); none given = any.
struct GpuRouting {
  std::optional<std::string> model;  // --gpu-model
  std::optional<std::string> uuid;   // --gpu-uuid
  std::vector<std::string> labels;   // --label, each maybe comma-separated
};

struct SubmitOptions {
  std::string gpu;          // --gpu: the GPU (or, with --split-gpus, the pair); empty = any free one
  bool split_gpus = false;  // --split-gpus: the arms on two identical GPUs at once
  GpuRouting routing;
  std::string build_file;
  std::string name;
  std::string commit;
  std::string branch;
  std::string flags;
  std::string kind;
  std::string baseline;
  std::string profile;
  std::string gguf;  // read the profile from this GGUF file's header instead (parity jobs: its tensors)
  std::string tensors;  // parity on these tensors of the GGUF file
  std::string path;
  std::int64_t tokens = 0;
  int max_pairs = 0;
  int min_pairs = 0;
  double threshold = 0;  // policy.slowdown_threshold; 0 = the daemon's default (2%)
  std::string parity_shapes;
  std::string numerics;
  std::string order;
  std::string timing;
  int repetitions = 0;
  std::uint64_t seed = 0;
  std::int64_t job_timeout_s = 0;  // 0 = the daemon's --job-timeout
  bool fresh_process = false;
  bool allow_leaks = false;
  bool wait = false;
  bool no_wait = false;  // `ab` waits unless told not to
};

/// `qgate command`: a program run as two arms (docs/command-mode.md).
struct CommandJobOptions {
  std::string gpu;
  bool split_gpus = false;
  GpuRouting routing;
  std::string name;
  std::string commit;
  std::string branch;
  std::string run;         // the command line of arm A (and B, unless --run-b)
  std::string run_b;       // arm B's command line: the commands toggle
  std::string toggle;      // VAR=a|b (default MINFER_MMQ=1|0)
  std::string build_file;  // the builds toggle: the candidate build, {build} in the command
  std::string baseline;    // ... and the stored baseline build
  std::string tok_s = "llama-bench-json";
  std::string output;      // reader of the output to compare; empty = no identity check
  std::string output_run;  // a command that prints the output after each run
  std::vector<std::string> env;  // K=V added to both arms
  std::string profile;
  std::int64_t tokens = 0;
  int max_pairs = 0;
  int min_pairs = 0;
  double threshold = 0;
  std::string order;
  std::int64_t run_timeout_s = 0;
  std::int64_t job_timeout_s = 0;
  bool wait = false;
};

struct RemeasureOptions {
  std::string gpu;  // the GPU the re-runs take; empty = each job's own choice
  std::int64_t job = 0;
  bool contended = false;
  std::string since;            // with --contended: how far back (default 7d)
  std::string deadline = "12h"; // how long to wait for a quiet window
  bool run_contended = false;   // at the deadline, run anyway instead of expiring
  bool wait = false;
};

/// Reads a GGUF header into the profile message a job carries; tensors that are not GEMMs of a
/// supported type are reported on stderr and left out.
v1::ModelProfile profile_from_gguf(const std::string& path) {
  std::string error;
  const auto stem = std::filesystem::path(path).stem().string();
  auto read = profiles::profile_from_gguf_file(path, "", &error);
  if (!read) throw CommandError(fmt::format("cannot read a profile from {}: {}", path, error));
  v1::ModelProfile out;
  out.set_name(read->profile.name == "gguf" ? stem : read->profile.name);
  for (const auto& g : read->profile.gemms) {
    auto* m = out.add_gemms();
    m->set_type(std::string(quant::traits(g.type).name));
    m->set_od(g.od);
    m->set_k(g.k);
    m->set_count(g.count);
    m->set_role(g.role);
  }
  if (out.gemms().empty()) throw CommandError(fmt::format("{} has no GEMM of a supported weight type", path));
  if (!read->skipped.empty())
    std::cerr << fmt::format("qgate: {}: {} GEMMs in {} entries; {} tensors left out (norms, embeddings, other types)\n",
                             path, read->profile.gemm_count(), out.gemms_size(), read->skipped.size());
  return out;
}

struct ListOptions {
  std::string state;
  std::string name;
  int limit = 0;
  std::string host;  // jobs --host, device --host
};

struct TrendOptions {
  std::string profile;
  std::string type;
  std::string path;
  std::string since;
  std::string build_glob;
  bool include_contended = false;
  bool changes = false;  // trend --changes
  int limit = 0;
  std::int64_t job = 0;   // trend --job: that job's runs, one point each
  bool raw_runs = false;  // export: one point per run
  std::string format;
  std::string output;
  std::string host;  // only runs measured on this host
};

struct ImportOptions {
  std::string file;
  std::string format = "auto";
};

struct CompareOptions {
  std::string a;
  std::string b;
  bool include_contended = false;
  std::string profile;
  std::int64_t tokens = 0;
  std::string type;
  double margin_percent = 0;
  std::string host;
};

class Cli {
 public:
  int run(int argc, char** argv);

 private:
  void define();
  ConnectionOptions connection_options() const;
  HarnessClient connect() const { return HarnessClient(connection_options()); }
  void print_json(const nlohmann::json& value) const { std::cout << value.dump(2) << "\n"; }
  /// Prints `data` in the --json envelope (json_report.h) under `key`, with the daemon's context.
  void print_report(HarnessClient& client, const std::string& key, nlohmann::json data) const {
    print_json(json_report(daemon_context(client), key, std::move(data)));
  }
  /// The context block: one GetDevice call; a daemon that does not answer it leaves its facts empty.
  static ReportContext daemon_context(HarnessClient& client);

  int cmd_submit(bool ab_command);
  int cmd_command();
  int cmd_watch(std::int64_t job_id);
  int cmd_jobs();
  int cmd_show();
  int cmd_cancel();
  int cmd_remeasure();
  int cmd_builds();
  int cmd_device();
  int cmd_trend();
  /// Under --json, the error that ends the command as a document on stdout.
  void print_json_error(const std::string& message) const;
  /// " (did you mean --state?)" after a parse error over a flag a known one is a typo away from.
  std::string typo_hint() const;
  int cmd_regressions();
  int cmd_compare();
  int cmd_export();
  int cmd_import();
  int cmd_health();
  DashboardCommandOptions dashboard_;

  int watch_until_done(HarnessClient& client, std::int64_t job_id);
  v1::QueryTrendRequest trend_request(std::int64_t default_since_ms) const;
  v1::QueryChangesRequest changes_request(std::int64_t default_since_ms, bool slowdowns_only) const;

  CLI::App app_{"qgate: parity and performance gate for quantized GEMM kernels; the client of "
                "qgated. Exit codes: 0 ok/PASS, 1 FAIL, 2 INCONCLUSIVE, 3 error, 4 expired (no quiet window).",
                "qgate"};
  GlobalOptions global_;
  SubmitOptions submit_;
  CommandJobOptions command_;
  ListOptions list_;
  TrendOptions trend_;
  CompareOptions compare_;
  ImportOptions import_;
  RemeasureOptions remeasure_;
  std::int64_t job_id_ = 0;
  std::string health_service_;
  std::map<const CLI::App*, std::function<int()>> handlers_;
};

// Whole-number checks with a message that names the text (CLI11's PositiveNumber prints the
// range as a 300-digit double).
CLI::Validator whole_number(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& text) -> std::string {
        const bool digits = !text.empty() && text.size() <= 18 &&
                            text.find_first_not_of("0123456789") == std::string::npos;
        if (!digits || (!allow_zero && std::stoll(text) == 0))
          return "'" + text + "' is not a " + (allow_zero ? "whole number" : "positive whole number");
        return "";
      },
      allow_zero ? "N>=0" : "N>0");
}

// A slowdown threshold: a finite fraction in [0, 0.99]. CLI11's Range lets NaN through (every
// comparison with NaN is false), and a NaN threshold read as "not given" became the default.
CLI::Validator slowdown_fraction() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          std::size_t used = 0;
          const double value = std::stod(text, &used);
          if (used == text.size() && std::isfinite(value) && value >= 0 && value <= 0.99) return "";
        } catch (const std::exception&) {
        }
        return "'" + text + "' is not a fraction in [0, 0.99] (0.02 is a 2% slowdown)";
      },
      "FRACTION");
}

CLI::Validator positive_seconds() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          std::size_t used = 0;
          const double value = std::stod(text, &used);
          if (used == text.size() && value > 0 && value < 1e6) return "";
        } catch (const std::exception&) {
        }
        return "'" + text + "' is not a number of seconds above 0";
      },
      "SECONDS");
}

/// The GPU a job runs on (qgated --gpus; docs/two-gpus.md), and which daemon of a fleet may take it
/// (docs/fleet.md).
void add_gpu_options(CLI::App* sub, std::string& gpu, bool& split, GpuRouting& routing) {
  sub->add_option("--gpu", gpu,
                  "run on this GPU (an ordinal qgated serves; default: the first one free); with --split-gpus, "
                  "the pair, e.g. 0,1");
  sub->add_flag("--split-gpus", split,
                "run the two arms at once on two identical GPUs, swapping GPUs every pair; judged on blocks "
                "that cancel the GPUs' own speed, against the pair's A/A calibration");
  sub->add_option_function<std::string>(
      "--gpu-model", [&routing](const std::string& model) { routing.model = model; },
      "only a GPU of this model may take the job, matched against the words of its name in any case, "
      "e.g. H200 or \"RTX 4090\" (a fleet sharing one database: any daemon with one)");
  sub->add_option_function<std::string>(
      "--gpu-uuid", [&routing](const std::string& uuid) { routing.uuid = uuid; },
      "only the GPU of this uuid may take the job (GPU-...)");
  sub->add_option("--label", routing.labels,
                  "only a daemon carrying this label (qgated --label) may take the job; repeatable or "
                  "comma-separated, a daemon must carry every one")
      ->allow_extra_args(false);
}

/// A host filter of a read command: the request's host field ("" = every host).
void add_host_option(CLI::App* sub, std::string& host, const std::string& what) {
  sub->add_option("--host", host, what + " (a fleet sharing one database; default: every host)");
}

/// "an H200 GPU with label rack2" for the line a submit prints, when the job was given a GPU choice
/// (--gpu, --split-gpus, --gpu-model, --gpu-uuid, --label); "" for any GPU free.
std::string chosen_gpu(const v1::JobSpec& spec) {
  const bool chosen = spec.gpus_size() > 0 || spec.split_gpus() || !format_gpu_routing(spec).empty();
  return chosen ? format_gpu_choice(spec) : "";
}

/// Sets a spec's GPU choice from --gpu and --split-gpus.
void set_gpu_choice(v1::JobSpec* spec, const std::string& gpu, bool split) {
  spec->set_split_gpus(split);
  if (!gpu.empty())
    for (int ordinal : parse_gpu_choice(gpu, split)) spec->add_gpus(ordinal);
}

void add_submit_options(CLI::App* sub, SubmitOptions& o, bool ab_command) {
  sub->add_option("--build", o.build_file, "kernel build (.so) to upload")->required();
  sub->add_option("--name", o.name, "build name: letters, digits, '.', '_', '-'")->required();
  sub->add_option("--profile", o.profile, "model profile (default: the backend's default)");
  sub->add_option("--gguf", o.gguf,
                  "take the profile from this GGUF file's header (tensor names, types, shapes); with --kind "
                  "parity or --tensors, run parity on the file's own blocks (the daemon reads the same path)");
  sub->add_option("--tensors", o.tensors, "parity on these tensors of the --gguf file: globs, e.g. 'blk.0.*'");
  sub->add_option("--tokens", o.tokens, "tokens per run (default: the profile's)")
      ->check(whole_number(false));
  sub->add_option("--max-pairs", o.max_pairs, "pair budget (default 40)")
      ->check(whole_number(false));
  sub->add_option("--min-pairs", o.min_pairs, "never decide on fewer pairs (default 4)")
      ->check(whole_number(false));
  sub->add_option("--threshold", o.threshold, "slowdown that fails the gate, as a fraction (default 0.02)")
      ->check(slowdown_fraction());
  sub->add_option("--parity-shapes", o.parity_shapes,
                  "parity sweep: standard (default), quick (without the 7B shape) or none")
      ->check(CLI::IsMember(qgate::shape_set_words()));
  sub->add_option("--numerics", o.numerics,
                  "the numerics the build is judged in: qgate, ggml, ggml-cpu or unknown (default: what the "
                  "build declares through qgate_build_numerics, else qgate; docs/parity.md)")
      ->check(CLI::IsMember(words::numerics_words()));
  sub->add_option("--order", o.order, "A/B run order: abba (default) or sequential (for experiments)")
      ->check(CLI::IsMember(qgate::run_order_words()));
  sub->add_option("--timing", o.timing,
                  "what a run's tok/s times: gemm (default, each GEMM's median) or pass (whole passes, "
                  "as an engine runs them; shows a co-tenant's time slices)")
      ->check(CLI::IsMember(qgate::timing_mode_words()));
  sub->add_option("--reps", o.repetitions, "timed repetitions per GEMM (or per pass) per run")
      ->check(whole_number(false));
  sub->add_option("--commit", o.commit, "source commit of the build");
  sub->add_option("--branch", o.branch, "source branch of the build");
  sub->add_option("--flags", o.flags, "build flags, for the record");
  sub->add_flag("--allow-leaks", o.allow_leaks,
                "a build that keeps memory is still LEAKED, but the leak does not fail the gate");
  sub->add_option("--job-timeout", o.job_timeout_s,
                  "seconds the whole job may take before it ends TIMEOUT (default: the daemon's --job-timeout)")
      ->check(whole_number(false));
  add_gpu_options(sub, o.gpu, o.split_gpus, o.routing);
  if (ab_command) {
    sub->add_flag("--no-wait", o.no_wait, "print the job id and return at once");
    return;
  }
  sub->add_option("--kind", o.kind,
                  "gate, ab or parity (default: gate with --baseline, else ab)");
  sub->add_option("--baseline", o.baseline, "build name or id to gate against (implies gate)");
  sub->add_option("--path", o.path, "gate jobs: the path both builds run")
      ->check(CLI::IsMember({"mmq", "f16"}));
  sub->add_option("--seed", o.seed, "input seed (default: qgate's fixed seed)");
  sub->add_flag("--fresh-process", o.fresh_process, "a new worker process per run");
  sub->add_flag("--wait", o.wait, "watch the job and exit with its verdict");
}

void add_command_options(CLI::App* sub, CommandJobOptions& o) {
  add_gpu_options(sub, o.gpu, o.split_gpus, o.routing);
  sub->add_option("--name", o.name, "name of what is measured (a build name: letters, digits, '.', '_', '-')")
      ->required();
  sub->add_option("--commit", o.commit, "source commit of what is measured");
  sub->add_option("--branch", o.branch, "source branch");
  sub->add_option("--run", o.run,
                  "the command, split like a shell would (no shell runs it); a relative program path is made "
                  "absolute here. Example: \"./minfer bench --prompt 2048 --json\"")
      ->required();
  sub->add_option("--toggle", o.toggle, "the arms' difference as VAR=a|b (default MINFER_MMQ=1|0)");
  sub->add_option("--run-b", o.run_b, "arm B runs this command instead (arm A runs --run)");
  sub->add_option("--build", o.build_file, "candidate build (.so): {build} in the command becomes each arm's build");
  sub->add_option("--baseline", o.baseline, "with --build: the stored build arm B runs");
  sub->add_option("--tok-s", o.tok_s,
                  "where tok/s is in stdout: llama-bench-json[:FIELD] (default, avg_ts), llama-bench-jsonl[:FIELD], "
                  "json-pointer:/PATH or regex:EXPR")
      ->capture_default_str();
  sub->add_option("--output", o.output,
                  "where the output to compare across arms is (e.g. llama-bench-json:tokens or json-pointer:/tokens); "
                  "the arms must match token for token");
  sub->add_option("--output-run", o.output_run, "a command that prints the output after each run (read with --output)");
  sub->add_option("--env", o.env, "K=V added to both arms' clean environment (repeatable)");
  sub->add_option("--profile", o.profile, "series name for trend (default: command)");
  sub->add_option("--tokens", o.tokens, "tokens per run, for the record")->check(whole_number(false));
  sub->add_option("--max-pairs", o.max_pairs, "pair budget (default 40)")->check(whole_number(false));
  sub->add_option("--min-pairs", o.min_pairs, "never decide on fewer pairs (default 4)")->check(whole_number(false));
  sub->add_option("--threshold", o.threshold, "slowdown that fails, as a fraction (default 0.02)")
      ->check(slowdown_fraction());
  sub->add_option("--order", o.order, "abba (default) or sequential")->check(CLI::IsMember(qgate::run_order_words()));
  sub->add_option("--run-timeout", o.run_timeout_s, "seconds one run may take (default: the daemon's --run-timeout)")
      ->check(whole_number(false));
  sub->add_option("--job-timeout", o.job_timeout_s, "seconds the whole job may take")->check(whole_number(false));
  sub->add_flag("--wait", o.wait, "watch the job and exit with its verdict");
}

/// argv[0] as the daemon will find it: a relative path made absolute against this directory.
std::vector<std::string> absolute_program(std::vector<std::string> argv) {
  if (argv.front().find('/') != std::string::npos && argv.front().front() != '/')
    argv.front() = std::filesystem::absolute(argv.front()).lexically_normal().string();
  return argv;
}

void Cli::define() {
  app_.require_subcommand(1);
  // Global options may also follow the command (`qgate jobs --json`); subcommands made after this
  // inherit it.
  app_.fallthrough();
  app_.set_version_flag("--version", std::string(kCliVersion));
  auto* server = app_.add_option(
      "--server", global_.server,
      "qgated address: unix:///path, /path or host:port (default: $QGATE_SERVER, else the "
      "per-user socket)");
  server->each([this](const std::string&) { global_.server_given = true; });
  app_.add_flag("--json", global_.json, "machine-readable output");
  app_.add_option("--token-file", global_.token_file, "file holding qgated's auth token (or set QGATE_TOKEN)");
  app_.add_option("--tls-ca", global_.tls_ca, "CA certificate that qgated's TLS certificate must chain to (or QGATE_TLS_CA)");
  app_.add_option("--timeout", global_.timeout_s, "deadline of each call, seconds (default 30)")
      ->check(positive_seconds());

  auto* submit = app_.add_subcommand("submit", "upload a build and queue a job");
  add_submit_options(submit, submit_, false);
  handlers_[submit] = [this] { return cmd_submit(false); };

  auto* ab = app_.add_subcommand("ab", "MMQ vs f16 of one build, per weight type (waits)");
  add_submit_options(ab, submit_, true);
  handlers_[ab] = [this] { return cmd_submit(true); };

  auto* command = app_.add_subcommand(
      "command", "run a program as two interleaved arms and gate its tok/s (qgated --allow-commands, and a token)");
  add_command_options(command, command_);
  handlers_[command] = [this] { return cmd_command(); };

  auto* jobs = app_.add_subcommand("jobs", "list jobs, newest first");
  jobs->add_option("--state", list_.state, "only jobs in this state")->check(CLI::IsMember(words::job_state_words()));
  jobs->add_option("--limit", list_.limit, "at most this many (default 50)")
      ->check(whole_number(true));
  add_host_option(jobs, list_.host, "only jobs claimed by this host's daemons");
  handlers_[jobs] = [this] { return cmd_jobs(); };

  auto* show = app_.add_subcommand("show", "a job: spec, progress, verdict report");
  show->add_option("job", job_id_, "job id")->required()->check(whole_number(false));
  handlers_[show] = [this] { return cmd_show(); };

  auto* watch = app_.add_subcommand("watch", "follow a job; exit with its verdict");
  watch->add_option("job", job_id_, "job id")->required()->check(whole_number(false));
  handlers_[watch] = [this] { return cmd_watch(job_id_); };

  auto* cancel = app_.add_subcommand("cancel", "cancel a queued or running job");
  cancel->add_option("job", job_id_, "job id")->required()->check(whole_number(false));
  handlers_[cancel] = [this] { return cmd_cancel(); };

  auto* remeasure = app_.add_subcommand(
      "remeasure", "re-run a job (or every contended job) once the GPU is quiet; exit 4 if none came in time");
  remeasure->add_option("job", remeasure_.job, "the job to re-measure")->check(whole_number(false));
  remeasure->add_flag("--contended", remeasure_.contended, "every finished job that had a contended run");
  remeasure->add_option("--since", remeasure_.since, "with --contended: how far back, Ns/Nm/Nh/Nd/Nw (default 7d)");
  remeasure->add_option("--deadline", remeasure_.deadline, "wait this long for a quiet window (default 12h)");
  remeasure->add_flag("--run-contended", remeasure_.run_contended,
                      "at the deadline run anyway, marked contended, instead of expiring");
  remeasure->add_flag("--wait", remeasure_.wait, "follow the re-measure jobs; exit with the worst verdict");
  remeasure->add_option("--gpu", remeasure_.gpu, "re-run on this GPU (default: as each job was submitted)");
  handlers_[remeasure] = [this] { return cmd_remeasure(); };

  auto* builds = app_.add_subcommand("builds", "list uploaded builds");
  builds->add_option("--name", list_.name, "only builds of this exact name");
  builds->add_option("--limit", list_.limit, "at most this many")->check(whole_number(true));
  handlers_[builds] = [this] { return cmd_builds(); };

  auto* device = app_.add_subcommand(
      "device", "every GPU the daemon serves: version, queue and co-tenant state; on a shared store, every "
                "other daemon's GPUs as last published");
  add_host_option(device, list_.host, "only this host's GPUs");
  handlers_[device] = [this] { return cmd_device(); };

  auto* health = app_.add_subcommand(
      "health", "gRPC health check (grpc.health.v1): exit 0 when qgated is SERVING, 1 when it answers "
                "otherwise, 3 when it does not answer; for container and Kubernetes probes");
  health->add_option("--service", health_service_,
                     "ask about one service, e.g. qgate.v1.Harness (default: the daemon as a whole)");
  handlers_[health] = [this] { return cmd_health(); };

  auto* trend = app_.add_subcommand("trend", "tok/s history per build, with sparklines");
  trend->add_option("--profile", trend_.profile, "model profile")->required();
  trend->add_option("--type", trend_.type, "weight type (e.g. q4_K)");
  trend->add_option("--path", trend_.path,
                    "one series' path: mmq, f16, a command arm (MINFER_MMQ=1) or an imported one (pp, tg) "
                    "(default all)");
  trend->add_option("--since", trend_.since, "how far back: Ns, Nm, Nh, Nd or Nw (default 30d)");
  trend->add_option("--build-glob", trend_.build_glob, "build names matching, e.g. 'mmq-*'");
  trend->add_flag("--include-contended", trend_.include_contended,
                  "also runs measured under co-tenant load");
  trend->add_option("--limit", trend_.limit, "at most this many points")
      ->check(whole_number(true));
  trend->add_option("--job", trend_.job, "that job's runs, one row each, instead of per-build points")
      ->check(whole_number(false));
  trend->add_flag("--changes", trend_.changes,
                  "also where each series' speed moved (change points over its builds' quiet runs)");
  add_host_option(trend, trend_.host, "only runs measured on this host");
  handlers_[trend] = [this] { return cmd_trend(); };

  auto* regressions = app_.add_subcommand(
      "regressions", "changes that slowed a series down, across series (change points over quiet runs)");
  regressions->add_option("--since", trend_.since, "how far back: Ns, Nm, Nh, Nd or Nw (default 30d)");
  regressions->add_option("--profile", trend_.profile, "only this model profile");
  regressions->add_option("--type", trend_.type, "only this weight type (e.g. q4_K)");
  regressions->add_option("--path", trend_.path, "one series' path, as for trend (default all)");
  regressions->add_option("--build-glob", trend_.build_glob, "build names matching, e.g. 'mmq-*'");
  add_host_option(regressions, trend_.host, "only runs measured on this host");
  handlers_[regressions] = [this] { return cmd_regressions(); };

  auto* compare = app_.add_subcommand(
      "compare",
      "two builds' history, per matched series (profile, tokens, backend, GPU, path): unpaired across "
      "jobs, paired within a job that ran both; refuses (exit 3) when nothing is comparable");
  compare->add_option("a", compare_.a, "build A (name or id)")->required();
  compare->add_option("b", compare_.b, "build B (name or id)")->required();
  compare->add_option("--profile", compare_.profile, "only this model profile");
  compare->add_option("--tokens", compare_.tokens, "only runs of this many tokens")->check(whole_number(false));
  compare->add_option("--type", compare_.type, "only runs that carry this weight type (e.g. q4_K)");
  compare->add_option("--margin", compare_.margin_percent, "SAME band in percent (default 2)")
      ->check(CLI::Range(0.01, 49.0));
  compare->add_flag("--include-contended", compare_.include_contended,
                    "also runs measured under co-tenant load");
  add_host_option(compare, compare_.host, "only runs measured on this host");
  handlers_[compare] = [this] { return cmd_compare(); };

  auto* exp = app_.add_subcommand("export", "trend points as JSON or CSV");
  exp->add_option("--format", trend_.format, "json, csv or llama-bench-sql (prefill runs as llama-bench's SQL)")
      ->required()
      ->check(CLI::IsMember({"json", "csv", "llama-bench-sql"}));
  exp->add_option("--profile", trend_.profile, "model profile (default all)");
  exp->add_option("--since", trend_.since, "how far back: Ns, Nm, Nh, Nd or Nw (default all)");
  exp->add_flag("--include-contended", trend_.include_contended,
                "also runs measured under co-tenant load");
  exp->add_option("--output", trend_.output, "write here instead of stdout");
  add_host_option(exp, trend_.host, "only runs measured on this host");
  handlers_[exp] = [this] { return cmd_export(); };

  auto* imp = app_.add_subcommand(
      "import", "store llama-bench or test-backend-ops results as external builds, beside qgate's runs");
  imp->add_option("file", import_.file, "the results file")->required();
  imp->add_option("--format", import_.format, "auto (default) or one of the formats")
      ->check(CLI::IsMember(interop::import_formats()));
  handlers_[imp] = [this] { return cmd_import(); };

  auto* dashboard = app_.add_subcommand(
      "dashboard", "write the dashboard (page, chart libraries and the daemon's data) to a folder that opens from disk");
  dashboard->add_option("--out", dashboard_.out_dir, "the folder to write")->required();
  dashboard->add_option("--jobs", dashboard_.jobs, "the newest jobs to include, each with its A/B, parity and co-tenant views")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  dashboard->add_option("--assets", dashboard_.assets_dir,
                        "the dashboard's files (default: <qgate's dir>/../share/qgate/dashboard)");
  handlers_[dashboard] = [this] { return write_dashboard_snapshot(connection_options(), dashboard_); };
}

ReportContext Cli::daemon_context(HarnessClient& client) {
  try {
    return report_context(client.get_device(), kCliVersion);
  } catch (const std::exception& e) {
    return report_context_without_daemon(kCliVersion, e.what());
  }
}

ConnectionOptions Cli::connection_options() const {
  const std::string address = resolve_server_address(
      global_.server_given ? std::optional<std::string>(global_.server) : std::nullopt,
      std::getenv("QGATE_SERVER"));
  ConnectionOptions options;
  options.address = normalize_address(address);
  options.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(global_.timeout_s * 1000));
  // The token: --token-file, else QGATE_TOKEN. The CA: --tls-ca, else QGATE_TLS_CA.
  auto read_file = [](const std::string& path, const char* what) {
    std::ifstream in(path);
    if (!in) throw CommandError(fmt::format("cannot read the {} file {}", what, path));
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  if (!global_.token_file.empty()) options.token = read_file(global_.token_file, "token");
  else if (const char* t = std::getenv("QGATE_TOKEN")) options.token = t;
  while (!options.token.empty() && (options.token.back() == '\n' || options.token.back() == '\r' || options.token.back() == ' '))
    options.token.pop_back();
  std::string ca = global_.tls_ca;
  if (ca.empty())
    if (const char* c = std::getenv("QGATE_TLS_CA")) ca = c;
  if (!ca.empty()) options.tls_ca_pem = read_file(ca, "TLS CA certificate");
  return options;
}

int Cli::cmd_health() {
  const HealthReport report = check_health(connection_options(), health_service_);
  const int code = health_exit_code(report.state);
  if (global_.json) {
    const char* state = report.state == HealthState::Serving          ? "SERVING"
                        : report.state == HealthState::NotServing     ? "NOT_SERVING"
                        : report.state == HealthState::ServiceUnknown ? "SERVICE_UNKNOWN"
                                                                      : "UNREACHABLE";
    // No context block: a probe must not depend on a second call.
    print_json({{"schema_version", kJsonSchemaVersion},
                {"health", {{"service", health_service_}, {"status", state}, {"message", report.line}}}});
  } else {
    (code == kExitOk ? std::cout : std::cerr) << "qgate: " << report.line << "\n";
  }
  return code;
}

// ---- submit, ab, watch ----

int Cli::cmd_submit(bool ab_command) {
  SubmitOptions& o = submit_;
  // Everything checkable here is checked before a connection is made or a byte is read.
  check_build_name(o.name);
  const v1::JobKind kind = ab_command ? v1::JOB_KIND_AB : resolve_kind(o.kind, o.baseline);
  v1::JobSpec routing;
  set_gpu_routing(&routing, o.routing.model, o.routing.uuid, o.routing.labels);
  std::error_code ec;
  const auto status = std::filesystem::status(o.build_file, ec);
  if (!std::filesystem::exists(status))
    throw CommandError(fmt::format("build file {} does not exist", o.build_file));
  if (!std::filesystem::is_regular_file(status))
    throw CommandError(fmt::format("build file {} is not a regular file", o.build_file));
  if (std::filesystem::file_size(o.build_file, ec) == 0 || ec)
    throw CommandError(fmt::format("build file {} is empty", o.build_file));
  if (::access(o.build_file.c_str(), R_OK) != 0)
    throw CommandError(fmt::format("build file {} is not readable", o.build_file));

  v1::SubmitHeader header;
  auto* meta = header.mutable_build();
  meta->set_name(o.name);
  meta->set_commit(o.commit);
  meta->set_branch(o.branch);
  meta->set_flags(o.flags);
  auto* spec = header.mutable_job();
  spec->set_kind(kind);
  spec->set_profile(o.profile);
  if (!o.tensors.empty() && o.gguf.empty()) throw CommandError("--tensors needs --gguf FILE");
  if (!o.gguf.empty() && (kind == v1::JOB_KIND_PARITY || !o.tensors.empty())) {
    spec->set_parity_gguf(std::filesystem::absolute(o.gguf).string());
    spec->set_parity_tensors(o.tensors);
  }
  if (!o.gguf.empty() && kind != v1::JOB_KIND_PARITY) {
    if (!o.profile.empty()) throw CommandError("give --profile or --gguf, not both");
    *spec->mutable_custom_profile() = profile_from_gguf(o.gguf);
  }
  spec->set_tokens(o.tokens);
  spec->set_baseline(o.baseline);
  spec->set_fresh_process(o.fresh_process);
  spec->set_repetitions(o.repetitions);
  spec->set_path(o.path);
  spec->set_seed(o.seed);
  spec->set_timeout_s(o.job_timeout_s);
  // Only a given budget goes in: an absent policy lets the server apply all of its defaults.
  if (o.max_pairs > 0) spec->mutable_policy()->set_max_pairs(o.max_pairs);
  if (o.threshold > 0) spec->mutable_policy()->set_slowdown_threshold(o.threshold);
  if (o.min_pairs > 0) spec->mutable_policy()->set_min_pairs(o.min_pairs);
  if (o.allow_leaks) spec->mutable_policy()->set_allow_leaks(true);
  // The words were checked by the option parser (IsMember); unset ones stay UNSPECIFIED.
  if (!o.parity_shapes.empty()) spec->set_parity_shapes(words::shape_set_from_word(o.parity_shapes).value());
  if (!o.numerics.empty())
    spec->set_numerics(words::numerics_from_word(o.numerics).value());  // checked by the option parser
  if (!o.order.empty()) spec->set_order(words::run_order_from_word(o.order).value());
  if (!o.timing.empty()) spec->set_timing(words::timing_mode_from_word(o.timing).value());
  set_gpu_choice(spec, o.gpu, o.split_gpus);
  spec->MergeFrom(routing);
  const std::string where = chosen_gpu(*spec);

  HarnessClient client = connect();
  const v1::SubmitBuildResponse response = client.submit_build(std::move(header), o.build_file);
  const bool wait = ab_command ? !o.no_wait : o.wait;
  if (!wait) {
    if (global_.json) {
      print_report(client, "submission", to_json(response));
    } else {
      std::cout << response.job_id() << "\n";
      if (!where.empty()) std::cerr << fmt::format("job {} queued to run on {}\n", response.job_id(), where);
    }
    return kExitOk;
  }
  std::cerr << fmt::format("submitted job {}: build {} (sha256 {}{}){}\n", response.job_id(),
                           response.build().metadata().name(),
                           response.build().sha256().substr(0, 12),
                           response.build_existed() ? ", uploaded before" : "",
                           where.empty() ? "" : ", to run on " + where);
  return watch_until_done(client, response.job_id());
}

int Cli::cmd_command() {
  const CommandJobOptions& o = command_;
  check_build_name(o.name);
  v1::SubmitHeader header;
  set_gpu_routing(header.mutable_job(), o.routing.model, o.routing.uuid, o.routing.labels);
  header.mutable_build()->set_name(o.name);
  header.mutable_build()->set_commit(o.commit);
  header.mutable_build()->set_branch(o.branch);
  v1::JobSpec* spec = header.mutable_job();
  spec->set_kind(v1::JOB_KIND_COMMAND);
  spec->set_profile(o.profile);
  spec->set_tokens(o.tokens);
  spec->set_timeout_s(o.job_timeout_s);
  if (o.max_pairs > 0) spec->mutable_policy()->set_max_pairs(o.max_pairs);
  if (o.min_pairs > 0) spec->mutable_policy()->set_min_pairs(o.min_pairs);
  if (o.threshold > 0) spec->mutable_policy()->set_slowdown_threshold(o.threshold);
  if (!o.order.empty()) spec->set_order(words::run_order_from_word(o.order).value());
  set_gpu_choice(spec, o.gpu, o.split_gpus);
  v1::CommandSpec* command = spec->mutable_command();
  for (const auto& w : absolute_program(split_command_line(o.run))) command->add_argv(w);
  const int toggles = int(!o.toggle.empty()) + int(!o.run_b.empty()) + int(!o.build_file.empty());
  if (toggles > 1) throw UsageError("give one of --toggle, --run-b and --build: they are three ways the arms differ");
  if (!o.baseline.empty() && o.build_file.empty()) throw UsageError("--baseline goes with --build");
  if (!o.run_b.empty()) {
    command->set_toggle(v1::COMMAND_TOGGLE_COMMANDS);
    for (const auto& w : absolute_program(split_command_line(o.run_b))) command->add_argv_b(w);
  } else if (!o.build_file.empty()) {
    if (o.baseline.empty()) throw UsageError("--build needs --baseline BUILD for arm B");
    if (o.run.find("{build}") == std::string::npos)
      throw UsageError("--build needs {build} in --run, where each arm's build goes");
    command->set_toggle(v1::COMMAND_TOGGLE_BUILDS);
    spec->set_baseline(o.baseline);
  } else if (!o.toggle.empty()) {
    parse_env_toggle(o.toggle, command);
  } else {
    command->set_toggle(v1::COMMAND_TOGGLE_ENV);
  }
  *command->mutable_tokens_per_s() = parse_output_reader(o.tok_s);
  if (!o.output.empty()) *command->mutable_output() = parse_output_reader(o.output);
  if (!o.output_run.empty()) {
    if (o.output.empty()) throw UsageError("--output-run needs --output to say how to read what it prints");
    for (const auto& w : absolute_program(split_command_line(o.output_run))) command->add_output_argv(w);
  }
  for (const std::string& kv : o.env) {
    const std::size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("--env: '" + kv + "' is not K=V");
    (*command->mutable_env())[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  command->set_run_timeout_s(o.run_timeout_s);

  const std::string where = chosen_gpu(*spec);
  HarnessClient client = connect();
  const v1::SubmitBuildResponse response = client.submit_build(std::move(header), o.build_file);
  if (!o.wait) {
    if (global_.json) {
      print_report(client, "submission", to_json(response));
    } else {
      std::cout << response.job_id() << "\n";
      if (!where.empty()) std::cerr << fmt::format("job {} queued to run on {}\n", response.job_id(), where);
    }
    return kExitOk;
  }
  std::cerr << fmt::format("submitted command job {}: {} (build {}){}\n", response.job_id(), o.name,
                           response.build().sha256().substr(0, 12), where.empty() ? "" : ", to run on " + where);
  return watch_until_done(client, response.job_id());
}

int Cli::cmd_watch(std::int64_t job_id) {
  HarnessClient client = connect();
  return watch_until_done(client, job_id);
}

namespace {

// Columns of the terminal on stderr; 0 when unknown. A progress line wider than this would wrap
// and break the in-place redraw.
std::size_t terminal_columns() {
  winsize ws{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0) return ws.ws_col;
  return 0;
}

std::string cut_to_width(const std::string& text, std::size_t width) {
  if (width == 0 || display_width(text) <= width) return text;
  std::string out;
  std::size_t seen = 0;
  for (const char c : text) {
    const bool starts_char = (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    if (starts_char && ++seen > width) break;
    out += c;
  }
  return out;
}

}  // namespace

int Cli::watch_until_done(HarnessClient& client, std::int64_t job_id) {
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  const std::size_t columns = tty ? terminal_columns() : 0;
  std::size_t drawn = 0;  // width of the line now on screen, to blank what a shorter one leaves
  auto end_line = [&] {
    if (drawn > 0) std::cerr << "\n";
    drawn = 0;
  };
  try {
    client.watch_job(job_id, [&](const v1::JobEvent& event) {
      std::string line = progress_line(job_id, event.state(), event.progress());
      if (!event.message().empty() && event.message() != event.progress().message())
        line += " - " + event.message();
      if (!tty) {
        std::cerr << line << "\n";
        return;
      }
      line = cut_to_width(line, columns > 0 ? columns - 1 : 0);
      const std::size_t width = display_width(line);
      std::cerr << "\r" << line << std::string(drawn > width ? drawn - width : 0, ' ')
                << std::flush;
      drawn = std::max<std::size_t>(width, 1);
    });
  } catch (...) {
    end_line();  // the error line must not land on the end of the progress line
    throw;
  }
  end_line();

  const v1::Job job = client.get_job(job_id);
  if (global_.json) {
    print_report(client, "job", to_json(job));
  } else if (job.state() == v1::JOB_STATE_DONE) {
    if (job.spec().kind() == v1::JOB_KIND_AB)
      std::cout << fmt::format("job {}: A/B of build {}: arm A = MMQ (MINFER_MMQ=1), arm B = f16 "
                               "(MINFER_MMQ=0)\n",
                               job.id(), job.build().metadata().name());
    else
      std::cout << fmt::format("job {} ({}) of build {}\n", job.id(), words::spec_word(job.spec().kind()),
                               job.build().metadata().name());
    std::cout << format_verdict_report(job.verdict(), job.spec().kind(), job.spec().timing());
  }
  switch (job.state()) {
    case v1::JOB_STATE_DONE:
      if (job.verdict().verdict() == v1::VERDICT_UNSPECIFIED)
        throw CommandError(fmt::format("job {} finished without a verdict", job_id));
      return exit_code_for(job);
    case v1::JOB_STATE_FAILED:
      throw CommandError(fmt::format("job {} failed{}: {}", job_id, disposition_suffix(job),
                                     job.error().empty() ? "no reason given" : job.error()));
    case v1::JOB_STATE_CANCELLED:
      throw CommandError(fmt::format("job {} was cancelled", job_id));
    case v1::JOB_STATE_EXPIRED:
      std::cerr << fmt::format("qgate: job {} {}\n", job_id, job.error());
      return kExitExpired;
    default:
      throw CommandError(fmt::format("job {} stream ended while the job is {}", job_id,
                                     state_name(job.state())));
  }
}

// ---- read commands ----

int Cli::cmd_jobs() {
  v1::ListJobsRequest request;
  request.set_state(parse_state(list_.state));
  request.set_limit(list_.limit);
  request.set_host(list_.host);
  HarnessClient client = connect();
  const auto response = client.list_jobs(request);
  if (global_.json) {
    print_report(client, "jobs", to_json(response)["jobs"]);
  } else if (response.jobs_size() == 0) {
    std::cout << (list_.host.empty() ? std::string("no jobs\n") : fmt::format("no jobs of host {}\n", list_.host));
  } else {
    std::cout << format_jobs_table({response.jobs().begin(), response.jobs().end()},
                                   now_unix_ms());
  }
  return kExitOk;
}

int Cli::cmd_show() {
  HarnessClient client = connect();
  const v1::Job job = client.get_job(job_id_);
  if (global_.json)
    print_report(client, "job", to_json(job));
  else
    std::cout << format_job_details(job, now_unix_ms());
  return kExitOk;
}

int Cli::cmd_cancel() {
  HarnessClient client = connect();
  const v1::Job job = client.cancel_job(job_id_);
  if (global_.json)
    print_report(client, "job", to_json(job));
  else
    std::cout << fmt::format("job {}: {}\n", job.id(), state_name(job.state()));
  return kExitOk;
}

int Cli::cmd_remeasure() {
  if ((remeasure_.job > 0) == remeasure_.contended)
    throw UsageError("remeasure: give a job id or --contended (one of them)");
  if (!remeasure_.since.empty() && !remeasure_.contended) throw UsageError("remeasure: --since goes with --contended");
  const std::int64_t now = now_unix_ms();
  v1::RemeasureRequest request;
  request.set_job_id(remeasure_.job);
  request.set_contended(remeasure_.contended);
  if (remeasure_.contended) request.set_since_unix_ms(parse_since(remeasure_.since.empty() ? "7d" : remeasure_.since, now));
  const std::int64_t deadline_ms = now - parse_since(remeasure_.deadline, now);
  if (deadline_ms < 1000) throw UsageError("remeasure: --deadline must be at least 1s");
  request.set_deadline_s(deadline_ms / 1000);
  request.set_run_contended_on_expiry(remeasure_.run_contended);
  if (!remeasure_.gpu.empty())
    for (int ordinal : parse_gpu_choice(remeasure_.gpu, false)) request.add_gpus(ordinal);

  HarnessClient client = connect();
  const v1::RemeasureResponse response = client.remeasure(request);
  if (!remeasure_.wait || global_.json) {
    if (global_.json) {
      print_report(client, "remeasure", to_json(response));
    } else {
      for (const auto& job : response.jobs())
        std::cout << fmt::format("job {}: re-measures job {}; waits for a quiet window until {}{}\n", job.id(),
                                 job.spec().remeasure_of(), format_timestamp(job.spec().quiet_deadline_unix_ms()),
                                 remeasure_.run_contended ? ", then runs anyway" : ", then expires");
      for (auto id : response.skipped_job_ids())
        std::cout << fmt::format("job {}: a re-measure is already queued\n", id);
      if (response.jobs_size() == 0 && response.skipped_job_ids_size() == 0) std::cout << "nothing to re-measure\n";
    }
    if (!remeasure_.wait) return kExitOk;
  }
  int worst = kExitOk;
  for (const auto& job : response.jobs()) {
    int code;
    try {
      code = watch_until_done(client, job.id());
    } catch (const CommandError& e) {
      std::cerr << "qgate: " << e.what() << "\n";
      code = kExitError;
    }
    worst = std::max(worst, code);
  }
  return worst;
}

int Cli::cmd_builds() {
  v1::ListBuildsRequest request;
  request.set_name(list_.name);
  request.set_limit(list_.limit);
  HarnessClient client = connect();
  const auto response = client.list_builds(request);
  if (global_.json) {
    print_report(client, "builds", to_json(response)["builds"]);
  } else if (response.builds_size() == 0) {
    std::cout << "no builds\n";
  } else {
    std::cout << format_builds_table({response.builds().begin(), response.builds().end()});
  }
  return kExitOk;
}

int Cli::cmd_device() {
  v1::ListDevicesRequest request;
  request.set_host(list_.host);
  HarnessClient client = connect();
  const std::vector<v1::DeviceStatus> devices = client.list_devices(request);
  if (devices.empty())
    throw CommandError(list_.host.empty() ? std::string("the daemon serves no device")
                                          : fmt::format("no GPU of host {} is known to the daemon", list_.host));
  if (global_.json) {
    // "device" is the first GPU (as before); "devices" every one. The context describes the answering
    // daemon: when the first GPU is another daemon's (--host), it comes from GetDevice.
    const ReportContext context = devices.front().published_unix_ms() == 0
                                      ? report_context(devices.front(), kCliVersion)
                                      : daemon_context(client);
    nlohmann::json report = json_report(context, "device", to_json(devices.front()));
    report["devices"] = nlohmann::json::array();
    for (const auto& d : devices) report["devices"].push_back(to_json(d));
    print_json(report);
  } else {
    std::cout << format_devices(devices, now_unix_ms());
  }
  return kExitOk;
}

v1::QueryTrendRequest Cli::trend_request(std::int64_t default_since_ms) const {
  v1::QueryTrendRequest request;
  request.set_profile(trend_.profile);
  request.set_weight_type(trend_.type);
  request.set_path(trend_.path);
  request.set_build_glob(trend_.build_glob);
  request.set_include_contended(trend_.include_contended);
  request.set_limit(trend_.limit);
  request.set_job_id(trend_.job);
  request.set_raw_runs(trend_.raw_runs);
  request.set_host(trend_.host);
  request.set_since_unix_ms(trend_.since.empty() ? default_since_ms
                                                 : parse_since(trend_.since, now_unix_ms()));
  return request;
}

v1::QueryChangesRequest Cli::changes_request(std::int64_t default_since_ms, bool slowdowns_only) const {
  v1::QueryChangesRequest request;
  request.set_profile(trend_.profile);
  request.set_weight_type(trend_.type);
  request.set_path(trend_.path);
  request.set_build_glob(trend_.build_glob);
  request.set_slowdowns_only(slowdowns_only);
  request.set_host(trend_.host);
  request.set_since_unix_ms(trend_.since.empty() ? default_since_ms : parse_since(trend_.since, now_unix_ms()));
  return request;
}

int Cli::cmd_trend() {
  const std::int64_t default_since = parse_since("30d", now_unix_ms());
  const auto request = trend_request(default_since);
  HarnessClient client = connect();
  const auto response = client.query_trend(request);
  if (response.points().empty()) {
    // A profile with no run at all is a typo more often than an empty history: say which there are.
    v1::QueryTrendRequest any_time;
    any_time.set_profile(request.profile());
    any_time.set_include_contended(true);
    any_time.set_limit(1);
    if (client.query_trend(any_time).points().empty()) {
      v1::QueryTrendRequest every_profile;
      every_profile.set_include_contended(true);
      every_profile.set_limit(10000);
      std::set<std::string> profiles;
      const auto everything = client.query_trend(every_profile);
      for (const auto& point : everything.points()) profiles.insert(point.profile());
      std::string known;
      for (const auto& name : profiles) known += (known.empty() ? "" : ", ") + name;
      throw CommandError("no run of profile '" + request.profile() + "' was ever stored; " +
                         (known.empty() ? std::string("the history is empty") : "profiles with runs: " + known));
    }
  }
  if (!trend_.changes) {
    if (global_.json)
      print_report(client, "points", to_json(response)["points"]);
    else
      std::cout << format_trend({response.points().begin(), response.points().end()});
    return kExitOk;
  }
  // Changes count quiet runs only, whatever --include-contended shows in the table.
  const auto changes = client.query_changes(changes_request(default_since, false));
  if (global_.json) {
    // One shape with or without --changes: the points at the top, the changes beside them.
    nlohmann::json doc = json_report(daemon_context(client), "points", to_json(response)["points"]);
    doc["changes"] = to_json(changes);
    print_json(doc);
  } else {
    std::cout << format_trend({response.points().begin(), response.points().end()}) << format_changes(changes);
  }
  return kExitOk;
}

int Cli::cmd_regressions() {
  HarnessClient client = connect();
  const auto response = client.query_changes(changes_request(parse_since("30d", now_unix_ms()), true));
  if (global_.json)
    print_report(client, "regressions", to_json(response));
  else
    std::cout << format_regressions(response);
  return kExitOk;
}

int Cli::cmd_compare() {
  v1::CompareRequest request;
  request.set_build_a(compare_.a);
  request.set_build_b(compare_.b);
  request.set_include_contended(compare_.include_contended);
  request.set_profile(compare_.profile);
  request.set_tokens(compare_.tokens);
  request.set_weight_type(compare_.type);
  request.set_same_margin(compare_.margin_percent / 100);
  request.set_host(compare_.host);
  HarnessClient client = connect();
  const auto response = client.compare(request);
  if (global_.json)
    print_report(client, "compare", to_json(response));
  else
    std::cout << format_compare(response);
  return kExitOk;
}

// A qgate run as a llama-bench row: its build (name, content hash, commit) and its series; the
// writer picks each build's build_commit and the model_type (docs/interop.md).
static std::vector<interop::LlamaBenchExportRun> llama_bench_rows(const std::vector<v1::TrendPoint>& points) {
  std::vector<interop::LlamaBenchExportRun> rows;
  for (const auto& p : points) {
    interop::LlamaBenchExportRun row;
    row.build_name = p.build_name();
    row.build_sha256 = p.build_sha256();
    row.commit = p.commit_sha();
    row.backend = p.backend();
    row.gpu_name = p.gpu_name();
    row.profile = p.profile();
    row.path = p.path();
    row.weight_type = p.weight_type();
    row.tokens = p.tokens();
    row.tokens_per_s = p.tokens_per_s();
    row.started_ms = p.started_unix_ms();
    rows.push_back(std::move(row));
  }
  return rows;
}

int Cli::cmd_import() {
  std::ifstream in(import_.file, std::ios::binary);
  if (!in) throw CommandError(fmt::format("cannot read {}", import_.file));
  std::stringstream text;
  text << in.rdbuf();
  interop::ParsedImport parsed;
  std::int64_t checks_time_ms = 0;  // when checks without a time of their own ran: the file's time
  try {
    // Rows of a format without times (llama-bench's markdown) take the file's modification time.
    std::error_code no_time;
    const auto modified = std::filesystem::last_write_time(import_.file, no_time);
    const std::int64_t file_time_ms =
        no_time ? 0
                : std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::file_clock::to_sys(modified).time_since_epoch())
                      .count();
    parsed = interop::parse_import(text.str(), import_.format, import_.file, file_time_ms);
    checks_time_ms = file_time_ms > 0 ? file_time_ms : now_unix_ms();
  } catch (const interop::ImportError& e) {
    throw CommandError(fmt::format("{}: {} (nothing imported)", import_.file, e.what()));
  }
  if (parsed.runs.empty() && parsed.checks.empty())
    throw CommandError(fmt::format("{}: no results to import ({} rows skipped)", import_.file, parsed.skipped));
  v1::ImportResultsRequest request;
  request.set_source(std::filesystem::path(import_.file).filename().string());
  request.set_format(parsed.format);
  for (const auto& run : parsed.runs) {
    auto* r = request.add_results();
    r->set_tool(run.tool);
    r->set_build_commit(run.build_commit);
    r->set_backend(run.backend);
    r->set_gpu_name(run.gpu_name);
    r->set_profile(run.profile);
    r->set_path(run.path);
    r->set_weight_type(run.weight_type.value_or(""));
    r->set_settings(run.settings);
    r->set_tokens(run.tokens);
    r->set_tokens_per_s(run.tokens_per_s);
    r->set_gemm_ms(run.gemm_ms.value_or(0.0));
    r->set_started_unix_ms(run.started_ms);
    r->set_options_json(run.options_json);
    r->set_line(static_cast<std::int64_t>(run.line));
    for (const auto& s : run.samples) {
      auto* sample = r->add_samples();
      sample->set_metric(s.metric);
      sample->set_unit(s.unit);
      sample->set_value(s.value);
    }
  }
  for (const auto& check : parsed.checks) *request.add_checks() = external_check(check, checks_time_ms);
  HarnessClient client = connect();
  const auto response = client.import_results(request);
  if (global_.json) {
    auto data = to_json(response);
    data["format"] = parsed.format;
    data["rows_skipped"] = parsed.skipped;
    print_report(client, "import", std::move(data));
  } else {
    std::cout << format_import(response, parsed.format, parsed.skipped);
  }
  return kExitOk;
}

int Cli::cmd_export() {
  trend_.raw_runs = true;  // export writes runs, not per-build points
  const auto request = trend_request(0);  // export defaults to all of history
  HarnessClient client = connect();
  const auto response = client.query_trend(request);
  std::vector<v1::TrendPoint> points(response.points().begin(), response.points().end());
  if (trend_.format == "llama-bench-sql") {
    // qgate's own prefill runs only: imported ones (no job) are llama.cpp's already.
    std::erase_if(points, [](const v1::TrendPoint& p) { return p.job_id() == 0; });
  }
  // JSON: the same envelope as --json (json_report.h).
  const std::string text =
      trend_.format == "csv"               ? trend_csv(points)
      : trend_.format == "llama-bench-sql" ? interop::write_llama_bench_sql(llama_bench_rows(points))
                                           : json_report(daemon_context(client), "points", to_json(response)["points"]).dump(2) + "\n";
  if (trend_.output.empty()) {
    std::cout << text;
    return kExitOk;
  }
  std::ofstream out(trend_.output, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw CommandError(fmt::format("cannot write {}", trend_.output));
  std::cerr << fmt::format("wrote {} points to {}\n", points.size(), trend_.output);
  return kExitOk;
}

int Cli::run(int argc, char** argv) {
  define();
  try {
    app_.parse(argc, argv);
  } catch (const CLI::CallForVersion&) {
    // CLI11's own printing ends without a newline.
    std::cout << "qgate " << kCliVersion << ", --json schema " << kJsonSchemaVersion << "\n";
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app_.exit(e);  // --help
    // CLI11 reports an unknown command word as "A subcommand is required"; name the word.
    if (app_.get_subcommands().empty() && !app_.remaining().empty() &&
        app_.remaining().front().rfind("-", 0) != 0) {
      std::cerr << "qgate: unknown command '" << app_.remaining().front() << "' (see qgate --help)\n";
      return kExitError;
    }
    const std::string message = e.what() + typo_hint();
    std::cerr << "qgate: " << message << " (see qgate --help)\n";
    print_json_error(message);
    return kExitError;
  }
  try {
    for (const CLI::App* sub : app_.get_subcommands()) {
      if (auto it = handlers_.find(sub); it != handlers_.end()) return it->second();
    }
    std::cerr << "qgate: no command given (see qgate --help)\n";
    return kExitError;
  } catch (const UsageError& e) {
    std::cerr << "qgate: " << e.what() << " (see qgate --help)\n";
    print_json_error(e.what());
  } catch (const std::exception& e) {
    std::cerr << "qgate: " << e.what() << "\n";
    print_json_error(e.what());
  }
  return kExitError;
}

std::string Cli::typo_hint() const {
  // The first word the parser did not take, as typed before any "=value".
  const CLI::App* command = app_.get_subcommands().empty() ? &app_ : app_.get_subcommands().front();
  std::vector<std::string> left = command->remaining();
  if (left.empty()) left = app_.remaining();
  const auto flag = std::find_if(left.begin(), left.end(), [](const std::string& w) { return w.rfind("--", 0) == 0; });
  if (flag == left.end()) return "";
  const std::string typed = flag->substr(0, flag->find('='));
  std::vector<std::string> known;
  for (const CLI::App* scope : {command, static_cast<const CLI::App*>(&app_)}) {
    for (const CLI::Option* option : scope->get_options()) {
      for (const std::string& name : option->get_lnames()) known.push_back("--" + name);
    }
  }
  const std::optional<std::string> meant = nearest_word(typed, known);
  return meant ? fmt::format(" (did you mean {}?)", *meant) : "";
}

void Cli::print_json_error(const std::string& message) const {
  // Under --json a script reads stdout: the error goes there too, in the shape of every document.
  if (!global_.json) return;
  std::cout << json_report(report_context_without_daemon(kCliVersion, message), "error",
                           {{"message", message}, {"exit_code", kExitError}})
                   .dump(2)
            << "\n";
}

}  // namespace

int run_cli(int argc, char** argv) {
  try {
    Cli cli;
    return cli.run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "qgate: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "qgate: unexpected error\n";
  }
  return kExitError;
}

}  // namespace qgate::client
