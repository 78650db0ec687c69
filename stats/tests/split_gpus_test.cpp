// Split-GPU A/B statistics (split_gpus.h): blocks cancel a GPU offset exactly, the GPU effect is read
// back with its interval, and a seeded Monte Carlo run of the gate on blocks, with the arms on two
// simulated GPUs of different speed, keeps the error rates the one-GPU gate claims: an A/A reads
// SAME as often as on one GPU and never FAILs beyond alpha, a slowdown on the threshold PASSes at most
// at alpha, a real slowdown is found. Judging single pairs instead of blocks is shown to break.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "monte_carlo.h"
#include "qgate/stats/sequential.h"
#include "qgate/stats/split_gpus.h"

using namespace qgate::stats;
using qgate::stats::monte_carlo::Rng;
using qgate::stats::monte_carlo::three_standard_errors;
using qgate::Comparison;
using qgate::Verdict;

namespace {

constexpr int kTrials = 4'000;
double slack(double bound) { return three_standard_errors(bound, kTrials); }

/// Two simulated GPUs: the first `gpu_ratio` times as fast as the second; every run has log-normal
/// noise, and both runs of a pair (which run at once) share a host-wide factor.
struct SplitWorld {
  double ratio = 1;      // true speed of arm A / arm B
  double gpu_ratio = 1;  // speed of the first GPU / the second
  double noise = 0.01;   // sd of log tok/s per run
  double shared = 0.01;  // sd of the factor both runs of a pair share

  AbPair pair(Rng& rng, int index) const {
    const double host = std::exp(shared * rng.normal_from_fresh_pair());
    const bool a_first = split_a_on_first(index);
    const double a_gpu = a_first ? gpu_ratio : 1.0, b_gpu = a_first ? 1.0 : gpu_ratio;
    return {400 * ratio * a_gpu * host * std::exp(noise * rng.normal_from_fresh_pair()),
            400 * b_gpu * host * std::exp(noise * rng.normal_from_fresh_pair()), false};
  }
};

struct Tally {
  int pass = 0, fail = 0, same = 0, different = 0;
  double p(int n) const { return double(n) / kTrials; }
};

/// The gate as the split A/B phase runs it: pairs two at a time, judged on blocks at the block
/// design's looks. With `judge_pairs` the pairs themselves are judged (the design ignoring the GPU).
Tally simulate(const SplitWorld& world, uint64_t seed, bool judge_pairs = false) {
  const GatePolicy policy;
  const SequentialDesign blocks_design = SequentialDesign::from_policy(split_block_policy(policy));
  const SequentialDesign pairs_design = SequentialDesign::from_policy(policy);
  Rng rng(seed);
  Tally t;
  std::vector<AbPair> pairs;
  for (int trial = 0; trial < kTrials; ++trial) {
    pairs.clear();
    const SequentialDesign& design = judge_pairs ? pairs_design : blocks_design;
    for (size_t look = 0; look < design.looks.size(); ++look) {
      const size_t want = size_t(design.looks[look]) * (judge_pairs ? 1 : 2);
      while (pairs.size() < want) pairs.push_back(world.pair(rng, int(pairs.size())));
      LookResult r;
      if (judge_pairs) {
        r = judge_look(pairs, design, look);
      } else {
        const auto blocks = split_blocks(pairs);
        r = judge_look(blocks, design, look);
      }
      if (r.decision == LookDecision::continue_adding) continue;
      t.pass += r.verdict == Verdict::Pass;
      t.fail += r.verdict == Verdict::Fail;
      t.same += r.comparison == Comparison::Same;
      t.different += r.comparison == Comparison::Different;
      break;
    }
  }
  return t;
}

/// The one-GPU gate on the same noise (pairs judged one by one, no GPU factor), for the SAME rate to
/// compare with.
Tally simulate_one_gpu(const SplitWorld& world, uint64_t seed) {
  SplitWorld one = world;
  one.gpu_ratio = 1;
  return simulate(one, seed, true);
}

}  // namespace

TEST(SplitGpus, BlocksCancelTheGpuOffsetExactly) {
  // No noise: arm A 3% slower, the first GPU 10% faster. Every pair's ratio is off by 10%, every
  // block's is exactly the arms' ratio.
  SplitWorld w{0.97, 1.10, 0, 0};
  Rng rng(1);
  std::vector<AbPair> pairs;
  for (int i = 0; i < 8; ++i) pairs.push_back(w.pair(rng, i));
  EXPECT_NEAR(pairs[0].a / pairs[0].b, 0.97 * 1.10, 1e-12);
  EXPECT_NEAR(pairs[1].a / pairs[1].b, 0.97 / 1.10, 1e-12);
  const auto blocks = split_blocks(pairs);
  ASSERT_EQ(blocks.size(), 4u);
  for (const auto& b : blocks) EXPECT_NEAR(b.a / b.b, 0.97, 1e-12);
  const GpuEffect g = split_gpu_effect(pairs);
  EXPECT_EQ(g.blocks, 4u);
  EXPECT_NEAR(g.ratio, 1.10, 1e-12);
  EXPECT_NEAR(g.lower, 1.10, 1e-9);
  EXPECT_NEAR(g.upper, 1.10, 1e-9);
}

TEST(SplitGpus, RefusesOddPairsAndBadFigures) {
  std::vector<AbPair> odd = {{1, 1, false}, {1, 1, false}, {1, 1, false}};
  EXPECT_THROW(split_blocks(odd), std::invalid_argument);
  EXPECT_THROW(split_gpu_effect(odd), std::invalid_argument);
  std::vector<AbPair> bad = {{1, 1, false}, {0, 1, false}};
  EXPECT_THROW(split_blocks(bad), std::invalid_argument);
  std::vector<AbPair> one_block = {{2, 1, false}, {1, 1, false}};
  const GpuEffect g = split_gpu_effect(one_block);
  EXPECT_EQ(g.blocks, 1u);
  EXPECT_TRUE(std::isinf(g.upper));  // one block: no interval
}

TEST(SplitGpus, BlockPolicyKeepsThePairBudget) {
  GatePolicy p;  // 4..40 pairs
  const GatePolicy b = split_block_policy(p);
  EXPECT_EQ(b.min_pairs, 2);
  EXPECT_EQ(b.max_pairs, 20);
  p.min_pairs = 5;
  p.max_pairs = 6;
  EXPECT_EQ(split_block_policy(p).min_pairs, 3);
  EXPECT_EQ(split_block_policy(p).max_pairs, 3);
  EXPECT_EQ(split_a_on_first(0), true);
  EXPECT_EQ(split_a_on_first(1), false);
}

TEST(SplitGpus, GpuEffectIntervalCoversAtItsLevel) {
  SplitWorld w{1.0, 1.04, 0.01, 0.01};
  Rng rng(7);
  int covered = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    std::vector<AbPair> pairs;
    for (int i = 0; i < 20; ++i) pairs.push_back(w.pair(rng, i));
    const GpuEffect g = split_gpu_effect(pairs);
    covered += g.lower <= 1.04 && 1.04 <= g.upper;
  }
  const double rate = double(covered) / kTrials;
  std::printf("GPU effect 95%% interval coverage over %d trials: %.4f\n", kTrials, rate);
  EXPECT_NEAR(rate, 0.95, slack(0.05));
}

TEST(SplitGpusSimulation, ErrorRatesHoldWithAGpuOffset) {
  std::printf("%-34s %8s %8s %8s %8s\n", "world (speed A/B, GPU x/y, noise)", "PASS", "FAIL", "SAME", "DIFF");
  auto row = [](const char* name, const Tally& t) {
    std::printf("%-34s %8.4f %8.4f %8.4f %8.4f\n", name, t.p(t.pass), t.p(t.fail), t.p(t.same), t.p(t.different));
  };
  // A/A across two GPUs 5% apart: the block gate reads SAME about as often as the one-GPU gate on
  // the same noise, and DIFFERENT / FAIL no more often than alpha allows.
  for (double gpu : {1.0, 1.05, 0.90}) {
    const SplitWorld aa{1.0, gpu, 0.01, 0.01};
    const Tally split = simulate(aa, 11);
    const Tally one = simulate_one_gpu(aa, 11);
    char name[64];
    std::snprintf(name, sizeof name, "A/A, GPU x/y %.2f, split", gpu);
    row(name, split);
    std::snprintf(name, sizeof name, "A/A, one GPU");
    row(name, one);
    EXPECT_LE(split.p(split.different), 0.05 + slack(0.05)) << gpu;
    EXPECT_LE(split.p(split.fail), 0.025 + slack(0.025)) << gpu;
    // SAME nearly as often as the one-GPU gate on the same noise (it judges as many runs of each
    // arm, but in half as many units, and the calibrated df, kEffectiveDfScale * (h - 1), costs a
    // 20-block look more than a 40-pair one: 85% against 90% SAME).
    EXPECT_GE(split.p(split.same), 0.80) << gpu;
    EXPECT_GE(split.p(split.same), one.p(one.same) - 0.07) << gpu;
  }
  // At the edge of the equivalence band (1% apart) a SAME is a false SAME: at most alpha, whichever
  // GPU is faster.
  for (double gpu : {1.05, 0.95}) {
    const Tally edge = simulate({0.99, gpu, 0.01, 0.01}, 14);
    row("0.99 (band edge), split", edge);
    EXPECT_LE(edge.p(edge.same), 0.025 + slack(0.025)) << gpu;
  }
  // On the threshold (2% slower) a PASS is a false PASS: at most alpha.
  const Tally edge = simulate({0.98, 1.05, 0.01, 0.01}, 12);
  row("0.98 (threshold), GPU 1.05, split", edge);
  EXPECT_LE(edge.p(edge.pass), 0.025 + slack(0.025));
  // A real 5% slowdown is found nearly always, whichever GPU is faster.
  for (double gpu : {1.05, 0.95}) {
    const Tally slow = simulate({0.95, gpu, 0.01, 0.01}, 13);
    row("0.95, split", slow);
    EXPECT_GE(slow.p(slow.fail), 0.95) << gpu;
    EXPECT_GE(slow.p(slow.different), 0.95) << gpu;
  }
}

TEST(SplitGpusSimulation, JudgingSinglePairsIgnoringTheGpuBreaks) {
  // The design the blocks replace: each pair's ratio carries the +-5% GPU offset. With an SE for
  // independent pairs an A/A across the pair almost never read SAME; the gate's SE sees the
  // alternating offset as a negative lag-1 autocovariance and recovers much of it, but blocks, which
  // cancel the offset exactly, still read SAME clearly more often. This is why the gate judges blocks.
  const SplitWorld aa{1.0, 1.05, 0.01, 0.01};
  const Tally naive = simulate(aa, 21, true);
  const Tally blocks = simulate(aa, 21);
  std::printf("A/A, GPU 1.05: SAME judging pairs %.4f, judging blocks %.4f\n", naive.p(naive.same),
              blocks.p(blocks.same));
  EXPECT_LT(naive.p(naive.same), 0.8);
  EXPECT_GT(blocks.p(blocks.same), naive.p(naive.same) + 0.04);
}
