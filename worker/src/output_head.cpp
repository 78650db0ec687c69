// The output-identity check's head: which head a profile gets, hidden states whose greedy tokens
// have a set margin (output_head.h explains the numbers), and the NaN-aware argmax.
#include "qgate/worker/output_head.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "qgate/common/weight_types.h"
#include "qgate/quant/quantize.h"
#include "qgate/worker/problems.h"

namespace qgate::worker {
namespace {

constexpr int64_t kQ8Block = 32;                           // MMQ quantizes activations per 32 values
constexpr uint64_t kHeadSeedSalt = 0x6f75747075742d68ull;  // "output-h"

/// f64 dot product of two f32 rows, in a fixed order (four running sums).
double dot(const float* a, const float* b, int64_t k) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t e = 0;
  for (; e + 4 <= k; e += 4) {
    s0 += double(a[e]) * double(b[e]);
    s1 += double(a[e + 1]) * double(b[e + 1]);
    s2 += double(a[e + 2]) * double(b[e + 2]);
    s3 += double(a[e + 3]) * double(b[e + 3]);
  }
  for (; e < k; ++e) s0 += double(a[e]) * double(b[e]);
  return (s0 + s1) + (s2 + s3);
}

/// Standard deviation of the error int8 activations (per 32: step amax/127) put on the difference
/// of two logits whose weights have mean square `w_ms`.
double sigma_q8(const float* x, int64_t k, double w_ms) {
  double sum = 0;
  for (int64_t b = 0; b < k; b += kQ8Block) {
    float amax = 0;
    for (int64_t e = b; e < std::min(k, b + kQ8Block); ++e) amax = std::max(amax, std::fabs(x[e]));
    const double step = double(amax) / 127.0;
    sum += double(std::min(kQ8Block, k - b)) * step * step / 12.0;
  }
  return std::sqrt(2.0 * w_ms * sum);
}

template <typename Fn>
void run_on(int workers, Fn& fn) {
  if (workers == 1) return fn(0);
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w) pool.emplace_back([&fn, w] { fn(w); });
  for (auto& th : pool) th.join();
}

/// The first draws of a head's generator: each row's target token.
std::vector<int64_t> draw_targets(std::mt19937_64& rng, int64_t od, int64_t rows) {
  std::uniform_int_distribution<int64_t> token(0, od - 1);
  std::vector<int64_t> targets(static_cast<size_t>(rows));
  for (auto& t : targets) t = token(rng);
  return targets;
}

}  // namespace

int64_t output_head_rows(int64_t tokens) { return std::min(tokens, kOutputHeadRows); }

uint64_t output_head_seed(uint64_t request_seed, const OutputHeadChoice& head, int64_t rows) {
  return case_seed(request_seed, head.type, GemmShape{rows, head.od, head.k});
}

std::vector<int64_t> output_head_targets(int64_t od, int64_t rows, uint64_t seed) {
  std::mt19937_64 rng(seed ^ kHeadSeedSalt);
  return draw_targets(rng, od, rows);
}

OutputHeadChoice choose_output_head(const v1::ModelProfile& profile, qgate_backend backend) {
  for (int i = 0; i < profile.gemms_size(); ++i) {
    const auto& g = profile.gemms(i);
    if (g.role() != "output") continue;
    if (auto type = quant::parse_type(g.type())) return {*type, g.od(), g.k(), i};
  }
  OutputHeadChoice head;
  head.type = quant::WeightType::q6_K;
  head.od = backend == QGATE_BACKEND_CUDA ? kFallbackHeadRowsCuda : kFallbackHeadRowsCpu;
  const int64_t block = quant::traits(head.type).block_elems;
  head.k = 0;
  for (const auto& g : profile.gemms())
    if (g.k() > 0 && g.k() % block == 0) head.k = std::max(head.k, g.k());
  if (head.k == 0) head.k = block;
  return head;
}

OutputHeadInputs make_output_head_inputs(quant::WeightType type, const void* weights, int64_t od, int64_t k,
                                         int64_t rows, uint64_t seed, int threads) {
  if (od < 2 || rows <= 0 || k <= 0 || k % quant::traits(type).block_elems)
    throw std::runtime_error("output head: bad shape " + std::to_string(od) + "x" + std::to_string(k));
  OutputHeadInputs in;
  in.rows = rows;
  in.k = k;
  in.hidden.resize(size_t(rows) * size_t(k));
  in.targets.resize(size_t(rows));
  in.margins.resize(size_t(rows));
  in.sigmas.resize(size_t(rows));

  std::mt19937_64 rng(seed ^ kHeadSeedSalt);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  in.targets = draw_targets(rng, od, rows);
  std::vector<float> noise(size_t(rows) * size_t(k));
  for (auto& v : noise) v = uniform(rng);

  const size_t rb = quant::row_bytes(type, k);
  const auto* raw = static_cast<const uint8_t*>(weights);
  std::vector<float> target_rows(size_t(rows) * size_t(k));
  for (int64_t i = 0; i < rows; ++i)
    quant::dequantize_row(type, raw + size_t(in.targets[size_t(i)]) * rb, target_rows.data() + size_t(i) * size_t(k),
                          k);

  // Exact logits of the noise (l0) and of each target row (g) for every token, one pass over the
  // head: x = a*w[t] + n has logits l0 + a*g.
  std::vector<double> l0(size_t(rows) * size_t(od)), g(size_t(rows) * size_t(od));
  const int workers = int(std::clamp<int64_t>(threads > 0 ? threads : int64_t(std::thread::hardware_concurrency()), 1,
                                              std::max<int64_t>(1, od / 64)));
  std::vector<double> sum_sq(size_t(workers), 0.0);
  auto work = [&](int w) {
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t j = od * w / workers; j < od * (w + 1) / workers; ++j) {
      quant::dequantize_row(type, raw + size_t(j) * rb, row.data(), k);
      sum_sq[size_t(w)] += dot(row.data(), row.data(), k);
      for (int64_t i = 0; i < rows; ++i) {
        l0[size_t(i) * size_t(od) + size_t(j)] = dot(row.data(), noise.data() + size_t(i) * size_t(k), k);
        g[size_t(i) * size_t(od) + size_t(j)] = dot(row.data(), target_rows.data() + size_t(i) * size_t(k), k);
      }
    }
  };
  run_on(workers, work);
  double total_sq = 0;
  for (double s : sum_sq) total_sq += s;
  const double w_ms = total_sq / (double(od) * double(k));

  // Each row's factor, rows spread over the workers.
  std::atomic<int64_t> unsolved{-1};
  auto solve = [&](int w) {
    std::vector<float> x(static_cast<size_t>(k));
    for (int64_t i = w; i < rows; i += workers) {
      const int64_t t = in.targets[size_t(i)];
      const double* L = l0.data() + size_t(i) * size_t(od);
      const double* G = g.data() + size_t(i) * size_t(od);
      const float* wt = target_rows.data() + size_t(i) * size_t(k);
      const float* n = noise.data() + size_t(i) * size_t(k);
      auto make_x = [&](double a, float* out) {
        for (int64_t e = 0; e < k; ++e) out[e] = float(a * double(wt[e]) + double(n[e]));
      };
      auto margin = [&](double a) {
        double best = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < od; ++j)
          if (j != t) best = std::max(best, L[j] + a * G[j]);
        return L[t] + a * G[t] - best;
      };
      // margin(a) - 8 sigma(a) is concave in a (a linear function, less a max of linear ones, less
      // a convex sigma), so the factors where it holds form one interval: its left end is found by
      // doubling, then bisection. The factor is the smallest one: the margin is no larger than asked.
      auto holds = [&](double a) {
        make_x(a, x.data());
        return margin(a) >= kOutputHeadMarginSigmas * sigma_q8(x.data(), k, w_ms);
      };
      double a = 0;
      if (!holds(0)) {
        double lo = 0, hi = 1.0 / 64;
        for (int doublings = 0; !holds(hi); ++doublings) {
          if (doublings > 60) {
            unsolved = t;  // thrown below, after the workers are joined
            break;
          }
          lo = hi;
          hi *= 2;
        }
        for (int it = 0; it < 60; ++it) {
          const double mid = 0.5 * (lo + hi);
          (holds(mid) ? hi : lo) = mid;
        }
        a = hi;
      }
      float* out = in.hidden.data() + size_t(i) * size_t(k);
      make_x(a, out);
      in.margins[size_t(i)] = margin(a);
      in.sigmas[size_t(i)] = sigma_q8(out, k, w_ms);
    }
  };
  run_on(workers, solve);
  if (unsolved >= 0)
    throw std::runtime_error("output head: token " + std::to_string(unsolved.load()) + " cannot be given a margin");
  return in;
}

std::vector<int64_t> greedy_tokens(const float* logits, int64_t rows, int64_t od) {
  std::vector<int64_t> tokens(size_t(rows), -1);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits + size_t(r) * size_t(od);
    int64_t best = -1;
    for (int64_t j = 0; j < od; ++j) {
      if (std::isnan(row[j])) continue;
      if (best < 0 || row[j] > row[best]) best = j;
    }
    tokens[size_t(r)] = best;
  }
  return tokens;
}

}  // namespace qgate::worker
