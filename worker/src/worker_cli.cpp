// The worker's subcommands. Records go to stdout in the chosen format; progress and the human
// summary go to stderr, so a pipe of records is never mixed with prose.
#include "qgate/common/job_settings.h"
#include "qgate/worker/worker_cli.h"

#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>
#include <tuple>

#include "qgate/common/fnv1a.h"
#include "qgate/profiles/gguf_tensors.h"
#include "qgate/quant/block_formats.h"
#include "qgate/v1/record_words.h"
#include "qgate/worker/bench.h"
#include "qgate/worker/device_api.h"
#include "qgate/worker/judge_channel.h"
#include "qgate/worker/kernel_build.h"
#include "qgate/worker/memory_probe.h"
#include "qgate/worker/parity.h"
#include "qgate/worker/problems.h"
#include "qgate/worker/record_writer.h"
#include "qgate/worker/sandbox.h"
#include "qgate/worker/serve_judge.h"
#include "qgate/worker/command_arm.h"
#include "qgate/worker/serve.h"
#include "qgate/worker/worker_errors.h"
#include "qgate_revision.h"

#ifndef QGATE_VERSION
#define QGATE_VERSION "0.0.0"
#endif

namespace qgate::worker {
namespace {

constexpr uint32_t kSchemaVersion = 1;

std::string default_build_path() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "libqgate_ref.so";
  // A bundle keeps kernel builds in plugins/; the build tree keeps libqgate_ref.so in lib/.
  const auto root = exe.parent_path() / "..";
  for (const char* dir : {"plugins", "lib"}) {
    auto candidate = (root / dir / "libqgate_ref.so").lexically_normal();
    if (std::filesystem::exists(candidate, ec)) return candidate.string();
  }
  return (root / "plugins" / "libqgate_ref.so").lexically_normal().string();
}

struct CommonOptions {
  std::string build = default_build_path();
  std::string backend = "cpu";
  int device = 0;
  int threads = 0;
  // The CPU backend's fake device (qgated --backend cpu --gpus ...): its name, uuid and slowdown.
  std::string cpu_device_name = "cpu";
  std::string cpu_device_uuid;
  double cpu_slowdown = 1.0;
  std::string format;  // empty: table on a terminal, proto otherwise
  bool json = false;
  uint64_t seed = 20260831;
  std::string sandbox = "auto";  // parity and serve: the Landlock sandbox (sandbox.h)
};

void add_common(CLI::App* cmd, CommonOptions& o) {
  cmd->add_option("--build", o.build, "kernel build (.so) to load")->capture_default_str();
  cmd->add_option("--backend", o.backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  cmd->add_option("--device", o.device, "CUDA device ordinal")->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--threads", o.threads, "CPU backend threads, 0 = all")->check(CLI::NonNegativeNumber)->capture_default_str();
  cmd->add_option("--cpu-device-name", o.cpu_device_name, "CPU backend: the name this fake device reports")
      ->capture_default_str();
  cmd->add_option("--cpu-device-uuid", o.cpu_device_uuid, "CPU backend: the uuid this fake device reports");
  cmd->add_option("--cpu-slowdown", o.cpu_slowdown, "CPU backend: every timed call takes this many times as long")
      ->check(CLI::Range(1.0, 100.0))
      ->capture_default_str();
  cmd->add_option("--format", o.format, "proto (length-delimited), json (lines) or table; default table on a terminal, else proto")
      ->check(CLI::IsMember({"proto", "json", "table"}));
  cmd->add_flag("--json", o.json, "same as --format json");
  cmd->add_option("--seed", o.seed, "base seed; every case records its own")->capture_default_str();
  cmd->add_option("--sandbox", o.sandbox,
                  "parity, serve and command: restrict the worker with Landlock before it loads the build or "
                  "starts a program: auto, on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
}

/// Restricts this worker before it loads the build (sandbox.h); the answer goes into its run
/// context. `scratch` becomes the build's TMPDIR.
std::string enter_sandbox(const CommonOptions& o, const std::vector<std::string>& extra_reads, const ScratchDir& scratch) {
  SandboxMode mode = SandboxMode::automatic;
  parse_sandbox_mode(o.sandbox, &mode);
  setenv("TMPDIR", scratch.path().c_str(), 1);
  SandboxPlan plan = sandbox_plan(o.build, extra_reads);
  plan.scratch_dir = scratch.path();
  return apply_sandbox(mode, plan);
}

OutputFormat resolve_format(const CommonOptions& o) {
  if (o.json) return OutputFormat::json;
  if (!o.format.empty()) return *parse_output_format(o.format);
  return isatty(STDOUT_FILENO) ? OutputFormat::table : OutputFormat::proto;
}

/// Everything a subcommand needs once the build and the device are open.
struct Session {
  std::unique_ptr<KernelBuild> build;
  std::unique_ptr<DeviceApi> device;
  v1::RunContext context;
};

using RecordSink = std::function<void(const v1::WorkerRecord&)>;

/// Opens the device, then (for parity and serve) enters the sandbox, then loads the build: the
/// driver's nodes and libraries are open before the sandbox closes the way to them, and the build,
/// constructor included, runs only inside it. `sandbox` returns what it applied.
int open_session(const CommonOptions& o, std::map<std::string, std::string> options, const RecordSink& emit,
                 Session* s, const std::function<std::string()>& sandbox = {}) {
  try {
    s->device = o.backend == "cuda" ? make_cuda_device_api(o.device)
                                    : make_cpu_device_api(o.threads, {o.device, o.cpu_device_name,
                                                                      o.cpu_device_uuid, o.cpu_slowdown});
  } catch (const std::exception& e) {
    emit(error_record(v1::WORKER_ERROR_KIND_DEVICE, e.what()));
    std::cerr << "qgate-worker: " << e.what() << "\n";
    return kExitDevice;
  }
  if (sandbox) {
    try {
      options["sandbox"] = sandbox();
    } catch (const std::exception& e) {
      emit(error_record(v1::WORKER_ERROR_KIND_DEVICE, std::string("sandbox: ") + e.what()));
      std::cerr << "qgate-worker: sandbox: " << e.what() << "\n";
      return kExitDevice;
    }
  }
  BuildLoadError load_error;
  std::string message;
  s->build = KernelBuild::load(o.build, &load_error, &message);
  if (!s->build) {
    // A library the build needs may lie where the sandbox does not reach: say so.
    if (options.count("sandbox") && options["sandbox"].rfind("landlock", 0) == 0 &&
        message.find("Permission denied") != std::string::npos)
      message += " (inside the worker sandbox, " + options["sandbox"] +
                 ": its libraries must lie under the system trees, the qgate installation or LD_LIBRARY_PATH; "
                 "qgated --worker-sandbox off runs workers without it)";
    emit(error_record(to_error_kind(load_error), message));
    std::cerr << "qgate-worker: " << message << "\n";
    return kExitBuild;
  }
  s->device->describe(&s->context);
  s->context.set_qgate_version(QGATE_VERSION);
  s->context.set_qgate_commit(QGATE_COMMIT);
  s->context.set_schema_version(kSchemaVersion);
  s->context.set_started_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count());
  *s->context.mutable_build() = s->build->info();
  auto& opts = *s->context.mutable_options();
  for (const auto& [k, v] : options) opts[k] = v;
  opts["seed"] = std::to_string(o.seed);
  opts["threads"] = std::to_string(o.threads);
  const char* mmq = std::getenv("MINFER_MMQ");
  opts["MINFER_MMQ"] = mmq ? mmq : "";
  v1::WorkerRecord r;
  *r.mutable_context() = s->context;
  emit(r);
  return kExitOk;
}

int open_session(const CommonOptions& o, const std::map<std::string, std::string>& options,
                 RecordWriter& writer, Session* s, const std::function<std::string()>& sandbox = {}) {
  return open_session(o, options, [&](const v1::WorkerRecord& r) { writer.write(r); }, s, sandbox);
}

bool parse_paths(const std::string& text, std::vector<int>* out, std::string* error) {
  if (text == "env") *out = {QGATE_PATH_FROM_ENV};
  else if (text == "f16") *out = {QGATE_PATH_F16};
  else if (text == "mmq") *out = {QGATE_PATH_MMQ};
  else if (text == "both") *out = {QGATE_PATH_MMQ, QGATE_PATH_F16};
  else {
    *error = "--path must be env, f16, mmq or both, got '" + text + "'";
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
int cmd_info(const CommonOptions& o) {
  BuildLoadError load_error;
  std::string message;
  auto build = KernelBuild::load(o.build, &load_error, &message);
  if (!build) {
    std::cerr << "qgate-worker: " << message << "\n";
    if (o.json) std::cout << nlohmann::json{{"error", to_string(load_error)}, {"message", message}}.dump() << "\n";
    return kExitBuild;
  }
  const v1::BuildInfo info = build->info();
  if (o.json) {
    std::cout << to_json(info) << "\n";
  } else {
    std::cout << "build     " << info.path() << "\n"
              << "sha256    " << info.sha256() << "\n"
              << "name      " << info.name() << " " << info.version() << " (" << info.commit() << ")\n"
              << "abi       " << info.abi_version() << "\n"
              << "backends  " << info.backends() << "\n"
              << "cuda      " << (info.cuda_archs().empty() ? "-" : info.cuda_archs()) << "\n"
              << "devices   " << cuda_device_count() << " CUDA device(s) visible\n";
  }
  return kExitOk;
}

// ---------------------------------------------------------------------------------------------
// What `qgate-worker parity` was asked for, as parsed from its command line.
struct ParityCommand {
  std::string types = "all";
  std::string shapes = std::string(qgate::to_string(qgate::ShapeSet::Standard));
  bool shapes_given = false;
  std::vector<std::string> extra_shapes;
  std::string path = "env";
  std::string numerics = "auto";   // auto: what the build declares, else qgate
  std::optional<bool> edge_cases;  // default: on with a shape set, off with --shapes none
  double atol = reference::kAbsoluteTolerance;
  std::string gguf;                // a model file whose tensors become cases
  std::string tensors = "blk.0.*";  // globs over its tensor names
  int64_t gguf_tokens = 64;         // activation rows per tensor case
};

// One case per gated tensor of a model file: its own blocks, `tokens` random activation rows.
// Tensors qgate does not gate are listed on stderr with the reason.
bool plan_gguf_cases(const ParityCommand& cmd, uint64_t seed, std::vector<ParityCaseSpec>* cases, std::string* error) {
  auto source = profiles::GgufTensorSource::open(cmd.gguf, error);
  if (!source) return false;
  auto selection = source->select(cmd.tensors, error);
  if (!selection) return false;
  for (const auto& skipped : selection->skipped)
    std::cerr << "qgate-worker: skipping " << skipped.name << ": " << skipped.reason << "\n";
  if (selection->gemms.empty()) {
    *error = "no tensor matching '" + cmd.tensors + "' in " + cmd.gguf + " is of a type qgate gates";
    return false;
  }
  const std::string file = std::filesystem::path(cmd.gguf).filename().string();
  auto shared = std::make_shared<profiles::GgufTensorSource>(std::move(*source));
  for (const profiles::GgufTensorEntry* t : selection->gemms) {
    const GemmShape shape{cmd.gguf_tokens, t->od, t->k};
    ParityCaseSpec spec{*t->weight_type, shape, ActivationKind::random,
                        // FNV-1a, not std::hash: a case's seed must not depend on the standard library.
                        case_seed(seed ^ common::fnv1a64(t->name), *t->weight_type, shape), {}};
    spec.weights.name = "gguf:" + file + ":" + t->name;
    spec.weights.load = [shared, t] {
      std::string why;
      auto bytes = shared->read(*t, &why);
      if (!bytes) throw std::runtime_error(why);
      return std::move(*bytes);
    };
    cases->push_back(std::move(spec));
  }
  return true;
}

std::string known_numerics() {
  std::string known;
  for (const auto& w : words::numerics_words()) known += (known.empty() ? "" : ", ") + w;
  return known;
}

// Resolves the profile the MMQ path is judged in: an explicit --numerics wins, then the build's
// own declaration, then qgate. A declaration qgate does not know is an error, not a silent default.
bool resolve_numerics(const std::string& requested, const KernelBuild& build, qgate_backend backend,
                      reference::Numerics* out, std::string* source, std::string* error) {
  if (requested != "auto") {
    *out = *reference::parse_numerics(requested);
    *source = "requested";
    return true;
  }
  const std::string declared = build.declared_numerics(backend);
  if (declared.empty()) {
    *out = reference::Numerics::qgate;
    *source = "default (the build does not export qgate_build_numerics)";
    return true;
  }
  const auto parsed = reference::parse_numerics(declared);
  if (!parsed) {
    *error = "kernel build '" + build.path() + "' declares numerics '" + declared +
             "', which qgate does not know (known: " + known_numerics() + "); pass --numerics to judge it anyway";
    return false;
  }
  *out = *parsed;
  *source = "declared by the build";
  return true;
}

// The sweep both the worker and its judge work through, from the same command line: the judge
// plans it itself, so the worker cannot add, drop or reorder a case.
int plan_sweep(const CommonOptions& o, const ParityCommand& cmd, ParityOptions* po, std::vector<ParityCaseSpec>* cases,
               std::string* error, v1::WorkerErrorKind* error_kind) {
  *error_kind = v1::WORKER_ERROR_KIND_INVALID_ARGUMENT;
  po->seed = o.seed;
  po->threads = o.threads;
  po->atol = cmd.atol;
  auto types = parse_types(cmd.types, error);
  if (!types) return kExitUsage;
  po->types = *types;
  // With a model file, its tensors are the sweep unless a shape set is asked for too.
  const qgate::ShapeSet shape_set = !cmd.gguf.empty() && !cmd.shapes_given
                                        ? qgate::ShapeSet::None
                                        : qgate::shape_set_from_string(cmd.shapes).value_or(qgate::ShapeSet::Standard);
  if (shape_set == qgate::ShapeSet::Standard) po->shapes = standard_shapes();
  if (shape_set == qgate::ShapeSet::Quick) po->shapes = quick_shapes();
  po->edge_cases = cmd.edge_cases.value_or(shape_set != qgate::ShapeSet::None);
  for (const auto& text : cmd.extra_shapes) {
    auto shape = parse_shape(text, error);
    if (!shape) return kExitUsage;
    po->shapes.push_back(*shape);
  }
  if (po->shapes.empty() && !po->edge_cases && cmd.gguf.empty()) {
    *error = "no shapes to run (use --shapes standard, --shape NTxODxK or --edge-cases)";
    return kExitUsage;
  }
  if (!parse_paths(cmd.path, &po->paths, error)) return kExitUsage;
  *cases = plan_cases(*po);
  if (!cmd.gguf.empty() && !plan_gguf_cases(cmd, po->seed, cases, error)) {
    *error_kind = v1::WORKER_ERROR_KIND_MODEL_FILE;
    return kExitUsage;
  }
  return kExitOk;
}

// The worker half of `parity`: it hands the judge (judge_channel.h) what the build produced and
// never writes a verdict itself. The record stream leaves this process before the build is loaded.
int cmd_parity(const CommonOptions& o, const ParityCommand& cmd, const std::vector<std::string>& judge_args) {
  std::string error;
  ParityOptions po;
  std::vector<ParityCaseSpec> cases;
  v1::WorkerErrorKind error_kind;
  if (int rc = plan_sweep(o, cmd, &po, &cases, &error, &error_kind); rc != kExitOk) {
    std::cerr << "qgate-worker: " << error << "\n";
    if (error_kind == v1::WORKER_ERROR_KIND_MODEL_FILE) {
      RecordWriter writer(resolve_format(o), std::cout);
      writer.write(error_record(error_kind, error));
    }
    return rc;
  }
  const int record_fd = take_record_stream(&error);
  if (record_fd < 0) {
    std::cerr << "qgate-worker: " << error << "\n";
    return kExitDevice;
  }
  JudgeProcess judge(judge_args, record_fd);
  auto send = [&](const v1::JudgeInput& input) {
    if (!judge.send(input)) throw std::runtime_error("the parity judge stopped reading (see its message above)");
  };

  // The scratch folder's janitor is started now, before any thread (the device's) exists.
  std::unique_ptr<ScratchDir> scratch;
  try {
    scratch = std::make_unique<ScratchDir>();
  } catch (const std::exception& e) {
    v1::JudgeInput input;
    *input.mutable_error() = error_record(v1::WORKER_ERROR_KIND_DEVICE, e.what()).error();
    judge.send(input);
    std::cerr << "qgate-worker: " << e.what() << "\n";
    judge.finish();
    return kExitDevice;
  }
  Session s;
  std::map<std::string, std::string> opts = {{"command", "parity"}, {"types", cmd.types},
                                             {"shapes", cmd.shapes}, {"path", cmd.path},
                                             {"numerics", cmd.numerics},
                                             {"edge_cases", po.edge_cases ? "on" : "off"},
                                             {"atol", std::to_string(cmd.atol)},
                                             {"gguf", cmd.gguf},
                                             {"tensors", cmd.gguf.empty() ? "" : cmd.tensors}};
  auto forward = [&](const v1::WorkerRecord& r) {
    v1::JudgeInput input;
    if (r.has_context()) *input.mutable_context() = r.context();
    if (r.has_error()) *input.mutable_error() = r.error();
    send(input);
  };
  try {
    if (int rc = open_session(o, opts, forward, &s, [&] { return enter_sandbox(o, {cmd.gguf}, *scratch); });
        rc != kExitOk) {
      judge.finish();
      return rc;
    }
    std::string numerics_source;
    if (!resolve_numerics(cmd.numerics, *s.build, s.device->backend(), &po.numerics, &numerics_source, &error)) {
      forward(error_record(v1::WORKER_ERROR_KIND_UNKNOWN_NUMERICS, error));
      std::cerr << "qgate-worker: " << error << "\n";
      judge.finish();
      return kExitBuild;
    }
    {
      v1::JudgeInput input;
      input.mutable_declaration()->set_numerics(to_proto(po.numerics));
      input.mutable_declaration()->set_numerics_source(numerics_source);
      send(input);
    }
    v1::WorkerSummary memory;
    ParityRunner runner(*s.build, *s.device, o.threads);
    // Each case releases its GEMM and buffers; the contexts go after the last case. What the build
    // holds after that, against this reading, is what it kept. The contexts are opened before it, so
    // what a build sets up once (a library it loads and cannot unload) is not counted as kept.
    runner.open_contexts(po.paths);
    *memory.mutable_memory_before() = read_memory(*s.device);
    runner.run(po, cases, [&](ProducedOutput&& out) {
      v1::JudgeInput input;
      v1::ParityOutput& handed = *input.mutable_output();
      handed.set_slot(out.slot);
      *handed.mutable_produced() = std::move(out.produced);
      if (out.has_output) handed.set_y(reinterpret_cast<const char*>(out.y.data()), out.y.size() * sizeof(float));
      send(input);
    });
    runner.release_contexts();
    *memory.mutable_memory_after() = read_memory(*s.device);
    // The second cycle: the first case of each type again, on every path, then everything
    // released. The leak judge tells what a build keeps once from a leak by it.
    std::vector<ParityCaseSpec> again;
    std::set<quant::WeightType> seen;
    for (const ParityCaseSpec& c : cases)
      if (seen.insert(c.type).second) again.push_back(c);
    runner.open_contexts(po.paths);
    int32_t runs = 0;
    runner.run(po, again, [&](ProducedOutput&& out) { runs += out.has_output ? 1 : 0; });
    runner.release_contexts();
    *memory.mutable_memory_after_second_cycle() = read_memory(*s.device);
    memory.set_second_cycle_runs(runs);
    v1::JudgeInput input;
    *input.mutable_memory() = memory;
    send(input);
  } catch (const std::runtime_error& e) {
    std::cerr << "qgate-worker: " << e.what() << "\n";
  }
  return judge.finish();
}

// `qgate-worker judge`: the verdict half of `parity`, started by the worker before it loads the
// build. It reads the worker's channel on stdin and writes the records qgated reads. It plans
// the sweep itself from the same options and makes every input again from its seed, so the build
// (which shares the worker's process and could write to the channel) can change nothing but its
// outputs; anything outside the worker's protocol ends the sweep as CHANNEL_TAMPERED.
int cmd_judge(const CommonOptions& o, const ParityCommand& cmd) {
  std::string error;
  ParityOptions po;
  std::vector<ParityCaseSpec> cases;
  v1::WorkerErrorKind error_kind;
  RecordWriter writer(resolve_format(o), std::cout);
  if (int rc = plan_sweep(o, cmd, &po, &cases, &error, &error_kind); rc != kExitOk) {
    writer.write(error_record(error_kind, error));
    std::cerr << "qgate-worker judge: " << error << "\n";
    return rc;
  }
  const bool records_to_terminal = resolve_format(o) == OutputFormat::table;
  auto write = [&](const v1::WorkerRecord& r) {
    writer.write(r);
    if (!records_to_terminal) std::cerr << describe_record(r) << "\n";
  };
  auto tampered = [&](const std::string& what) {
    const std::string message = what + " (the judge stopped; no further case is judged)";
    write(error_record(v1::WORKER_ERROR_KIND_CHANNEL_TAMPERED, message));
    std::cerr << "qgate-worker judge: " << message << "\n";
    return kExitChannelTampered;
  };
  const int32_t paths = int32_t(po.paths.size());
  const int32_t total = int32_t(cases.size()) * paths;
  enum class Stage { opening, judging, closing } stage = Stage::opening;
  bool context_seen = false;
  int32_t next_slot = 0;
  v1::WorkerSummary summary;
  ParityJudge judge(po, o.threads);
  JudgeInputReader reader(STDIN_FILENO);
  const auto t0 = std::chrono::steady_clock::now();
  // The memory readings are the worker's last message: the judge stops reading there, not at the
  // channel's end, which a process the build started may hold open.
  while (!summary.has_memory_before()) {
    v1::JudgeInput input;
    const JudgeInputReader::Read read = reader.next(&input);
    if (read == JudgeInputReader::Read::malformed) return tampered("the channel holds bytes that are not a message");
    if (read == JudgeInputReader::Read::end) {
      if (stage != Stage::closing) {
        std::cerr << "qgate-worker judge: the worker's channel closed after " << next_slot << " of " << total
                  << " outputs\n";
        return kExitDevice;
      }
      break;
    }
    switch (input.input_case()) {
      case v1::JudgeInput::kContext:
        if (stage != Stage::opening || context_seen) return tampered("a second run context, or one after the sweep began");
        context_seen = true;
        {
          v1::WorkerRecord r;
          *r.mutable_context() = input.context();
          writer.write(r);
        }
        break;
      case v1::JudgeInput::kError: {
        if (stage != Stage::opening) return tampered("a worker error after the sweep began");
        v1::WorkerRecord r;
        *r.mutable_error() = input.error();
        write(r);
        return input.error().kind() == v1::WORKER_ERROR_KIND_DEVICE ? kExitDevice : kExitBuild;
      }
      case v1::JudgeInput::kDeclaration: {
        if (stage != Stage::opening || !context_seen) return tampered("a numerics declaration out of order");
        const v1::NumericsProfile declared = input.declaration().numerics();
        const std::optional<reference::Numerics> numerics = from_proto(declared);
        if (!numerics) return tampered("a numerics declaration qgate does not know");
        if (cmd.numerics != "auto" && reference::parse_numerics(cmd.numerics) != numerics)
          return tampered("numerics " + std::string(reference::to_string(*numerics)) + " where " + cmd.numerics +
                          " was requested");
        po.numerics = *numerics;
        v1::WorkerRecord r;
        r.mutable_plan()->set_cases(total);
        r.mutable_plan()->set_numerics(declared);
        r.mutable_plan()->set_numerics_source(input.declaration().numerics_source());
        write(r);
        stage = total > 0 ? Stage::judging : Stage::closing;
        break;
      }
      case v1::JudgeInput::kOutput: {
        const v1::ParityOutput& out = input.output();
        if (stage != Stage::judging || out.slot() != next_slot)
          return tampered("output for slot " + std::to_string(out.slot()) + " where slot " + std::to_string(next_slot) +
                          " was due");
        const ParityCaseSpec& spec = cases[size_t(next_slot / paths)];
        const int requested = po.paths[size_t(next_slot % paths)];
        const v1::GemmPath ran = out.produced().path();
        if (ran != v1::GEMM_PATH_MMQ && ran != v1::GEMM_PATH_F16)
          return tampered("an output on no GEMM path of the build");
        const int path = ran == v1::GEMM_PATH_MMQ ? QGATE_PATH_MMQ : QGATE_PATH_F16;
        if (requested != QGATE_PATH_FROM_ENV && requested != path)
          return tampered("an output on a path that was not requested");
        v1::ParityCase verdict;
        if (!out.y().empty()) {
          std::vector<float> y(out.y().size() / sizeof(float));
          if (out.y().size() % sizeof(float) != 0) return tampered("outputs that are not whole f32 values");
          std::memcpy(y.data(), out.y().data(), out.y().size());
          verdict = judge.judge(spec, path, out.produced(), y);
        } else {
          const v1::CaseOutcome outcome = out.produced().outcome();
          if (outcome != v1::CASE_OUTCOME_ERROR && outcome != v1::CASE_OUTCOME_NOT_SUPPORTED &&
              outcome != v1::CASE_OUTCOME_INVALID_PROBLEM)
            return tampered("a case without outputs that claims " + std::string(outcome_name(outcome)));
          verdict = describe_case(po, spec, path);
          verdict.set_outcome(outcome);
          verdict.set_message(out.produced().message());
          verdict.set_run_ms(out.produced().run_ms());
          if (out.produced().has_cuda()) *verdict.mutable_cuda() = out.produced().cuda();
        }
        v1::WorkerRecord r;
        *r.mutable_parity() = verdict;
        write(r);
        summary.set_cases(summary.cases() + 1);
        if (verdict.outcome() == v1::CASE_OUTCOME_PASSED) summary.set_passed(summary.passed() + 1);
        else if (verdict.outcome() == v1::CASE_OUTCOME_NOT_SUPPORTED) summary.set_skipped(summary.skipped() + 1);
        else summary.set_failed(summary.failed() + 1);
        if (++next_slot == total) stage = Stage::closing;
        break;
      }
      case v1::JudgeInput::kMemory:
        if (stage != Stage::closing || summary.has_memory_before())
          return tampered("memory readings before the last output, or twice");
        *summary.mutable_memory_before() = input.memory().memory_before();
        *summary.mutable_memory_after() = input.memory().memory_after();
        if (input.memory().has_memory_after_second_cycle()) {
          *summary.mutable_memory_after_second_cycle() = input.memory().memory_after_second_cycle();
          summary.set_second_cycle_runs(input.memory().second_cycle_runs());
        }
        break;
      default:
        return tampered("a message of no kind the worker sends");
    }
  }
  if (!summary.has_memory_before()) {
    std::cerr << "qgate-worker judge: the worker ended without its memory readings\n";
    return kExitDevice;
  }
  summary.set_wall_s(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  v1::WorkerRecord r;
  *r.mutable_summary() = summary;
  write(r);
  return summary.failed() > 0 ? kExitCaseFailed : kExitOk;
}

// ---------------------------------------------------------------------------------------------
void print_bench_table(std::ostream& out, const std::vector<v1::GemmTiming>& timings) {
  // One row per (type, shape): the build's paths side by side with cuBLASLt f16.
  using Key = std::tuple<int64_t, int64_t, int64_t, std::string>;
  std::map<Key, std::map<v1::GemmPath, const v1::GemmTiming*>> rows;
  std::vector<Key> order;
  for (const auto& t : timings) {
    Key key{t.shape().od(), t.shape().k(), t.shape().nt(), t.type()};
    if (!rows.count(key)) order.push_back(key);
    rows[key][t.path()] = &t;
  }
  char line[256];
  std::snprintf(line, sizeof line, "%-5s %5s %13s | %9s %7s | %9s %7s | %9s %7s | %8s %9s\n", "type",
                "nt", "od x k", "mmq us", "TMAC/s", "f16 us", "TMAC/s", "cublt us", "TMAC/s",
                "mmq/f16", "mmq/cublt");
  out << line << std::string(112, '-') << "\n";
  auto cell = [](const v1::GemmTiming* t, char* us, char* tm) {
    if (t && t->outcome() == v1::CASE_OUTCOME_PASSED) {
      std::snprintf(us, 16, "%9.1f", t->median_us());
      std::snprintf(tm, 16, "%7.2f", t->tmac_per_s());
    } else {
      std::snprintf(us, 16, "%9s", t ? "error" : "-");
      std::snprintf(tm, 16, "%7s", "-");
    }
  };
  auto ratio = [](const v1::GemmTiming* a, const v1::GemmTiming* b, char* buf, int width) {
    if (a && b && a->outcome() == v1::CASE_OUTCOME_PASSED && b->outcome() == v1::CASE_OUTCOME_PASSED && a->median_us() > 0)
      std::snprintf(buf, 16, "%*.2fx", width - 1, b->median_us() / a->median_us());
    else
      std::snprintf(buf, 16, "%*s", width, "-");
  };
  for (const Key& key : order) {
    auto& m = rows[key];
    const v1::GemmTiming* mmq = m.count(v1::GEMM_PATH_MMQ) ? m[v1::GEMM_PATH_MMQ] : nullptr;
    const v1::GemmTiming* f16 = m.count(v1::GEMM_PATH_F16) ? m[v1::GEMM_PATH_F16] : nullptr;
    const v1::GemmTiming* cub = m.count(v1::GEMM_PATH_CUBLASLT_F16) ? m[v1::GEMM_PATH_CUBLASLT_F16] : nullptr;
    char a[16], b[16], c[16], d[16], e[16], f[16], r1[16], r2[16];
    cell(mmq, a, b);
    cell(f16, c, d);
    cell(cub, e, f);
    ratio(mmq, f16, r1, 8);
    ratio(mmq, cub, r2, 9);
    const std::string odk = std::to_string(std::get<0>(key)) + "x" + std::to_string(std::get<1>(key));
    std::snprintf(line, sizeof line, "%-5s %5lld %13s | %s %s | %s %s | %s %s | %s %s\n",
                  std::get<3>(key).c_str(), (long long)std::get<2>(key), odk.c_str(), a, b, c, d, e, f, r1, r2);
    out << line;
  }
  out << "mmq/f16 and mmq/cublt are speed ratios (time of the other path / time of MMQ; > 1 means MMQ is faster).\n";
  // Every timing of one run has the same calls per sample; the first says it.
  if (!timings.empty() && timings.front().calls_per_sample() > 1)
    out << "times are per call, each sample " << timings.front().calls_per_sample() << " calls back to back.\n";
}

// The bench subcommand's options as given on the command line.
struct BenchCommand {
  std::string types = "all", path = "both", json_out;
  std::vector<int64_t> nts;
  std::vector<std::string> odk;
  int warmup = 3, reps = 20, back_to_back = 1;
  bool no_cublaslt = false, warm_cache = false;
};

int cmd_bench(const CommonOptions& o, const BenchCommand& cmd) {
  std::string error;
  BenchOptions bo;
  bo.seed = o.seed;
  bo.threads = o.threads;
  bo.warmup = cmd.warmup;
  bo.repetitions = cmd.reps;
  bo.cublaslt = !cmd.no_cublaslt;
  bo.cold = !cmd.warm_cache;
  bo.calls_per_sample = cmd.back_to_back;
  if (cmd.back_to_back > 1 && bo.cold) {
    // A flush before a sample would reach only its first call: the others find what it left in L2.
    std::cerr << "qgate-worker: --back-to-back " << cmd.back_to_back
              << " needs --warm-l2 (a cold L2 can only be had for one isolated call per sample)\n";
    return kExitUsage;
  }
  auto types = parse_types(cmd.types, &error);
  if (!types) {
    std::cerr << "qgate-worker: " << error << "\n";
    return kExitUsage;
  }
  bo.types = *types;
  if (!cmd.nts.empty()) bo.token_counts = cmd.nts;
  if (!cmd.odk.empty()) {
    bo.od_k.clear();
    for (const auto& text : cmd.odk) {
      auto shape = parse_shape("1x" + text, &error);
      if (!shape) {
        std::cerr << "qgate-worker: --odk '" << text << "' must be ODxK, e.g. 4096x14336\n";
        return kExitUsage;
      }
      bo.od_k.emplace_back(shape->od, shape->k);
    }
  }
  if (!parse_paths(cmd.path, &bo.paths, &error)) {
    std::cerr << "qgate-worker: " << error << "\n";
    return kExitUsage;
  }
  // The benchmark prints a table by default; records go to stdout only when asked for.
  const bool records = o.json || !o.format.empty();
  std::ofstream devnull;
  RecordWriter writer(records ? resolve_format(o) : OutputFormat::json, records ? std::cout : devnull);
  Session s;
  std::map<std::string, std::string> opts = {{"command", "bench"}, {"types", cmd.types},
                                             {"warmup", std::to_string(cmd.warmup)},
                                             {"repetitions", std::to_string(cmd.reps)},
                                             {"cold_l2", bo.cold ? "true" : "false"},
                                             {"calls_per_sample", std::to_string(bo.calls_per_sample)},
                                             {"path", cmd.path}};
  if (int rc = open_session(o, opts, writer, &s); rc != kExitOk) return rc;

  std::vector<v1::GemmTiming> timings;
  BenchRunner runner(*s.build, *s.device, o.threads);
  runner.run(
      bo,
      [&](const v1::GemmTiming& t) {
        v1::WorkerRecord r;
        *r.mutable_timing() = t;
        writer.write(r);
        std::cerr << describe_record(r) << "\n";
        timings.push_back(t);
      },
      [&](const std::string& msg) { std::cerr << "# " << msg << "\n"; });

  if (!records) print_bench_table(std::cout, timings);
  if (!cmd.json_out.empty()) {
    nlohmann::json doc;
    doc["schema_version"] = kSchemaVersion;
    doc["context"] = nlohmann::json::parse(to_json(s.context));
    doc["timings"] = nlohmann::json::array();
    for (const auto& t : timings) doc["timings"].push_back(nlohmann::json::parse(to_json(t)));
    std::ofstream f(cmd.json_out);
    if (!f) {
      std::cerr << "qgate-worker: cannot write " << cmd.json_out << "\n";
      return kExitUsage;
    }
    f << doc.dump(2) << "\n";
    std::cerr << "# wrote " << cmd.json_out << "\n";
  }
  bool any_error = false;
  for (const auto& t : timings) any_error |= t.outcome() == v1::CASE_OUTCOME_ERROR;
  return any_error ? kExitCaseFailed : kExitOk;
}

// ---------------------------------------------------------------------------------------------
// Greedy decoding's last step: argmax over an output head, f16 path against MMQ, same inputs.
int cmd_argmax(const CommonOptions& o, const std::string& type_text, int64_t od, int64_t k, int64_t nt,
               double activation_scale) {
  std::string error;
  auto types = parse_types(type_text, &error);
  if (!types || types->size() != 1) {
    std::cerr << "qgate-worker: --type must name one weight type" << (error.empty() ? "" : ": " + error) << "\n";
    return kExitUsage;
  }
  const quant::WeightType type = types->front();
  if (od <= 0 || k <= 0 || nt <= 0 || k % quant::traits(type).block_elems) {
    std::cerr << "qgate-worker: sizes must be positive and k a multiple of the block\n";
    return kExitUsage;
  }
  std::ofstream devnull;
  RecordWriter writer(OutputFormat::json, devnull);
  Session s;
  if (int rc = open_session(o, {{"command", "argmax"}}, writer, &s); rc != kExitOk) return rc;

  const GemmShape shape{nt, od, k};
  const uint64_t seed = case_seed(o.seed, type, shape);
  const auto weights = make_weights(type, od, k, seed);
  auto x = make_activations(nt, k, seed);
  for (auto& v : x) v *= float(activation_scale);
  std::map<int, std::vector<float>> logits;
  try {
    DeviceBuffer dx(*s.device, x.size() * sizeof(float));
    DeviceBuffer dy(*s.device, size_t(nt) * size_t(od) * sizeof(float));
    s.device->upload(dx.as<void>(), x.data(), x.size() * sizeof(float));
    for (int path : {QGATE_PATH_F16, QGATE_PATH_MMQ}) {
      BuildContext ctx(*s.build, s.device->backend(), s.device->device_ordinal(), path, o.threads);
      PreparedGemm gemm(ctx, int32_t(type), od, k, weights.data(), nt);
      if (!gemm.ok() || gemm.run(dx.as<float>(), nt, dy.as<float>(), s.device->stream()) != QGATE_OK) {
        std::cerr << "qgate-worker: " << gemm.message() << "\n";
        return kExitDevice;
      }
      s.device->synchronize();
      auto& y = logits[path];
      y.resize(size_t(nt) * size_t(od));
      s.device->download(y.data(), dy.as<void>(), y.size() * sizeof(float));
    }
  } catch (const std::exception& e) {
    std::cerr << "qgate-worker: " << e.what() << "\n";
    return kExitDevice;
  }
  auto top2 = [&](const std::vector<float>& y, int64_t t) {
    const float* row = y.data() + size_t(t) * size_t(od);
    int64_t best = 0;
    for (int64_t i = 1; i < od; ++i) if (row[i] > row[best]) best = i;
    float second = -INFINITY;
    for (int64_t i = 0; i < od; ++i) if (i != best) second = std::max(second, row[i]);
    return std::pair<int64_t, float>(best, row[best] - second);
  };
  nlohmann::json report;
  report["type"] = std::string(quant::traits(type).name);
  report["shape"] = shape.to_string();
  report["seed"] = seed;
  report["activation_scale"] = activation_scale;
  report["mismatches"] = nlohmann::json::array();
  int64_t identical = 0;
  double min_margin = INFINITY;
  for (int64_t t = 0; t < nt; ++t) {
    auto [a, margin] = top2(logits[QGATE_PATH_F16], t);
    auto [b, margin_mmq] = top2(logits[QGATE_PATH_MMQ], t);
    min_margin = std::min(min_margin, double(margin));
    if (a == b) {
      ++identical;
    } else {
      report["mismatches"].push_back({{"token", t}, {"f16_argmax", a}, {"mmq_argmax", b},
                                      {"f16_top2_margin", margin}, {"mmq_top2_margin", margin_mmq}});
    }
  }
  report["tokens"] = nt;
  report["identical"] = identical;
  report["min_f16_top2_margin"] = min_margin;
  if (o.json) std::cout << report.dump() << "\n";
  else
    std::cout << "argmax over " << od << " rows, " << nt << " tokens, " << report["type"].get<std::string>()
              << ": " << identical << "/" << nt << " identical between f16 and MMQ"
              << " (smallest f16 top-2 margin " << min_margin << ")\n";
  return identical == nt ? kExitOk : kExitCaseFailed;
}

// ---------------------------------------------------------------------------------------------
// A worker's scratch folder (sandbox.h); null, with the error written to `writer` and stderr, when
// it cannot be made.
std::unique_ptr<ScratchDir> make_scratch(RecordWriter& writer) {
  try {
    return std::make_unique<ScratchDir>();
  } catch (const std::exception& e) {
    writer.write(error_record(v1::WORKER_ERROR_KIND_DEVICE, e.what()));
    std::cerr << "qgate-worker: " << e.what() << "\n";
    return nullptr;
  }
}

// Waits for the serve judge when the worker ends, however it ends, so that the judge has passed
// on every reply before qgated sees the worker gone.
struct ServeJudgeWait {
  pid_t pid = -1;
  ~ServeJudgeWait() {
    if (pid <= 0) return;
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
};

int cmd_serve(const CommonOptions& o, const std::vector<std::string>& judge_args) {
  // What the build prints goes to the log, never among the replies qgated reads; and what the
  // worker replies reaches qgated only through its judge (serve_judge.h), started before the build.
  std::string error;
  const int record_fd = take_record_stream(&error);
  if (record_fd < 0) {
    std::cerr << "qgate-worker: " << error << "\n";
    return kExitDevice;
  }
  ServeJudgeChannel channel;
  try {
    channel = start_serve_judge(judge_args, record_fd);
  } catch (const std::exception& e) {
    DescriptorStream direct(record_fd);
    RecordWriter(OutputFormat::proto, direct.stream()).write(error_record(v1::WORKER_ERROR_KIND_DEVICE, e.what()));
    std::cerr << "qgate-worker: serve judge: " << e.what() << "\n";
    return kExitDevice;
  }
  ServeJudgeWait wait_for_judge{channel.judge_pid};  // declared first: waits after the replies close
  DescriptorStream replies(channel.replies_fd);
  RecordWriter writer(OutputFormat::proto, replies.stream());
  // Made now, before any thread; null (the error written) when it cannot be.
  const std::unique_ptr<ScratchDir> scratch = make_scratch(writer);
  if (!scratch) return kExitDevice;
  Session s;
  if (int rc = open_session(o, {{"command", "serve"}}, writer, &s, [&] { return enter_sandbox(o, {}, *scratch); });
      rc != kExitOk)
    return rc;
  return serve_requests(*s.build, *s.device, o.threads, STDIN_FILENO, writer);
}

// A command-mode arm: no build and no device context of its own (the program opens what it uses).
// Its programs run in the sandbox (docs/security.md), with the job's folder writable and a scratch
// folder as their TMPDIR.
int cmd_command(const CommonOptions& o) {
  RecordWriter writer(OutputFormat::proto, std::cout);
  // Made now, before any thread; null (the error written) when it cannot be.
  const std::unique_ptr<ScratchDir> scratch = make_scratch(writer);
  if (!scratch) return kExitDevice;
  v1::RunContext context;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  context.set_host(host);
  context.set_backend(o.backend == "cuda" ? v1::BACKEND_CUDA : v1::BACKEND_CPU);
  context.set_device_ordinal(o.device);
  if (o.backend == "cpu" && !o.cpu_device_uuid.empty()) {  // a fake device of a several-device daemon
    context.set_device_name(o.cpu_device_name);
    context.set_device_uuid(o.cpu_device_uuid);
  }
  context.set_qgate_version(QGATE_VERSION);
  context.set_qgate_commit(QGATE_COMMIT);
  context.set_schema_version(kSchemaVersion);
  context.set_started_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
  (*context.mutable_options())["command"] = "command";
  return serve_command_arm(context, STDIN_FILENO, writer, [&](const v1::CommandArm& arm) {
    SandboxMode mode = SandboxMode::automatic;
    parse_sandbox_mode(o.sandbox, &mode);
    setenv("TMPDIR", scratch->path().c_str(), 1);
    SandboxPlan plan = sandbox_plan("", command_read_paths(arm));
    if (!arm.workdir().empty()) plan.write_paths.push_back(arm.workdir());
    plan.scratch_dir = scratch->path();
    return apply_sandbox(mode, plan);
  });
}

void add_parity_options(CLI::App* cmd, CommonOptions& o, ParityCommand& p, bool& edge_cases, bool& no_edge_cases) {
  add_common(cmd, o);
  cmd->add_option("--types", p.types, "all, or a comma-separated list (q4_0,q6_K,...)")->capture_default_str();
  cmd->add_option("--shapes", p.shapes, "standard, quick (standard without the 7B shape) or none")
      ->check(CLI::IsMember(qgate::shape_set_words()))
      ->capture_default_str();
  cmd->add_option("--shape", p.extra_shapes, "extra case NTxODxK (repeatable)");
  cmd->add_option("--gguf", p.gguf, "run parity on the blocks of this model file's tensors")->check(CLI::ExistingFile);
  cmd->add_option("--tensors", p.tensors, "comma-separated globs over the model's tensor names")->capture_default_str();
  cmd->add_option("--gguf-tokens", p.gguf_tokens, "activation rows per tensor case")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--path", p.path, "env (MINFER_MMQ), f16, mmq or both")->capture_default_str();
  std::vector<std::string> numerics = {"auto"};
  for (const auto& w : words::numerics_words()) numerics.push_back(w);
  cmd->add_option("--numerics", p.numerics,
                  "the profile outputs are judged in: auto (what the build declares, else qgate), qgate, ggml, "
                  "ggml-cpu or unknown (docs/parity.md)")
      ->check(CLI::IsMember(numerics))
      ->capture_default_str();
  cmd->add_flag("--edge-cases", edge_cases,
                "run the edge activation rows (zero, outlier, tiny, ties, large) per type (default with a shape set)");
  cmd->add_flag("--no-edge-cases", no_edge_cases, "skip the edge activation rows")->excludes("--edge-cases");
  cmd->add_option("--atol", p.atol, "every element's absolute floor; the bound adds rtol*sum|terms|")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

}  // namespace

int run_worker_cli(int argc, char** argv) {
  CLI::App app{"qgate-worker: runs one kernel build's parity cases and timings"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("qgate-worker ") + QGATE_VERSION + " (" + QGATE_COMMIT +
                                        "), worker record schema " + std::to_string(kSchemaVersion));

  CommonOptions info_o, parity_o, bench_o, argmax_o;
  auto* info = app.add_subcommand("info", "show what a kernel build reports about itself");
  info->add_option("--build", info_o.build, "kernel build (.so)")->capture_default_str();
  info->add_flag("--json", info_o.json, "JSON output");

  auto* parity = app.add_subcommand("parity", "run parity cases against the CPU reference");
  ParityCommand parity_cmd;
  bool edge_cases = false, no_edge_cases = false;
  add_parity_options(parity, parity_o, parity_cmd, edge_cases, no_edge_cases);
  // The judge takes the parity command line as it is: it plans the same sweep.
  CommonOptions judge_o;
  auto* judge = app.add_subcommand("judge", "judge a parity worker's outputs, read on stdin "
                                            "(started by `parity` before it loads the build; never loads it)");
  ParityCommand judge_cmd;
  bool judge_edge_cases = false, judge_no_edge_cases = false;
  add_parity_options(judge, judge_o, judge_cmd, judge_edge_cases, judge_no_edge_cases);

  auto* bench = app.add_subcommand("bench", "time the build's paths (and cuBLASLt f16) per type");
  add_common(bench, bench_o);
  BenchCommand bench_cmd;
  bench->add_option("--types", bench_cmd.types, "all, or a comma-separated list")->capture_default_str();
  bench->add_option("--nt", bench_cmd.nts, "token counts (default 512 2048)")->delimiter(',');
  bench->add_option("--odk", bench_cmd.odk, "ODxK weight shapes (default 4096x14336,14336x4096)")->delimiter(',');
  bench->add_option("--path", bench_cmd.path, "env, f16, mmq or both")->capture_default_str();
  bench->add_option("--warmup", bench_cmd.warmup, "untimed runs first")->check(CLI::NonNegativeNumber)->capture_default_str();
  bench->add_option("--reps", bench_cmd.reps, "timed repetitions (median reported)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  bench->add_flag("--no-cublaslt", bench_cmd.no_cublaslt, "do not time the cuBLASLt f16 baseline");
  bench->add_flag("--warm-l2", bench_cmd.warm_cache, "do not flush L2 between repetitions");
  bench->add_option("--back-to-back", bench_cmd.back_to_back,
                    "calls queued back to back per timed sample, reported per call (needs --warm-l2)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  bench->add_option("--json-out", bench_cmd.json_out, "write the full report as JSON to this file");

  auto* argmax = app.add_subcommand("argmax", "compare greedy argmax over an output head, f16 vs MMQ");
  add_common(argmax, argmax_o);
  std::string argmax_type = "q6_K";
  int64_t head_od = 32000, head_k = 4096, head_nt = 128;
  double act_scale = 1.0;
  argmax->add_option("--type", argmax_type, "weight type of the head")->capture_default_str();
  argmax->add_option("--od", head_od, "rows of the head (vocabulary)")->capture_default_str();
  argmax->add_option("--k", head_k, "hidden size")->capture_default_str();
  argmax->add_option("--nt", head_nt, "tokens")->capture_default_str();
  argmax->add_option("--activation-scale", act_scale, "scale of the random hidden states")->capture_default_str();

  CommonOptions describe_o;
  auto* describe = app.add_subcommand("describe", "write the run context (device, build) record and exit");
  add_common(describe, describe_o);

  CommonOptions serve_o;
  auto* serve = app.add_subcommand("serve", "answer prepare/run requests on stdin (used by qgated)");
  add_common(serve, serve_o);

  CommonOptions serve_judge_o;
  int to_worker_fd = -1, from_worker_fd = -1;
  auto* serve_judge = app.add_subcommand("serve-judge", "pass requests to a serve worker and judge its replies "
                                                        "(started by `serve` before it loads the build; never loads it)");
  add_common(serve_judge, serve_judge_o);
  serve_judge->add_option("--to-worker-fd", to_worker_fd, "where the worker reads requests")->required();
  serve_judge->add_option("--from-worker-fd", from_worker_fd, "where the worker writes replies")->required();

  CommonOptions command_o;
  auto* command = app.add_subcommand("command", "run a command-mode arm's program for each timed run (used by qgated)");
  add_common(command, command_o);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  try {
    if (*info) return cmd_info(info_o);
    if (*parity) {
      if (edge_cases || no_edge_cases) parity_cmd.edge_cases = edge_cases;
      parity_cmd.shapes_given = parity->count("--shapes") > 0;
      // The judge's command line: this one with the subcommand renamed.
      std::vector<std::string> judge_args(argv + 1, argv + argc);
      for (auto& a : judge_args)
        if (a == "parity") {
          a = "judge";
          break;
        }
      return cmd_parity(parity_o, parity_cmd, judge_args);
    }
    if (*judge) {
      if (judge_edge_cases || judge_no_edge_cases) judge_cmd.edge_cases = judge_edge_cases;
      judge_cmd.shapes_given = judge->count("--shapes") > 0;
      return cmd_judge(judge_o, judge_cmd);
    }
    if (*bench) return cmd_bench(bench_o, bench_cmd);
    if (*serve) {
      std::vector<std::string> judge_args(argv + 1, argv + argc);
      for (auto& a : judge_args)
        if (a == "serve") {
          a = "serve-judge";
          break;
        }
      return cmd_serve(serve_o, judge_args);
    }
    if (*serve_judge)
      return run_serve_judge(serve_judge_o.backend == "cuda" ? QGATE_BACKEND_CUDA : QGATE_BACKEND_CPU, to_worker_fd,
                             from_worker_fd);
    if (*command) return cmd_command(command_o);
    if (*describe) {
      RecordWriter writer(resolve_format(describe_o), std::cout);
      Session s;
      return open_session(describe_o, {{"command", "describe"}}, writer, &s);
    }
    if (*argmax) return cmd_argmax(argmax_o, argmax_type, head_od, head_k, head_nt, act_scale);
  } catch (const DeviceError& e) {
    std::cerr << "qgate-worker: device error: " << e.what() << "\n";
    return kExitDevice;
  } catch (const std::exception& e) {
    std::cerr << "qgate-worker: " << e.what() << "\n";
    return kExitDevice;
  }
  return kExitUsage;
}

}  // namespace qgate::worker
