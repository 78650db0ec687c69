// Blocks of two GPU-swapped pairs, and the GPU's effect read from them (split_gpus.h).
#include "qgate/stats/split_gpus.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "qgate/stats/unpaired.h"

namespace qgate::stats {
namespace {

double checked_log(double x) {
  if (!std::isfinite(x) || x <= 0) throw std::invalid_argument("split A/B: a figure is not finite and positive");
  return std::log(x);
}

}  // namespace

GatePolicy split_block_policy(const GatePolicy& pairs_policy) {
  GatePolicy blocks = pairs_policy;
  blocks.min_pairs = std::max(2, (pairs_policy.min_pairs + 1) / 2);
  blocks.max_pairs = std::max(blocks.min_pairs, pairs_policy.max_pairs / 2);
  return blocks;
}

std::vector<AbPair> split_blocks(std::span<const AbPair> pairs) {
  if (pairs.size() % 2 != 0) throw std::invalid_argument("split A/B: blocks need an even number of pairs");
  std::vector<AbPair> blocks;
  blocks.reserve(pairs.size() / 2);
  for (size_t i = 0; i < pairs.size(); i += 2) {
    const AbPair& even = pairs[i];
    const AbPair& odd = pairs[i + 1];
    AbPair block;
    block.a = std::exp((checked_log(even.a) + checked_log(odd.a)) / 2);
    block.b = std::exp((checked_log(even.b) + checked_log(odd.b)) / 2);
    block.contention_mismatch = even.contention_mismatch || odd.contention_mismatch;
    blocks.push_back(block);
  }
  return blocks;
}

GpuEffect split_gpu_effect(std::span<const AbPair> pairs, double confidence) {
  if (pairs.size() % 2 != 0) throw std::invalid_argument("split A/B: blocks need an even number of pairs");
  if (!(confidence > 0 && confidence < 1)) throw std::invalid_argument("split A/B: confidence must be in (0, 1)");
  std::vector<double> half;
  for (size_t i = 0; i < pairs.size(); i += 2) {
    const double even = checked_log(pairs[i].a) - checked_log(pairs[i].b);        // effect + gpu
    const double odd = checked_log(pairs[i + 1].a) - checked_log(pairs[i + 1].b);  // effect - gpu
    half.push_back((even - odd) / 2);
  }
  GpuEffect e;
  e.blocks = half.size();
  if (half.empty()) return e;
  double mean = 0;
  for (double h : half) mean += h;
  mean /= double(half.size());
  e.ratio = std::exp(mean);
  if (half.size() < 2) {
    e.lower = 0;
    e.upper = std::numeric_limits<double>::infinity();
    return e;
  }
  double ss = 0;
  for (double h : half) ss += (h - mean) * (h - mean);
  e.sd_log = std::sqrt(ss / double(half.size() - 1));
  const double se = e.sd_log / std::sqrt(double(half.size()));
  const double t = student_t_quantile(1 - (1 - confidence) / 2, double(half.size() - 1));
  e.lower = std::exp(mean - t * se);
  e.upper = std::exp(mean + t * se);
  return e;
}

}  // namespace qgate::stats
