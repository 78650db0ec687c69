// Seeded Monte Carlo check of the group-sequential A/B gate as the job runner runs it (the default
// policy's design, evaluate_look at each planned look, stop when it says so): the false PASS and false
// FAIL rates at a true ratio on the threshold, the A/A false DIFFERENT rate, false SAME at the edge of
// the equivalence band, power where it should be high, that verdict and comparison never disagree, and
// the expected number of pairs. Prints the table that bench/RESULTS.md quotes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "monte_carlo.h"
#include "qgate/stats/sequential.h"

using namespace qgate::stats;
using qgate::stats::monte_carlo::Rng;
using qgate::stats::monte_carlo::three_standard_errors;
using qgate::Comparison;
using qgate::Verdict;

namespace {

constexpr int kTrials = 10'000;
// Monte Carlo slack on a rate bound: three standard errors of a proportion at the bound.
double slack(double bound) { return three_standard_errors(bound, kTrials); }

struct Cell {
  double ratio;       // true tok/s ratio A / B
  double noise;       // log-normal run noise (sd of log tok/s per run)
  double spike_prob;  // probability that a run is slowed by a co-tenant
  double spike = 2;   // the slowdown of such a run
};

struct Tally {
  int pass = 0, fail = 0, inconclusive = 0, same = 0, different = 0, unknown = 0, contradictions = 0;
  long long pairs = 0;
  double p(int count) const { return static_cast<double>(count) / kTrials; }
  double mean_pairs() const { return static_cast<double>(pairs) / kTrials; }
};

// One arm's run: the true figure, run noise, and now and then a co-tenant halving it.
double run(Rng& rng, double figure, const Cell& c) {
  double x = figure * std::exp(c.noise * rng.normal());
  if (c.spike_prob > 0 && rng.uniform() < c.spike_prob) x /= c.spike;
  return x;
}

// The only combinations the rules allow: FAIL is DIFFERENT; SAME is PASS.
bool consistent(const LookResult& r) {
  if (r.verdict == Verdict::Fail && r.comparison != Comparison::Different) return false;
  if (r.comparison == Comparison::Same && r.verdict != Verdict::Pass) return false;
  const std::string first = r.reasons.empty() ? "" : r.reasons[0];
  const bool says = r.verdict == Verdict::Fail   ? first.find("is a slowdown beyond") != std::string::npos
                    : r.verdict == Verdict::Pass ? first.find("rules out a slowdown") != std::string::npos
                                                 : first.find("cannot tell") != std::string::npos ||
                                                       first.find("too few") != std::string::npos;
  return says && r.reasons.size() >= 2 && r.reasons[1].rfind(std::string(to_string(r.comparison)), 0) == 0;
}

Tally simulate(const Cell& c, const SequentialDesign& design, uint64_t seed, int trials = kTrials) {
  Rng rng(seed);
  Tally t;
  std::vector<AbPair> pairs;
  for (int trial = 0; trial < trials; ++trial) {
    pairs.clear();
    for (size_t look = 0; look < design.looks.size(); ++look) {
      while (pairs.size() < static_cast<size_t>(design.looks[look])) {
        const double a = run(rng, 400 * c.ratio, c);
        const double b = run(rng, 400, c);
        pairs.push_back({a, b, false});
      }
      // judge_look at every look, and the sentences (explain_look) where it stops: together they are
      // evaluate_look, the call the job runner makes.
      LookResult r = judge_look(pairs, design, look);
      if (r.decision == LookDecision::continue_adding) continue;
      explain_look(r, design);
      t.pass += r.verdict == Verdict::Pass;
      t.fail += r.verdict == Verdict::Fail;
      t.inconclusive += r.verdict == Verdict::Inconclusive;
      t.same += r.comparison == Comparison::Same;
      t.different += r.comparison == Comparison::Different;
      t.unknown += r.comparison == Comparison::Unknown;
      t.contradictions += consistent(r) ? 0 : 1;
      t.pairs += static_cast<long long>(r.pairs);
      break;
    }
  }
  return t;
}

std::string label(const Cell& c) {
  char buf[96];
  if (c.spike_prob > 0) {
    std::snprintf(buf, sizeof buf, "%.1f%% + %.0fx spike in %.0f%% of runs", 100 * c.noise, c.spike,
                  100 * c.spike_prob);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f%%", 100 * c.noise);
  }
  return buf;
}

}  // namespace

TEST(SequentialSimulation, ErrorRatesHoldAtNominalAndPowerIsThere) {
  const GatePolicy policy;  // the defaults the job runner uses: threshold 2%, 4..40 pairs, band 1%
  const SequentialDesign design = SequentialDesign::from_policy(policy);
  ASSERT_EQ(design.looks, (std::vector<int>{5, 10, 20, 40}));

  const std::vector<double> ratios = {0.95, 0.97, 0.98, 0.99, 1.00, 1.02};
  std::vector<Cell> cells;
  for (double noise : {0.005, 0.01, 0.03})
    for (double r : ratios) cells.push_back({r, noise, 0});
  for (double r : ratios) cells.push_back({r, 0.01, 0.1});

  std::printf("design: looks");
  for (size_t k = 0; k < design.looks.size(); ++k)
    std::printf(" %d (|t| >= %.3g, one-sided p %.2g)", design.looks[k], design.t_bound[k], design.nominal_p[k]);
  std::printf("\n%-34s %6s %8s %8s %8s %8s %8s %8s\n", "run noise", "ratio", "P(PASS)", "P(FAIL)", "P(INC)",
              "P(SAME)", "P(DIFF)", "E[pairs]");

  const double bound = design.alpha + slack(design.alpha);          // 2.5% + 3 SE = 2.97%
  const double diff_bound = 2 * design.alpha + slack(2 * design.alpha);  // 5% + 3 SE = 5.65%
  uint64_t seed = 0x5eed0000;
  for (const Cell& c : cells) {
    const Tally t = simulate(c, design, ++seed);
    std::printf("%-34s %6.2f %8.4f %8.4f %8.4f %8.4f %8.4f %8.1f\n", label(c).c_str(), c.ratio, t.p(t.pass),
                t.p(t.fail), t.p(t.inconclusive), t.p(t.same), t.p(t.different), t.mean_pairs());
    std::fflush(stdout);
    const std::string where = label(c) + " at ratio " + std::to_string(c.ratio);
    EXPECT_EQ(t.contradictions, 0) << where;
    EXPECT_EQ(t.pass + t.fail + t.inconclusive, kTrials) << where;
    if (c.ratio == 0.98) {  // exactly on the threshold: neither claim may be made more than 2.5%
      EXPECT_LE(t.p(t.pass), bound) << "false PASS, " << where;
      EXPECT_LE(t.p(t.fail), bound) << "false FAIL, " << where;
    }
    if (c.ratio < 0.98) EXPECT_LE(t.p(t.pass), bound) << "false PASS, " << where;
    if (c.ratio > 0.98) EXPECT_LE(t.p(t.fail), bound) << "false FAIL, " << where;
    if (c.ratio == 1.00) EXPECT_LE(t.p(t.different), diff_bound) << "A/A false DIFFERENT, " << where;
    if (c.ratio == 0.99) EXPECT_LE(t.p(t.same), bound) << "false SAME at the band's edge, " << where;
    if (c.ratio <= 0.97) EXPECT_EQ(t.same, 0) << "a 3% slowdown is never SAME, " << where;
    // Power floors where the design has room for it.
    if (c.spike_prob == 0 && c.noise <= 0.01) {
      if (c.ratio == 0.95) EXPECT_GE(t.p(t.fail), 0.95) << "power, " << where;
      if (c.ratio >= 1.00) EXPECT_GE(t.p(t.pass), 0.95) << "power, " << where;
    }
  }
}

TEST(SequentialSimulation, IsDeterministicForASeed) {
  const SequentialDesign design = SequentialDesign::from_policy(GatePolicy{});
  const Cell c{0.97, 0.03, 0.1};
  const Tally x = simulate(c, design, 42, 500), y = simulate(c, design, 42, 500), z = simulate(c, design, 43, 500);
  EXPECT_EQ(x.pass, y.pass);
  EXPECT_EQ(x.fail, y.fail);
  EXPECT_EQ(x.pairs, y.pairs);
  EXPECT_TRUE(x.pairs != z.pairs || x.pass != z.pass || x.fail != z.fail);
}

TEST(SequentialSimulation, TrimmingKeepsThePowerThatSpikesWouldTake) {
  // The same design without trimming (the plain t on the mean log-ratio), against 20% trimming, when
  // a co-tenant halves one run in ten. Both keep the error rates (spikes on either arm are
  // symmetric); without trimming the spikes swamp the standard error and the gate rarely decides.
  constexpr int kFew = 2000;
  const SequentialDesign trimmed = SequentialDesign::from_policy(GatePolicy{});
  const SequentialDesign plain = SequentialDesign::from_policy(GatePolicy{}, kDefaultSideAlpha, 0.0);
  std::printf("%-10s %6s %8s %8s %8s %8s\n", "trim", "ratio", "P(PASS)", "P(FAIL)", "P(SAME)", "E[pairs]");
  for (double ratio : {0.95, 0.98, 1.00}) {
    const Cell c{ratio, 0.01, 0.1};
    const Tally t = simulate(c, trimmed, 0xabc0 + static_cast<uint64_t>(100 * ratio), kFew);
    const Tally u = simulate(c, plain, 0xabc0 + static_cast<uint64_t>(100 * ratio), kFew);
    for (const auto& [name, x] : {std::pair{"20%", t}, std::pair{"none", u}}) {
      std::printf("%-10s %6.2f %8.4f %8.4f %8.4f %8.1f\n", name, ratio, double(x.pass) / kFew, double(x.fail) / kFew,
                  double(x.same) / kFew, double(x.pairs) / kFew);
    }
    if (ratio == 0.95) EXPECT_GT(t.fail, u.fail + kFew / 4) << "trimming must buy power against a 5% slowdown";
    if (ratio == 1.00) EXPECT_GT(t.pass, u.pass + kFew / 4) << "trimming must buy power on an A/A run";
    EXPECT_EQ(t.contradictions + u.contradictions, 0);
  }
}

TEST(SequentialSimulation, LookingWithoutSpendingIsCaughtByTheSameBounds) {
  // A negative control: the same looks, each judged with its fixed-sample 95% boundary (no alpha
  // spending), which is what looking repeatedly without a design does. The bounds above must catch it.
  const GatePolicy policy;
  SequentialDesign naive = SequentialDesign::from_policy(policy);
  for (size_t k = 0; k < naive.looks.size(); ++k) {
    GatePolicy one = policy;
    one.min_pairs = one.max_pairs = naive.looks[k];
    naive.t_bound[k] = SequentialDesign::from_policy(one).t_bound[0];
  }
  naive.target_halfwidth = 1e-9;  // no precision stop: stop at the first decided verdict or the budget
  constexpr int kControl = 4000;
  const Tally t = simulate(Cell{0.98, 0.03, 0}, naive, 0xc0de, kControl);
  const double false_pass = static_cast<double>(t.pass) / kControl, false_fail = static_cast<double>(t.fail) / kControl;
  std::printf("no spending, 4 looks, 3%% noise, ratio 0.98: P(PASS) %.4f P(FAIL) %.4f\n", false_pass, false_fail);
  const double bound = kDefaultSideAlpha + three_standard_errors(kDefaultSideAlpha, kControl);
  // FAIL always stops at once (FAIL is DIFFERENT); a PASS that is not yet SAME runs on to later looks,
  // where some fall back to INCONCLUSIVE, so the inflation shows most on the FAIL side.
  EXPECT_GT(false_fail, bound);
  EXPECT_GT(false_pass + false_fail, 2 * bound);
}
