// Parity cases: generate seeded inputs, run the build, compare with the reference of its path.
#include "qgate/worker/parity.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>

#include "qgate/quant/reference.h"

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

// Output magnitude up to which the f16 tolerance is absolute (see the f16 comparison below).
constexpr double kF16ToleranceScale = 32.0;

double host_memory_bytes() { return double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE)); }

}  // namespace

OutputComparison compare_output(const float* y, const double* ref, size_t n) {
  OutputComparison c;
  double err2 = 0, ref2 = 0;
  for (size_t i = 0; i < n; ++i) {
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
    const double d = std::fabs(double(y[i]) - ref[i]);
    c.max_abs_diff = std::max(c.max_abs_diff, d);
    c.ref_max_abs = std::max(c.ref_max_abs, std::fabs(ref[i]));
    err2 += d * d;
    ref2 += ref[i] * ref[i];
  }
  c.nmse = ref2 > 0 ? err2 / ref2 : (err2 > 0 ? INFINITY : 0.0);
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

void ParityRunner::run(const ParityOptions& options,
                       const std::function<void(const v1::ParityCase&)>& on_case) {
  for (quant::WeightType type : options.types) {
    const auto& traits = quant::traits(type);
    for (const GemmShape& shape : options.shapes) {
      const uint64_t seed = case_seed(options.seed, type, shape);
      auto base_case = [&](int path) {
        v1::ParityCase c;
        c.set_type(std::string(traits.name));
        c.mutable_shape()->set_nt(shape.nt);
        c.mutable_shape()->set_od(shape.od);
        c.mutable_shape()->set_k(shape.k);
        c.set_seed(seed);
        c.set_path(to_proto_path(path));
        return c;
      };
      // Resolve each path's context first so the case names the path it really ran.
      std::vector<std::pair<int, BuildContext*>> runs;
      for (int requested : options.paths) {
        std::string error;
        BuildContext* ctx = context_for(requested, &error);
        if (!ctx) {
          v1::ParityCase c = base_case(requested == QGATE_PATH_MMQ ? QGATE_PATH_MMQ : QGATE_PATH_F16);
          c.set_outcome(v1::CASE_OUTCOME_NOT_SUPPORTED);
          c.set_message(error);
          on_case(c);
          continue;
        }
        runs.emplace_back(ctx->path(), ctx);
      }
      if (runs.empty()) continue;

      if (shape.k % traits.block_elems != 0) {
        for (auto& [path, ctx] : runs) {
          v1::ParityCase c = base_case(path);
          c.set_outcome(v1::CASE_OUTCOME_INVALID_PROBLEM);
          c.set_message("k=" + std::to_string(shape.k) + " is not a multiple of " +
                        std::string(traits.name) + "'s block of " + std::to_string(traits.block_elems));
          on_case(c);
        }
        continue;
      }

      // Refuse what cannot fit before generating gigabytes of inputs.
      const double weight_bytes = double(shape.od) * double(quant::row_bytes(type, shape.k));
      const double device_need = weight_bytes + double(shape.od) * double(shape.k) * 2.0 +
                                 double(shape.nt) * double(shape.k) * 6.0 +
                                 double(shape.nt) * double(shape.od) * 4.0;
      const double host_need = weight_bytes + double(shape.nt) * double(shape.k) * 4.0 +
                               double(shape.nt) * double(shape.od) * 12.0;
      v1::RunContext described;
      device_.describe(&described);
      std::string too_big;
      if (device_need > double(described.device_memory_bytes()))
        too_big = "case needs about " + gib(device_need) + " of device memory; " +
                  described.device_name() + " has " + gib(double(described.device_memory_bytes()));
      else if (host_need > host_memory_bytes())
        too_big = "case needs about " + gib(host_need) + " of host memory for its reference; " +
                  "this host has " + gib(host_memory_bytes());
      if (!too_big.empty()) {
        for (auto& [path, ctx] : runs) {
          v1::ParityCase c = base_case(path);
          c.set_outcome(v1::CASE_OUTCOME_ERROR);
          c.set_message("OUT_OF_MEMORY: " + too_big);
          on_case(c);
        }
        continue;
      }

      const std::vector<uint8_t> weights = make_weights(type, shape.od, shape.k, seed);
      const std::vector<float> x = make_activations(shape.nt, shape.k, seed);
      const size_t n_out = size_t(shape.nt) * size_t(shape.od);
      std::map<int, std::vector<double>> refs;

      for (auto& [path, ctx] : runs) {
        v1::ParityCase c = base_case(path);
        const bool mmq = path == QGATE_PATH_MMQ;
        c.set_reference(mmq ? "cpu-q8-dot" : "cpu-f64-f16");
        c.set_tolerance(mmq ? options.mmq_tolerance : options.f16_tolerance);
        try {
          PreparedGemm gemm(*ctx, int32_t(type), shape.od, shape.k, weights.data(), shape.nt);
          if (!gemm.ok()) {
            c.set_outcome(gemm.status() == QGATE_ERR_INVALID_ARGUMENT ? v1::CASE_OUTCOME_INVALID_PROBLEM
                          : gemm.status() == QGATE_ERR_UNSUPPORTED   ? v1::CASE_OUTCOME_NOT_SUPPORTED
                                                                      : v1::CASE_OUTCOME_ERROR);
            c.set_message(std::string(to_string(gemm.status())) + ": " + gemm.message());
            on_case(c);
            continue;
          }
          DeviceBuffer dx(device_, x.size() * sizeof(float));
          DeviceBuffer dy(device_, n_out * sizeof(float));
          device_.upload(dx.as<void>(), x.data(), x.size() * sizeof(float));
          device_.fill_bytes(dy.as<void>(), kPoisonByte, n_out * sizeof(float));
          qgate_status status = QGATE_OK;
          const double us = device_.time_us([&] {
            status = gemm.run(dx.as<float>(), shape.nt, dy.as<float>(), device_.stream());
          });
          c.set_run_ms(us / 1000.0);
          if (status != QGATE_OK) {
            c.set_outcome(v1::CASE_OUTCOME_ERROR);
            c.set_message(std::string(to_string(status)) + ": " + gemm.message());
            on_case(c);
            continue;
          }
          std::vector<float> y(n_out);
          device_.download(y.data(), dy.as<void>(), n_out * sizeof(float));

          auto& ref = refs[path];
          if (ref.empty()) {
            ref.resize(n_out);
            if (mmq)
              quant::reference_mmq(type, weights.data(), shape.od, shape.k, x.data(), shape.nt, ref.data());
            else
              quant::reference_f16(type, weights.data(), shape.od, shape.k, x.data(), shape.nt, ref.data());
          }
          const OutputComparison cmp = compare_output(y.data(), ref.data(), n_out);
          if (!mmq) {
            // The tensor cores accumulate f32 without round-to-nearest, so the f16 path's error
            // grows with the output's magnitude: the tolerance is absolute up to |y| = 32, then
            // relative. MMQ's integer dots are exact and keep the fixed absolute gate.
            c.set_tolerance(options.f16_tolerance * std::max(1.0, cmp.ref_max_abs / kF16ToleranceScale));
          }
          c.set_max_abs_diff(cmp.max_abs_diff);
          c.set_nmse(cmp.nmse);
          c.set_ref_max_abs(cmp.ref_max_abs);
          c.set_nan_count(cmp.nan_count);
          c.set_inf_count(cmp.inf_count);
          c.set_unwritten_count(cmp.unwritten_count);
          std::string why;
          if (cmp.unwritten_count) why += std::to_string(cmp.unwritten_count) + " elements unwritten; ";
          if (cmp.nan_count) why += std::to_string(cmp.nan_count) + " NaN; ";
          if (cmp.inf_count) why += std::to_string(cmp.inf_count) + " Inf; ";
          if (!(cmp.max_abs_diff < c.tolerance()))
            why += "max |diff| " + std::to_string(cmp.max_abs_diff) + " >= " + std::to_string(c.tolerance()) + "; ";
          c.set_outcome(why.empty() ? v1::CASE_OUTCOME_PASSED : v1::CASE_OUTCOME_INCORRECT);
          if (!why.empty()) c.set_message(why.substr(0, why.size() - 2));
        } catch (const DeviceError& e) {
          // A device error surfaces at the next synchronization, after the build call that caused
          // it: name that call, so an illegal address is pinned on the build's kernel.
          const char* last = last_build_call();
          c.set_outcome(v1::CASE_OUTCOME_ERROR);
          c.set_message(std::string(e.out_of_memory() ? "OUT_OF_MEMORY: " : "DEVICE: ") + e.what() +
                        (last ? std::string(" [last build call: ") + last + "]" : std::string()));
        }
        on_case(c);
      }
    }
  }
}

}  // namespace qgate::worker
