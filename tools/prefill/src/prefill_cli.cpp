// qgate-prefill's subcommands (see prefill_cli.h). stdout carries only the result; progress and
// errors go to stderr, one line each.
#include "qgate/prefill/prefill_cli.h"

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "qgate/prefill/bench_report.h"
#include "qgate/prefill/llama_model.h"
#include "qgate/prefill/model_writer.h"
#include "qgate/prefill/prefill_engine.h"
#include "qgate/prefill/prefill_error.h"
#include "qgate/worker/device_api.h"
#include "qgate/worker/kernel_build.h"
#include "qgate_revision.h"

namespace qgate::prefill {

namespace {

constexpr int kExitRun = 1;
constexpr int kExitInput = 2;

void note(const std::string& line) { std::cerr << "qgate-prefill: " << line << "\n"; }

// Beside the executable: plugins/ in a bundle, lib/ in the build tree (as qgate-worker looks).
std::string default_build_path() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "libqgate_ref.so";
  const auto root = exe.parent_path() / "..";
  for (const char* dir : {"plugins", "lib"}) {
    const auto candidate = (root / dir / "libqgate_ref.so").lexically_normal();
    if (std::filesystem::exists(candidate, ec)) return candidate.string();
  }
  return (root / "plugins" / "libqgate_ref.so").lexically_normal().string();
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown";
}

// Seeded prompt token ids (splitmix64), uniform over the vocabulary.
std::vector<int32_t> make_prompt(int64_t n, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> out;
  uint64_t state = seed;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    out.push_back(int32_t((z ^ (z >> 31)) % uint64_t(vocab)));
  }
  return out;
}

struct RunOptions {
  std::string model;
  std::string build = default_build_path();
  int64_t prompt = 512;
  int repetitions = 3;
  std::string backend = "cpu";
  int device = 0;
  int threads = 0;
  uint64_t seed = 1234;
  std::string output = "json";
};

int cmd_run(const RunOptions& o) {
  const LlamaModel model = LlamaModel::open(o.model);
  const LlamaConfig& c = model.config();
  note("model " + o.model + ": " + model.description() + ", " + std::to_string(c.n_layer) + " blocks, embedding " +
       std::to_string(c.n_embd) + ", vocabulary " + std::to_string(c.n_vocab));

  worker::BuildLoadError load_error;
  std::string message;
  const auto build = worker::KernelBuild::load(o.build, &load_error, &message);
  if (!build) throw PrefillError(PrefillError::Kind::input, message.find(o.build) == std::string::npos ? o.build + ": " + message : message);

  std::unique_ptr<worker::DeviceApi> device;
  try {
    device = o.backend == "cuda" ? worker::make_cuda_device_api(o.device) : worker::make_cpu_device_api(o.threads);
  } catch (const std::exception& e) {
    throw PrefillError(PrefillError::Kind::input, std::string("cannot open the ") + o.backend + " device: " + e.what());
  }
  v1::RunContext context;
  device->describe(&context);

  PrefillEngine engine(model, *build, *device, o.threads, o.prompt, note);
  note(std::string("path ") + (engine.mmq() ? "MMQ" : "f16") + ", " + std::to_string(engine.resident_bytes()) +
       " bytes resident in the build");

  const std::vector<int32_t> prompt = make_prompt(o.prompt, c.n_vocab, o.seed);
  BenchRecord r;
  r.test_time_unix_s = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch()).count();
  const PassResult warm = engine.forward(prompt);
  note("warm-up pass " + std::to_string(warm.wall_ns / 1e6) + " ms");
  for (int i = 0; i < o.repetitions; ++i) {
    const PassResult pass = engine.forward(prompt);
    note("pass " + std::to_string(i + 1) + ": " + std::to_string(pass.wall_ns / 1e6) + " ms, of which host " +
         std::to_string(pass.host_ns / 1e6) + " ms");
    if (pass.tokens != warm.tokens) note("warning: pass " + std::to_string(i + 1) + " gave other tokens than the warm-up pass");
    r.samples_ns.push_back(uint64_t(pass.wall_ns));
  }
  note("greedy margin over the prompt (top - second, in logit standard deviations): min " +
       std::to_string(warm.min_margin) + ", median " + std::to_string(warm.median_margin));

  const v1::BuildInfo info = build->info();
  r.build_commit = info.name() + "@" + (info.commit().empty() ? info.sha256().substr(0, 12) : info.commit());
  r.cpu_info = cpu_model_name();
  r.gpu_info = o.backend == "cuda" ? context.device_name() : "";
  r.backends = o.backend == "cuda" ? "CUDA" : "CPU";
  r.model_filename = o.model;
  r.model_type = model.description();
  r.model_size = model.size_bytes();
  r.model_n_params = model.n_params();
  r.n_batch = r.n_ubatch = o.prompt;
  r.n_threads = context.cpu_threads() > 0 ? context.cpu_threads() : o.threads;
  r.n_gpu_layers = o.backend == "cuda" ? c.n_layer + 1 : 0;
  r.main_gpu = o.device;
  r.n_prompt = o.prompt;
  r.mmq = engine.mmq();
  r.tokens = warm.tokens;
  std::cout << (o.output == "jsonl" ? bench_jsonl({r}) : bench_json({r})) << std::flush;
  return 0;
}

struct WriteOptions {
  std::string out;
  std::string shape = "tiny";
  int layers = 2;
  uint64_t seed = 1;
};

int cmd_write_model(const WriteOptions& o) {
  const ModelSpec spec = model_spec(*parse_model_shape(o.shape), o.layers);
  const auto t0 = std::chrono::steady_clock::now();
  write_model(o.out, spec, o.seed, [&](const PlannedTensor& t) {
    if (spec.shape != ModelShape::tiny) note("writing " + t.name);
  });
  note("wrote " + o.out + " (" + spec.name + ", " + std::to_string(spec.n_layer) + " blocks, " +
       std::to_string(std::filesystem::file_size(o.out)) + " bytes) in " +
       std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()) + " s");
  return 0;
}

}  // namespace

int run_prefill_cli(int argc, char** argv) {
  CLI::App app{"qgate-prefill: a llama-style prefill through a qgate kernel build, timed like llama-bench"};
  app.set_version_flag("--version", std::string("qgate-prefill ") + QGATE_VERSION + " (" + QGATE_COMMIT + ")");
  app.require_subcommand(1);

  RunOptions ro;
  CLI::App* run = app.add_subcommand("run", "time full forward passes of a prompt; llama-bench JSON on stdout");
  run->add_option("--model", ro.model, "GGUF model file")->required();
  run->add_option("--build", ro.build, "kernel build (.so)")->capture_default_str();
  run->add_option("--prompt", ro.prompt, "prompt tokens")->check(CLI::Range(int64_t(1), int64_t(1) << 16))->capture_default_str();
  run->add_option("--repetitions", ro.repetitions, "timed passes after one warm-up")->check(CLI::Range(1, 1000))->capture_default_str();
  run->add_option("--backend", ro.backend, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  run->add_option("--device", ro.device, "CUDA device ordinal")->check(CLI::NonNegativeNumber)->capture_default_str();
  run->add_option("--threads", ro.threads, "CPU threads, 0 = all")->check(CLI::NonNegativeNumber)->capture_default_str();
  run->add_option("--seed", ro.seed, "seed of the prompt's token ids")->capture_default_str();
  run->add_option("--output", ro.output, "json (an array) or jsonl (one object a line)")
      ->check(CLI::IsMember({"json", "jsonl"}))->capture_default_str();

  WriteOptions wo;
  CLI::App* write = app.add_subcommand("write-model", "write a llama-shaped GGUF model with real quantized tensors");
  write->add_option("--out", wo.out, "file to write")->required();
  write->add_option("--shape", wo.shape, "tiny or 7b-q4_K_M")->check(CLI::IsMember({"tiny", "7b-q4_K_M"}))->capture_default_str();
  write->add_option("--layers", wo.layers, "blocks")->check(CLI::Range(1, 256))->capture_default_str();
  write->add_option("--seed", wo.seed, "weight seed; the same seed writes the same bytes")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kExitInput;
  }
  try {
    if (*run) return cmd_run(ro);
    return cmd_write_model(wo);
  } catch (const PrefillError& e) {
    note(std::string(e.kind() == PrefillError::Kind::input ? "error: " : "run failed: ") + e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    note(std::string("run failed: ") + e.what());
    return kExitRun;
  }
}

}  // namespace qgate::prefill
