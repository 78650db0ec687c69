// The split-GPU A/B (docs/two-gpus.md): the two arms run at once, one on each GPU of a pair of one
// model, and swap GPUs from one pair to the next. Pair 2j runs arm A on the first GPU and arm B on the
// second; pair 2j+1 the other way round; the two make a block. On the log scale a pair's ratio is
//   r = effect + s * gpu + noise,   s = +1 in even pairs, -1 in odd ones,
// so a block's mean (r_2j + r_2j+1) / 2 is the arms' effect with the GPU cancelled exactly, and half
// the difference (r_2j - r_2j+1) / 2 is the GPU's effect with the arms cancelled. Blocks are
// independent and, without an arm effect, symmetric about zero whatever the GPU effect is: the
// sequential gate (sequential.h) judges blocks as it judges pairs, with the same error rates.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "qgate/stats/ab_statistics.h"

namespace qgate::stats {

/// Whether arm A runs on the pair's first GPU in pair `pair_index` (even pairs) or on the second.
inline bool split_a_on_first(int pair_index) { return pair_index % 2 == 0; }

/// The gate's policy in blocks: a look at n blocks spends what a look at 2n pairs would, and the
/// budget of pairs is kept (max_pairs / 2 blocks, at least 2). min_pairs rounds up to whole blocks.
GatePolicy split_block_policy(const GatePolicy& pairs_policy);

/// One block per two pairs, its figures the geometric means of the two runs of each arm, so its
/// log-ratio is the mean of the two pairs' log-ratios. Flagged when either pair was. Throws
/// std::invalid_argument on an odd number of pairs or a non-finite or non-positive figure.
std::vector<AbPair> split_blocks(std::span<const AbPair> pairs);

/// The GPU's effect in a split A/B: speed on the first GPU over speed on the second (the same for
/// both arms), from the blocks' half-differences, with a Student-t interval over blocks.
struct GpuEffect {
  size_t blocks = 0;
  double ratio = 1;  // exp(mean half-difference); > 1 means the first GPU is faster
  double lower = 0;  // interval on the ratio scale; (0, inf) with fewer than two blocks
  double upper = 0;
  double sd_log = 0; // sample sd of the half-differences
};
GpuEffect split_gpu_effect(std::span<const AbPair> pairs, double confidence = 0.95);

}  // namespace qgate::stats
