// The output head of `qgate-worker serve`'s output-identity check: after each timed run of a
// profile, one GEMM over an output head on the arm's path (MMQ or f16) and a greedy argmax per row.
// Both arms of a kernel A/B job must pick the same tokens; qgated compares them token for token.
//
// The hidden states are built so that every row's winner has a known margin: row i is
//   x_i = a_i * w[t_i] + n_i
// with t_i a seeded target token, w[t_i] its dequantized head row, n_i seeded noise uniform in
// [-1, 1), and a_i the smallest factor (found by bisection on the exact f64 logits of the
// dequantized head) for which the exact logit of t_i beats every other token by
//   kOutputHeadMarginSigmas * sigma_q8(x_i),
// where sigma_q8 is the standard deviation of the error that quantizing x_i to int8 per 32 values
// (step amax/127, rounding error uniform in +-step/2) puts on a difference of two logits:
//   sigma_q8^2 = 2 * mean(w^2) * sum_e step(e)^2 / 12.
// At 8 sigma no correct build flips a token: MMQ's activation rounding is that one-sigma error
// (over 960 rows of five heads the CPU MMQ reference moved a margin by 3.3 sigma at most, the f16
// reference by 0.26), and a flip needs an 8-sigma draw: P < 1e-15 a row. The margin is still only
// a few times what a wrong scale moves: the numerics tests' q6_K scale bug (the 16th sub-scale of
// each block taken from the 15th, 1/16 of the weights some 8% off) flips 27-46 of 64 tokens at
// k = 256-768 and 14 of 16 at k = 4096; NaN outputs give token -1 (output_head_test.cpp and
// output_identity_test.cpp hold these numbers).
// The margin is for builds that sum in f32 (or better) on both paths, as the reference does.
#pragma once

#include <cstdint>
#include <vector>

#include "qgate/kernel_abi.h"
#include "qgate/quant/block_formats.h"
#include "qgate/v1/worker.pb.h"

namespace qgate::worker {

/// Rows of the check: min(tokens, kOutputHeadRows). 64 rows of a few-sigma wrong build flip
/// several tokens; more rows only cost time.
inline constexpr int64_t kOutputHeadRows = 64;
/// The margin of each row's winner, in sigma_q8 of that row (see above).
inline constexpr double kOutputHeadMarginSigmas = 8.0;
/// The head of a profile without an "output" GEMM: q6_K, these many rows (vocabulary), k the
/// profile's largest k that is a multiple of 256 (256 when none is).
inline constexpr int64_t kFallbackHeadRowsCuda = 4096;
inline constexpr int64_t kFallbackHeadRowsCpu = 1024;

/// Which head a profile gets.
struct OutputHeadChoice {
  quant::WeightType type = quant::WeightType::q6_K;
  int64_t od = 0;          // vocabulary
  int64_t k = 0;           // hidden size
  int profile_index = -1;  // the profile GEMM with role "output" (its prepared GEMM is reused); -1: a head of its own
};
OutputHeadChoice choose_output_head(const v1::ModelProfile& profile, qgate_backend backend);

/// The head's rows for runs of `tokens` tokens: min(tokens, kOutputHeadRows).
int64_t output_head_rows(int64_t tokens);
/// The seed of the head's own weights (when it has its own) and of its hidden states, from the
/// prepare request's seed.
uint64_t output_head_seed(uint64_t request_seed, const OutputHeadChoice& head, int64_t rows);

/// The check's rows of hidden state for a head, and what each row was built to give.
struct OutputHeadInputs {
  int64_t rows = 0;
  int64_t k = 0;
  std::vector<float> hidden;     // rows x k
  std::vector<int64_t> targets;  // the token each row's exact logits pick
  std::vector<double> margins;   // exact logit of the target minus the best other, per row
  std::vector<double> sigmas;    // sigma_q8 of each row: margins[i] >= kOutputHeadMarginSigmas * sigmas[i]
};

/// The token each of `rows` rows is built to give, for a head of `od` tokens and `seed`: what
/// make_output_head_inputs puts in `targets`, without the head's weights (the judge's side).
std::vector<int64_t> output_head_targets(int64_t od, int64_t rows, uint64_t seed);

/// Builds `rows` hidden states for the head `weights` (od rows of `type` blocks, k each) from
/// `seed`. Exact logits are computed on the host in f64 on `threads` threads (<= 0: all).
/// Throws std::runtime_error if a row cannot be given its margin (a degenerate head).
OutputHeadInputs make_output_head_inputs(quant::WeightType type, const void* weights, int64_t od, int64_t k,
                                         int64_t rows, uint64_t seed, int threads);

/// The greedy token of each row of `logits` (rows x od): the index of the largest value, the
/// lowest index on a tie. NaN is never the largest; a row of NaN only gives -1.
std::vector<int64_t> greedy_tokens(const float* logits, int64_t rows, int64_t od);

}  // namespace qgate::worker
