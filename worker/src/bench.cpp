// Times every (type, path, shape) of the benchmark and the cuBLASLt f16 baseline in one run.
#include "qgate/worker/bench.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "qgate/quant/quantize.h"

namespace qgate::worker {

double per_call_us(DeviceApi& device, int calls, const std::function<void()>& enqueue) {
  const int n = calls > 1 ? calls : 1;
  return device.time_us([&] {
           for (int i = 0; i < n; ++i) enqueue();
         }) /
         double(n);
}

SampleStats summarize(std::vector<double> samples) {
  SampleStats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  s.median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  s.min = samples.front();
  s.max = samples.back();
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / double(n);
  double var = 0;
  for (double v : samples) var += (v - s.mean) * (v - s.mean);
  s.stddev = n > 1 ? std::sqrt(var / double(n - 1)) : 0.0;
  return s;
}

BenchRunner::BenchRunner(const KernelBuild& build, DeviceApi& device, int threads)
    : build_(build), device_(device), threads_(threads) {}

namespace {

void fill_stats(v1::GemmTiming* t, const std::vector<double>& samples) {
  const SampleStats s = summarize(samples);
  t->set_median_us(s.median);
  t->set_min_us(s.min);
  t->set_max_us(s.max);
  t->set_mean_us(s.mean);
  t->set_stddev_us(s.stddev);
  for (double v : samples) t->add_samples_us(v);
  const double macs = double(t->shape().nt()) * double(t->shape().od()) * double(t->shape().k());
  t->set_tmac_per_s(s.median > 0 ? macs / (s.median * 1e-6) / 1e12 : 0.0);
  t->set_outcome(v1::CASE_OUTCOME_PASSED);
}

}  // namespace

void BenchRunner::run(const BenchOptions& options,
                      const std::function<void(const v1::GemmTiming&)>& on_timing,
                      const std::function<void(const std::string&)>& progress) {
  std::vector<std::unique_ptr<BuildContext>> contexts;
  std::vector<std::string> context_errors;
  for (int path : options.paths) {
    try {
      contexts.push_back(std::make_unique<BuildContext>(build_, device_.backend(),
                                                        device_.device_ordinal(), path, threads_));
      context_errors.emplace_back();
    } catch (const std::exception& e) {
      contexts.push_back(nullptr);
      context_errors.emplace_back(e.what());
    }
  }
  std::unique_ptr<F16Baseline> baseline;
  std::string baseline_why;
  if (options.cublaslt && device_.backend() == QGATE_BACKEND_CUDA)
    baseline = make_cublaslt_baseline(device_, &baseline_why);
  if (options.cublaslt && device_.backend() == QGATE_BACKEND_CUDA && !baseline)
    progress("cuBLASLt baseline not timed: " + baseline_why);

  for (auto [od, k] : options.od_k) {
    for (quant::WeightType type : options.types) {
      const auto& traits = quant::traits(type);
      const int64_t max_nt = *std::max_element(options.token_counts.begin(), options.token_counts.end());
      progress("preparing " + std::string(traits.name) + " " + std::to_string(od) + "x" + std::to_string(k));
      const uint64_t seed = case_seed(options.seed, type, GemmShape{max_nt, od, k});
      const std::vector<uint8_t> weights = make_weights(type, od, k, seed);
      const std::vector<float> x = make_activations(max_nt, k, seed);
      DeviceBuffer dx(device_, x.size() * sizeof(float));
      device_.upload(dx.as<void>(), x.data(), x.size() * sizeof(float));
      DeviceBuffer dy(device_, size_t(max_nt) * size_t(od) * sizeof(float));

      for (size_t p = 0; p < options.paths.size(); ++p) {
        auto base = [&](int64_t nt, int path) {
          v1::GemmTiming t;
          t.set_type(std::string(traits.name));
          t.mutable_shape()->set_nt(nt);
          t.mutable_shape()->set_od(od);
          t.mutable_shape()->set_k(k);
          t.set_path(path == QGATE_PATH_MMQ ? v1::GEMM_PATH_MMQ : v1::GEMM_PATH_F16);
          t.set_warmup(options.warmup);
          t.set_repetitions(options.repetitions);
          t.set_input_sets(options.cold ? 0 : 1);
          t.set_calls_per_sample(options.calls_per_sample);
          return t;
        };
        if (!contexts[p]) {
          for (int64_t nt : options.token_counts) {
            v1::GemmTiming t = base(nt, options.paths[p]);
            t.set_outcome(v1::CASE_OUTCOME_NOT_SUPPORTED);
            t.set_message(context_errors[p]);
            on_timing(t);
          }
          continue;
        }
        BuildContext& ctx = *contexts[p];
        PreparedGemm gemm(ctx, int32_t(type), od, k, weights.data(), max_nt);
        for (int64_t nt : options.token_counts) {
          v1::GemmTiming t = base(nt, ctx.path());
          if (!gemm.ok()) {
            t.set_outcome(gemm.status() == QGATE_ERR_UNSUPPORTED ? v1::CASE_OUTCOME_NOT_SUPPORTED
                                                                 : v1::CASE_OUTCOME_ERROR);
            t.set_message(std::string(to_string(gemm.status())) + ": " + gemm.message());
            on_timing(t);
            continue;
          }
          qgate_status status = QGATE_OK;
          auto call = [&] {
            if (status == QGATE_OK) status = gemm.run(dx.as<float>(), nt, dy.as<float>(), device_.stream());
          };
          for (int i = 0; i < options.warmup && status == QGATE_OK; ++i)
            per_call_us(device_, options.calls_per_sample, call);
          std::vector<double> samples;
          for (int i = 0; i < options.repetitions && status == QGATE_OK; ++i) {
            if (options.cold) device_.flush_cache();
            samples.push_back(per_call_us(device_, options.calls_per_sample, call));
          }
          if (status != QGATE_OK) {
            t.set_outcome(v1::CASE_OUTCOME_ERROR);
            t.set_message(std::string(to_string(status)) + ": " + gemm.message());
          } else {
            fill_stats(&t, samples);
          }
          on_timing(t);
        }
      }

      if (baseline) {
        std::vector<float> w(size_t(od) * size_t(k));
        const size_t rb = quant::row_bytes(type, k);
        for (int64_t r = 0; r < od; ++r)
          quant::dequantize_row(type, weights.data() + size_t(r) * rb, w.data() + size_t(r) * size_t(k), k);
        for (int64_t nt : options.token_counts) {
          v1::GemmTiming t;
          t.set_type(std::string(traits.name));
          t.mutable_shape()->set_nt(nt);
          t.mutable_shape()->set_od(od);
          t.mutable_shape()->set_k(k);
          t.set_path(v1::GEMM_PATH_CUBLASLT_F16);
          t.set_warmup(options.warmup);
          t.set_repetitions(options.repetitions);
          t.set_calls_per_sample(options.calls_per_sample);
          try {
            baseline->time(w, x, nt, od, k, options, &t);
            if (t.outcome() == v1::CASE_OUTCOME_PASSED) {
              std::vector<double> samples(t.samples_us().begin(), t.samples_us().end());
              t.clear_samples_us();
              fill_stats(&t, samples);
            }
          } catch (const std::exception& e) {
            t.set_outcome(v1::CASE_OUTCOME_ERROR);
            t.set_message(e.what());
          }
          on_timing(t);
        }
      }
    }
  }
}

}  // namespace qgate::worker
