// Parity cases: plan the sweep, generate seeded inputs (or read a model's blocks), run the build,
// and judge each output against the parity reference of its path in the build's numerics.
#include "qgate/worker/parity.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "qgate/worker/cuda_failure.h"

namespace qgate::worker {
namespace {

v1::GemmPath to_proto_path(int path) {
  return path == QGATE_PATH_MMQ ? v1::GEMM_PATH_MMQ : v1::GEMM_PATH_F16;
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

double host_memory_bytes() { return double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE)); }

uint64_t edge_seed(uint64_t case_seed, ActivationKind kind) {
  return case_seed ^ (0x9e3779b97f4a7c15ull * (uint64_t(kind) + 1));
}

}  // namespace

v1::NumericsProfile to_proto(reference::Numerics numerics) {
  switch (numerics) {
    case reference::Numerics::qgate: return v1::NUMERICS_PROFILE_QGATE;
    case reference::Numerics::ggml: return v1::NUMERICS_PROFILE_GGML;
    case reference::Numerics::ggml_cpu: return v1::NUMERICS_PROFILE_GGML_CPU;
    case reference::Numerics::unknown: return v1::NUMERICS_PROFILE_UNKNOWN;
  }
  return v1::NUMERICS_PROFILE_UNSPECIFIED;
}

std::optional<reference::Numerics> from_proto(v1::NumericsProfile profile) {
  for (auto n : {reference::Numerics::qgate, reference::Numerics::ggml, reference::Numerics::ggml_cpu,
                 reference::Numerics::unknown})
    if (to_proto(n) == profile) return n;
  return std::nullopt;
}

v1::ActivationKind to_proto(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::random: return v1::ACTIVATION_KIND_RANDOM;
    case ActivationKind::zero: return v1::ACTIVATION_KIND_ZERO;
    case ActivationKind::outlier: return v1::ACTIVATION_KIND_OUTLIER;
    case ActivationKind::tiny: return v1::ACTIVATION_KIND_TINY;
    case ActivationKind::ties: return v1::ACTIVATION_KIND_TIES;
    case ActivationKind::large: return v1::ACTIVATION_KIND_LARGE;
  }
  return v1::ACTIVATION_KIND_UNSPECIFIED;
}

std::vector<ParityCaseSpec> plan_cases(const ParityOptions& options) {
  std::vector<ParityCaseSpec> cases;
  for (quant::WeightType type : options.types)
    for (const GemmShape& shape : options.shapes)
      cases.push_back({type, shape, ActivationKind::random, case_seed(options.seed, type, shape), {}});
  if (options.edge_cases) {
    const GemmShape shape = edge_case_shape();
    for (quant::WeightType type : options.types)
      for (ActivationKind kind : edge_activation_kinds())
        cases.push_back({type, shape, kind, edge_seed(case_seed(options.seed, type, shape), kind), {}});
  }
  return cases;
}

OutputComparison compare_output(const float* y, const reference::Expectation& expected,
                                const std::vector<double>& exact, double atol, size_t n) {
  OutputComparison c;
  double err2 = 0, ref2 = 0, exact_err2 = 0, exact2 = 0;
  for (size_t i = 0; i < n; ++i) {
    const double ref = expected.y[i];
    const double bound = atol + expected.slack[i];
    c.loosest_bound = std::max(c.loosest_bound, bound);
    c.ref_max_abs = std::max(c.ref_max_abs, std::fabs(ref));
    uint32_t bits;
    std::memcpy(&bits, &y[i], sizeof bits);
    if (bits == 0xFFFFFFFFu) {
      ++c.unwritten_count;
      continue;
    }
    if (std::isnan(y[i])) {
      ++c.nan_count;
      continue;
    }
    if (std::isinf(y[i])) {
      ++c.inf_count;
      continue;
    }
    const double d = std::fabs(double(y[i]) - ref);
    c.max_abs_diff = std::max(c.max_abs_diff, d);
    if (std::fabs(ref) > atol) c.max_rel_diff = std::max(c.max_rel_diff, d / std::fabs(ref));
    if (const double fraction = d / bound; c.worst_index < 0 || fraction > c.worst_tolerance_fraction) {
      c.worst_tolerance_fraction = fraction;
      c.worst_index = int64_t(i);
    }
    err2 += d * d;
    ref2 += ref * ref;
    const double e = double(y[i]) - exact[i];
    exact_err2 += e * e;
    exact2 += exact[i] * exact[i];
  }
  auto ratio = [](double err, double ref) { return ref > 0 ? err / ref : (err > 0 ? INFINITY : 0.0); };
  c.nmse = ratio(err2, ref2);
  c.exact_nmse = ratio(exact_err2, exact2);
  return c;
}

ParityRunner::ParityRunner(const KernelBuild& build, DeviceApi& device, int threads)
    : build_(build), device_(device), threads_(threads) {}

ParityRunner::~ParityRunner() = default;

BuildContext* ParityRunner::context_for(int path, std::string* error) {
  if (auto it = contexts_.find(path); it != contexts_.end()) return it->second.get();
  if (auto it = context_errors_.find(path); it != context_errors_.end()) {
    *error = it->second;
    return nullptr;
  }
  try {
    auto ctx = std::make_unique<BuildContext>(build_, device_.backend(), device_.device_ordinal(),
                                              path, threads_);
    return (contexts_[path] = std::move(ctx)).get();
  } catch (const std::exception& e) {
    context_errors_[path] = e.what();
    *error = e.what();
    return nullptr;
  }
}

void ParityRunner::open_contexts(const std::vector<int>& paths) {
  for (int path : paths) {
    std::string error;
    context_for(path, &error);
  }
}

void ParityRunner::release_contexts() {
  contexts_.clear();
  context_errors_.clear();
}

void ParityRunner::note_cuda_failure(v1::ParityCase* c) {
  // A build that reports a failure may have left a CUDA error behind; it shows at the next sync.
  if (auto failure = cuda_failure_left_behind(device_)) {
    c->set_message(c->message() + " (" + failure->error() + ")" + last_build_call_note(*failure));
    *c->mutable_cuda() = *failure;
  }
}

void ParityRunner::run(const ParityOptions& options, const std::vector<ParityCaseSpec>& cases,
                       const std::function<void(ProducedOutput&&)>& on_output) {
  const int32_t paths = int32_t(options.paths.size());
  for (size_t i = 0; i < cases.size(); ++i) run_case(options, cases[i], int32_t(i) * paths, on_output);
}

v1::ParityCase describe_case(const ParityOptions& options, const ParityCaseSpec& spec, int path) {
  v1::ParityCase c;
  c.set_type(std::string(quant::traits(spec.type).name));
  c.mutable_shape()->set_nt(spec.shape.nt);
  c.mutable_shape()->set_od(spec.shape.od);
  c.mutable_shape()->set_k(spec.shape.k);
  c.set_seed(spec.seed);
  c.set_path(to_proto_path(path));
  c.set_numerics(to_proto(options.numerics));
  c.set_activation(to_proto(spec.activation));
  c.set_weights_source(spec.weights.name);
  c.set_atol(options.atol);
  return c;
}

void ParityRunner::run_case(const ParityOptions& options, const ParityCaseSpec& spec, int32_t first_slot,
                            const std::function<void(ProducedOutput&&)>& on_output) {
  const auto& traits = quant::traits(spec.type);
  const GemmShape& shape = spec.shape;
  // Every requested path gets exactly one output, in order, so the judge can tell a missing or
  // repeated one from the build writing to its channel.
  int32_t slot = first_slot;
  auto emit = [&](v1::ParityCase c, std::vector<float> y = {}, bool has_output = false) {
    ProducedOutput out;
    out.slot = slot++;
    out.produced = std::move(c);
    out.y = std::move(y);
    out.has_output = has_output;
    on_output(std::move(out));
  };
  // Resolve each path's context first so the case names the path it really ran.
  std::vector<std::pair<int, BuildContext*>> runs;
  for (int requested : options.paths) {
    std::string error;
    BuildContext* ctx = context_for(requested, &error);
    if (!ctx) {
      v1::ParityCase c = describe_case(options, spec, requested == QGATE_PATH_MMQ ? QGATE_PATH_MMQ : QGATE_PATH_F16);
      c.set_outcome(v1::CASE_OUTCOME_NOT_SUPPORTED);
      c.set_message(error);
      emit(std::move(c));
      continue;
    }
    runs.emplace_back(ctx->path(), ctx);
  }
  if (runs.empty()) return;
  auto fail_all = [&](v1::CaseOutcome outcome, const std::string& message) {
    for (auto& [path, ctx] : runs) {
      v1::ParityCase c = describe_case(options, spec, path);
      c.set_outcome(outcome);
      c.set_message(message);
      emit(std::move(c));
    }
  };

  if (shape.k % traits.block_elems != 0) {
    fail_all(v1::CASE_OUTCOME_INVALID_PROBLEM, "k=" + std::to_string(shape.k) + " is not a multiple of " +
                                                   std::string(traits.name) + "'s block of " +
                                                   std::to_string(traits.block_elems));
    return;
  }

  // Refuse what cannot fit before generating gigabytes of inputs. The host holds the weights,
  // the activations, the output and three f64 references (expectation, slack, exact product).
  const double weight_bytes = double(shape.od) * double(quant::row_bytes(spec.type, shape.k));
  const double device_need = weight_bytes + double(shape.od) * double(shape.k) * 2.0 +
                             double(shape.nt) * double(shape.k) * 6.0 + double(shape.nt) * double(shape.od) * 4.0;
  const double host_need =
      weight_bytes + double(shape.nt) * double(shape.k) * 12.0 + double(shape.nt) * double(shape.od) * 28.0;
  v1::RunContext described;
  device_.describe(&described);
  std::string too_big;
  if (device_need > double(described.device_memory_bytes()))
    too_big = "case needs about " + gib(device_need) + " of device memory; " + described.device_name() + " has " +
              gib(double(described.device_memory_bytes()));
  else if (host_need > host_memory_bytes())
    too_big = "case needs about " + gib(host_need) + " of host memory for its reference; this host has " +
              gib(host_memory_bytes());
  if (!too_big.empty()) {
    fail_all(v1::CASE_OUTCOME_ERROR, "OUT_OF_MEMORY: " + too_big);
    return;
  }

  std::vector<uint8_t> weights;
  try {
    weights = spec.weights.load ? spec.weights.load() : make_weights(spec.type, shape.od, shape.k, spec.seed);
  } catch (const std::exception& e) {
    fail_all(v1::CASE_OUTCOME_ERROR, "cannot read the weights of " + spec.weights.name + ": " + e.what());
    return;
  }
  const std::vector<float> x = make_activations(spec.activation, shape.nt, shape.k, spec.seed);
  const size_t n_out = size_t(shape.nt) * size_t(shape.od);

  for (auto& [path, ctx] : runs) {
    v1::ParityCase c = describe_case(options, spec, path);
    try {
      PreparedGemm gemm(*ctx, int32_t(spec.type), shape.od, shape.k, weights.data(), shape.nt);
      if (!gemm.ok()) {
        c.set_outcome(gemm.status() == QGATE_ERR_INVALID_ARGUMENT ? v1::CASE_OUTCOME_INVALID_PROBLEM
                      : gemm.status() == QGATE_ERR_UNSUPPORTED   ? v1::CASE_OUTCOME_NOT_SUPPORTED
                                                                  : v1::CASE_OUTCOME_ERROR);
        c.set_message(std::string(to_string(gemm.status())) + ": " + gemm.message());
        note_cuda_failure(&c);
        emit(std::move(c));
        continue;
      }
      DeviceBuffer dx(device_, x.size() * sizeof(float));
      DeviceBuffer dy(device_, n_out * sizeof(float));
      device_.upload(dx.as<void>(), x.data(), x.size() * sizeof(float));
      device_.fill_bytes(dy.as<void>(), kPoisonByte, n_out * sizeof(float));
      qgate_status status = QGATE_OK;
      const double us = device_.time_us([&] { status = gemm.run(dx.as<float>(), shape.nt, dy.as<float>(), device_.stream()); });
      c.set_run_ms(us / 1000.0);
      if (status != QGATE_OK) {
        c.set_outcome(v1::CASE_OUTCOME_ERROR);
        c.set_message(std::string(to_string(status)) + ": " + gemm.message());
        note_cuda_failure(&c);
        emit(std::move(c));
        continue;
      }
      std::vector<float> y(n_out);
      device_.download(y.data(), dy.as<void>(), n_out * sizeof(float));
      emit(std::move(c), std::move(y), true);
    } catch (const DeviceError& e) {
      // A device error surfaces at the next synchronization, after the build call that caused
      // it: name that call, so an illegal address is pinned on the build's kernel.
      // The error names the call it followed as it was thrown: the unwinding since has released
      // the GEMM, itself a build call.
      const char* last_now = last_build_call();
      const std::string last = !e.last_build_call().empty() ? e.last_build_call() : last_now ? last_now : "";
      c.set_outcome(v1::CASE_OUTCOME_ERROR);
      c.set_message(std::string(e.out_of_memory() ? "OUT_OF_MEMORY: " : "DEVICE: ") + e.what() +
                    (last.empty() ? std::string() : " [last build call: " + last + "]"));
      if (auto failure = cuda_failure_of(e)) *c.mutable_cuda() = *failure;
      emit(std::move(c));
    }
  }
}

v1::ParityCase ParityJudge::judge(const ParityCaseSpec& spec, int path, const v1::ParityCase& produced,
                                  const std::vector<float>& y) {
  v1::ParityCase c = describe_case(options_, spec, path);
  c.set_run_ms(produced.run_ms());
  const GemmShape& shape = spec.shape;
  const size_t n_out = size_t(shape.nt) * size_t(shape.od);
  if (y.size() != n_out) {
    c.set_outcome(v1::CASE_OUTCOME_INCORRECT);
    c.set_message("the worker handed over " + std::to_string(y.size()) + " outputs, the case has " +
                  std::to_string(n_out));
    return c;
  }
  if (inputs_of_ != &spec) {
    inputs_of_ = nullptr;
    exact_.clear();
    try {
      weights_ = spec.weights.load ? spec.weights.load() : make_weights(spec.type, shape.od, shape.k, spec.seed);
    } catch (const std::exception& e) {
      c.set_outcome(v1::CASE_OUTCOME_ERROR);
      c.set_message("the judge cannot read the weights of " + spec.weights.name + ": " + e.what());
      return c;
    }
    x_ = make_activations(spec.activation, shape.nt, shape.k, spec.seed);
    inputs_of_ = &spec;
  }
  const bool mmq = path == QGATE_PATH_MMQ;
  const reference::GemmProblem problem{int32_t(spec.type), shape.od, shape.k, shape.nt, weights_.data(), x_.data()};
  if (exact_.empty()) exact_ = reference::exact_product(problem, threads_);
  // The profile's library picks a kernel per call (ggml: MMVQ up to 8 tokens, MMQ above; MMVF, MMF
  // or cuBLAS for f16): the reference takes the same route, and the case records it.
  const reference::Expectation expected = mmq ? reference::expect_mmq(options_.numerics, problem, threads_)
                                              : reference::expect_f16(options_.numerics, problem, threads_);
  c.set_reference(expected.route);
  const OutputComparison cmp = compare_output(y.data(), expected, exact_, options_.atol, n_out);
  // Random rows are also held to llama.cpp's NMSE threshold against the exact product, so wrong
  // maths fails whatever profile was declared. Edge rows report it: an f16 scale underflows
  // on a 1e-6 row by design, and is judged against its own profile.
  const bool gate_exact = spec.activation == ActivationKind::random;
  c.set_tolerance(cmp.loosest_bound);
  c.set_rtol(expected.rtol);
  c.set_max_abs_diff(cmp.max_abs_diff);
  c.set_nmse(cmp.nmse);
  c.set_ref_max_abs(cmp.ref_max_abs);
  c.set_worst_tolerance_fraction(cmp.worst_tolerance_fraction);
  c.set_max_rel_diff(cmp.max_rel_diff);
  c.set_exact_nmse(cmp.exact_nmse);
  c.set_exact_nmse_limit(gate_exact ? reference::kExactNmseLimit : 0.0);
  c.set_nan_count(cmp.nan_count);
  c.set_inf_count(cmp.inf_count);
  c.set_unwritten_count(cmp.unwritten_count);
  std::string why;
  if (cmp.unwritten_count) why += std::to_string(cmp.unwritten_count) + " elements unwritten; ";
  if (cmp.nan_count) why += std::to_string(cmp.nan_count) + " NaN; ";
  if (cmp.inf_count) why += std::to_string(cmp.inf_count) + " Inf; ";
  if (cmp.worst_tolerance_fraction > 1.0 && cmp.worst_index >= 0) {
    const size_t i = size_t(cmp.worst_index);
    const double bound = options_.atol + expected.slack[i];
    why += "y[" + std::to_string(i / size_t(shape.od)) + "][" + std::to_string(i % size_t(shape.od)) + "] = " +
           number(y[i]) + ", expected " + number(expected.y[i]) + " (" +
           std::string(reference::to_string(options_.numerics)) + " numerics): |diff| " +
           number(std::fabs(double(y[i]) - expected.y[i])) + " > bound " + number(bound) + "; ";
  }
  if (gate_exact && !(cmp.exact_nmse <= reference::kExactNmseLimit))
    why += "NMSE against the exact product " + number(cmp.exact_nmse) + " > " + number(reference::kExactNmseLimit) + "; ";
  c.set_outcome(why.empty() ? v1::CASE_OUTCOME_PASSED : v1::CASE_OUTCOME_INCORRECT);
  if (!why.empty()) c.set_message(why.substr(0, why.size() - 2));
  return c;
}

}  // namespace qgate::worker
