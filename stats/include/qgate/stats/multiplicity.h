// Many questions asked at once: which of several p-values stay significant when the chance of any false
// rejection among them (the family-wise error rate) is held at alpha. Holm's step-down procedure does
// that under any dependence between the tests, and rejects at least what Bonferroni's would
// (docs/ab-statistics.md). Benjamini-Hochberg's step-up procedure holds the expected share of false
// rejections among the rejections (the false discovery rate) at q for independent tests, which is also
// the family-wise rate when nothing is real (docs/change-points.md).
#pragma once

#include <span>
#include <vector>

namespace qgate::stats {

/// Holm's step-down procedure: with the p-values sorted, p_(k) (k = 1..m) is rejected while
/// p_(k) <= alpha / (m - k + 1) holds for it and every smaller one. Returns, in the input's order,
/// whether each is rejected. Throws std::invalid_argument for alpha outside (0, 1) or a p-value
/// outside [0, 1].
std::vector<bool> holm_rejections(std::span<const double> p_values, double alpha);

/// Benjamini-Hochberg adjusted p-values (q-values), in the input's order: with the p-values sorted,
/// q_(k) = min over j >= k of min(1, m p_(j) / j). A p-value is rejected at false discovery rate q
/// exactly when its q-value is at most q. Throws std::invalid_argument for a p-value outside [0, 1].
std::vector<double> benjamini_hochberg_adjusted(std::span<const double> p_values);

/// Benjamini-Hochberg's step-up procedure at false discovery rate q: p_(k) is rejected when some
/// j >= k has p_(j) <= j q / m. Returns, in the input's order, whether each is rejected. Throws
/// std::invalid_argument for q outside (0, 1) or a p-value outside [0, 1].
std::vector<bool> benjamini_hochberg_rejections(std::span<const double> p_values, double q);

}  // namespace qgate::stats
