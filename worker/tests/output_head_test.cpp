// Tests of the output-identity check's head (output_head.h) in process: the choice of head, the
// NaN-aware argmax, and that the hidden states give every row its margin: the MMQ and f16 CPU
// references pick the built targets, while weights with a wrong scale or NaN pick other tokens.
#include "qgate/worker/output_head.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "qgate_expectation.h"
#include "qgate/worker/problems.h"

using namespace qgate::worker;
using qgate::quant::WeightType;

namespace {

std::vector<int64_t> argmax(const std::vector<double>& y, int64_t rows, int64_t od) {
  std::vector<float> f(y.begin(), y.end());
  return greedy_tokens(f.data(), rows, od);
}

/// The largest |margin in y - exact margin| over rows, in each row's sigma_q8 (the margin: the
/// target's logit less the best other's).
double worst_margin_change(const std::vector<double>& y, const OutputHeadInputs& in, int64_t od) {
  double worst = 0;
  for (int64_t i = 0; i < in.rows; ++i) {
    const double* row = y.data() + size_t(i * od);
    const int64_t t = in.targets[size_t(i)];
    double best = -INFINITY;
    for (int64_t j = 0; j < od; ++j)
      if (j != t) best = std::max(best, row[j]);
    worst = std::max(worst, std::fabs(row[t] - best - in.margins[size_t(i)]) / in.sigmas[size_t(i)]);
  }
  return worst;
}

struct Head {
  WeightType type;
  int64_t od, k;
};

std::string name(const Head& h) {
  return std::string(qgate::quant::traits(h.type).name) + " " + std::to_string(h.od) + "x" + std::to_string(h.k);
}

}  // namespace

TEST(OutputHead, GreedyTokensSkipNanAndGiveMinusOneForARowOfNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {
      nan,  1.0f, 3.0f, nan,   // NaN never the max
      2.0f, 5.0f, 5.0f, 1.0f,  // a tie: the lowest index
      nan,  nan,  nan,  nan,   // nothing but NaN
      -inf, -inf, nan,  -1e30f,  // finite beats -inf
      nan,  inf,  nan,  0.0f,    // inf is a value like any other
  };
  EXPECT_EQ(greedy_tokens(logits.data(), 5, 4), (std::vector<int64_t>{2, 1, -1, 3, 1}));
}

TEST(OutputHead, TheProfilesOutputGemmIsTheHeadElseAQ6KHeadOfItsOwn) {
  qgate::v1::ModelProfile p;
  auto add = [&](const std::string& type, int64_t od, int64_t k, const std::string& role) {
    auto* g = p.add_gemms();
    g->set_type(type);
    g->set_od(od);
    g->set_k(k);
    g->set_count(1);
    g->set_role(role);
  };
  add("q4_0", 64, 768, "ffn_down");
  add("q8_0", 96, 2048 + 32, "attn_q");  // the largest k, but not a multiple of 256
  add("q4_K", 32, 512, "ffn_up");
  auto head = choose_output_head(p, QGATE_BACKEND_CPU);
  EXPECT_EQ(head.profile_index, -1);
  EXPECT_EQ(head.type, WeightType::q6_K);
  EXPECT_EQ(head.od, kFallbackHeadRowsCpu);
  EXPECT_EQ(head.k, 768);
  EXPECT_EQ(choose_output_head(p, QGATE_BACKEND_CUDA).od, kFallbackHeadRowsCuda);
  EXPECT_LT(kFallbackHeadRowsCpu, kFallbackHeadRowsCuda);

  qgate::v1::ModelProfile odd;
  odd.add_gemms()->CopyFrom(p.gemms(1));
  EXPECT_EQ(choose_output_head(odd, QGATE_BACKEND_CPU).k, 256) << "no k is a multiple of 256";

  add("q5_K", 1000, 512, "output");
  head = choose_output_head(p, QGATE_BACKEND_CPU);
  EXPECT_EQ(head.profile_index, 3);
  EXPECT_EQ(head.type, WeightType::q5_K);
  EXPECT_EQ(head.od, 1000);
  EXPECT_EQ(head.k, 512);
}

TEST(OutputHead, TheSameSeedGivesTheSameRowsAndAnotherSeedOthers) {
  const auto w = make_weights(WeightType::q6_K, 256, 256, 11);
  const auto a = make_output_head_inputs(WeightType::q6_K, w.data(), 256, 256, 16, 5, 1);
  const auto b = make_output_head_inputs(WeightType::q6_K, w.data(), 256, 256, 16, 5, 2);
  const auto c = make_output_head_inputs(WeightType::q6_K, w.data(), 256, 256, 16, 6, 1);
  EXPECT_EQ(a.hidden, b.hidden) << "the rows must not depend on the thread count";
  EXPECT_EQ(a.targets, b.targets);
  EXPECT_NE(a.hidden, c.hidden);
  EXPECT_NE(a.targets, c.targets);
}

// Every row's margin is the one asked for (the smallest factor that gives it), and both CPU
// references (MMQ with int8 activations, f16) pick the built target on every row.
TEST(OutputHead, EveryRowHasItsMarginAndBothReferencesPickTheTargets) {
  const std::vector<Head> heads = {{WeightType::q6_K, 1024, 256},
                                   {WeightType::q6_K, 512, 1024},
                                   {WeightType::q4_K, 700, 512},
                                   {WeightType::q4_0, 500, 160},
                                   {WeightType::q8_0, 300, 96}};
  double worst_mmq = 0, worst_f16 = 0;
  for (const Head& h : heads) {
    SCOPED_TRACE(name(h));
    for (uint64_t seed : {1u, 2u, 3u}) {
      const auto w = make_weights(h.type, h.od, h.k, seed * 31);
      const auto in = make_output_head_inputs(h.type, w.data(), h.od, h.k, kOutputHeadRows, seed, 2);
      ASSERT_EQ(in.rows, kOutputHeadRows);
      ASSERT_EQ(in.hidden.size(), size_t(kOutputHeadRows * h.k));
      int at_the_asked_margin = 0;
      for (int64_t i = 0; i < in.rows; ++i) {
        const double sigmas = in.margins[size_t(i)] / in.sigmas[size_t(i)];
        EXPECT_GE(sigmas, kOutputHeadMarginSigmas * (1 - 1e-9)) << "row " << i;
        at_the_asked_margin += sigmas < kOutputHeadMarginSigmas * 1.001;
      }
      // Only a row whose target already leads the noise alone by more keeps a larger margin.
      EXPECT_GE(at_the_asked_margin, in.rows - 2);
      std::vector<double> y(size_t(in.rows * h.od));
      y = qgate::test_support::qgate_mmq_expectation(h.type, w.data(), h.od, h.k, in.hidden.data(), in.rows, 2);
      EXPECT_EQ(argmax(y, in.rows, h.od), in.targets) << "MMQ, seed " << seed;
      // How far int8 activations moved each row's margin, in its sigma: well inside the 8 asked.
      const double moved = worst_margin_change(y, in, h.od);
      worst_mmq = std::max(worst_mmq, moved);
      EXPECT_LT(moved, 5.0) << "seed " << seed;  // the largest of ~1000 normal draws is about 3.3
      y = qgate::test_support::qgate_f16_expectation(h.type, w.data(), h.od, h.k, in.hidden.data(), in.rows, 2);
      EXPECT_EQ(argmax(y, in.rows, h.od), in.targets) << "f16, seed " << seed;
      worst_f16 = std::max(worst_f16, worst_margin_change(y, in, h.od));
    }
  }
  std::printf("the largest change of a margin: MMQ %.2f sigma, f16 %.2f sigma\n", worst_mmq, worst_f16);
}

// The margin is small enough that a build with a wrong scale picks other tokens: the scale bug of
// the numerics tests' build (the 16th sub-scale of every q6_K block taken from the 15th), with the
// hidden states built from the right weights.
TEST(OutputHead, WeightsWithAWrongScalePickOtherTokens) {
  constexpr int64_t od = 1024, k = 256;
  for (uint64_t seed : {1u, 2u, 3u}) {
    const auto w = make_weights(WeightType::q6_K, od, k, seed);
    const auto in = make_output_head_inputs(WeightType::q6_K, w.data(), od, k, kOutputHeadRows, seed, 2);
    auto changed_tokens = [&](const std::vector<uint8_t>& bad) {
      std::vector<double> y(size_t(in.rows * od));
      y = qgate::test_support::qgate_mmq_expectation(WeightType::q6_K, bad.data(), od, k, in.hidden.data(), in.rows, 2);
      const auto tokens = argmax(y, in.rows, od);
      int changed = 0;
      for (size_t i = 0; i < tokens.size(); ++i) changed += tokens[i] != in.targets[i];
      return changed;
    };
    auto sub_scale_bug = w;
    auto* blocks = reinterpret_cast<qgate::quant::BlockQ6_K*>(sub_scale_bug.data());
    for (int64_t b = 0; b < od * k / 256; ++b) blocks[b].scales[15] = blocks[b].scales[14];
    const int by_sub_scale = changed_tokens(sub_scale_bug);
    EXPECT_GE(by_sub_scale, 2) << "seed " << seed;
    std::printf("seed %d: the sub-scale bug changes %d of %d tokens\n", int(seed), by_sub_scale, int(in.rows));
  }
}

// The same construction holds at a model's size (k = 4096): both references pick the targets, and
// the sub-scale bug, spread over sixteen super-blocks a row, still changes tokens.
TEST(OutputHead, AtK4096TheMarginHoldsAndTheBugStillShows) {
  constexpr int64_t od = 2048, k = 4096, rows = 16;
  const auto w = make_weights(WeightType::q6_K, od, k, 4);
  const auto in = make_output_head_inputs(WeightType::q6_K, w.data(), od, k, rows, 4, 2);
  std::vector<double> y(size_t(rows * od));
  y = qgate::test_support::qgate_mmq_expectation(WeightType::q6_K, w.data(), od, k, in.hidden.data(), rows, 2);
  EXPECT_EQ(argmax(y, rows, od), in.targets);
  y = qgate::test_support::qgate_f16_expectation(WeightType::q6_K, w.data(), od, k, in.hidden.data(), rows, 2);
  EXPECT_EQ(argmax(y, rows, od), in.targets);
  auto bad = w;
  auto* blocks = reinterpret_cast<qgate::quant::BlockQ6_K*>(bad.data());
  for (int64_t b = 0; b < od * k / 256; ++b) blocks[b].scales[15] = blocks[b].scales[14];
  y = qgate::test_support::qgate_mmq_expectation(WeightType::q6_K, bad.data(), od, k, in.hidden.data(), rows, 2);
  const auto tokens = argmax(y, rows, od);
  int changed = 0;
  for (int64_t i = 0; i < rows; ++i) changed += tokens[size_t(i)] != in.targets[size_t(i)];
  EXPECT_GE(changed, 1);
  std::printf("k=4096: the sub-scale bug changes %d of %d tokens\n", changed, int(rows));
}
