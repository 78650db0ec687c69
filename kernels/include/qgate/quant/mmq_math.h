// The MMQ math contract, written once on the host: activations quantized to q8 blocks that carry
// their int sum, weights split per 32-element block into small integers and scales such that
//   w_i = ds * q_i + dm                (q6_K: ds0 for i < 16, ds1 for i >= 16; dm = 0)
// and the per-block dot  da * (ds * sum(q_w * q_a) + dm * sum(q_a)).
// The CPU reference, the CPU backend and the tests all build on these two decompositions.
#pragma once

#include <cstdint>
#include <vector>

#include "qgate/quant/block_formats.h"

namespace qgate::quant {

/// One 32-element weight block in MMQ form. K-quant nibbles stay unsigned (0..15 or 0..31) and
/// their min goes to dm = -dmin*m; q4_0/q5_0 subtract their offset (8, 16) into q; q6_K
/// subtracts 32 and has two sub-scales and no min.
struct MmqWeightBlock {
  int8_t q[kQK];
  float ds[2];  // ds[1] == ds[0] for every type but q6_K
  float dm;     // 0 for types without a min
};

/// Splits one row of k elements (k/32 blocks out).
void unpack_row_mmq(WeightType type, const void* row_blocks, int64_t k, MmqWeightBlock* out);

/// Activations quantized per 32-element block: d = amax/127 stored as f16, q = round-half-even(x/d)
/// with 1/d taken from the unrounded d, clamped to [-128, 127]; sum = sum of the block's q.
struct Q8Activations {
  int64_t nt = 0;
  int64_t k = 0;
  std::vector<int8_t> q;     // [nt][k]
  std::vector<float> d;      // [nt][k/32], f16-rounded
  std::vector<int32_t> sum;  // [nt][k/32]
};

Q8Activations quantize_activations_q8(const float* x, int64_t nt, int64_t k);
/// One block of 32 values: writes 32 q, returns the f16-rounded d and the int sum.
void quantize_block_q8(const float* x, int8_t* q, float* d, int32_t* sum);

}  // namespace qgate::quant
