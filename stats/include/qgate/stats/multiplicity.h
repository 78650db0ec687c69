// Many questions asked at once: which of several p-values stay significant when the chance of any false
// rejection among them (the family-wise error rate) is held at alpha. Holm's step-down procedure does
// that under any dependence between the tests, and rejects at least what Bonferroni's would
// (docs/ab-statistics.md).
#pragma once

#include <span>
#include <vector>

namespace qgate::stats {

/// Holm's step-down procedure: with the p-values sorted, p_(k) (k = 1..m) is rejected while
/// p_(k) <= alpha / (m - k + 1) holds for it and every smaller one. Returns, in the input's order,
/// whether each is rejected. Throws std::invalid_argument for alpha outside (0, 1) or a p-value
/// outside [0, 1].
std::vector<bool> holm_rejections(std::span<const double> p_values, double alpha);

}  // namespace qgate::stats
