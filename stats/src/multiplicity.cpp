// Holm's step-down and Benjamini-Hochberg's step-up procedures (multiplicity.h).
#include "qgate/stats/multiplicity.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace qgate::stats {

namespace {

void check_p_values(std::span<const double> p_values) {
  for (double p : p_values) {
    if (!(p >= 0 && p <= 1)) throw std::invalid_argument("a p-value must be in [0, 1], got " + std::to_string(p));
  }
}

// Positions of the p-values, smallest p first (ties in input order).
std::vector<std::size_t> ascending_order(std::span<const double> p_values) {
  std::vector<std::size_t> order(p_values.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return p_values[x] < p_values[y]; });
  return order;
}

}  // namespace

std::vector<bool> holm_rejections(std::span<const double> p_values, double alpha) {
  if (!(alpha > 0 && alpha < 1)) throw std::invalid_argument("alpha must be in (0, 1)");
  check_p_values(p_values);
  const std::size_t m = p_values.size();
  const std::vector<std::size_t> order = ascending_order(p_values);
  std::vector<bool> rejected(m, false);
  for (std::size_t k = 0; k < m; ++k) {
    if (p_values[order[k]] > alpha / double(m - k)) break;  // this one and every larger one stay
    rejected[order[k]] = true;
  }
  return rejected;
}

std::vector<double> benjamini_hochberg_adjusted(std::span<const double> p_values) {
  check_p_values(p_values);
  const std::size_t m = p_values.size();
  const std::vector<std::size_t> order = ascending_order(p_values);
  std::vector<double> adjusted(m, 1.0);
  double running_min = 1.0;  // from the largest p down: the step-up's minimum over j >= k
  for (std::size_t k = m; k-- > 0;) {
    running_min = std::min(running_min, double(m) * p_values[order[k]] / double(k + 1));
    adjusted[order[k]] = running_min;
  }
  return adjusted;
}

std::vector<bool> benjamini_hochberg_rejections(std::span<const double> p_values, double q) {
  if (!(q > 0 && q < 1)) throw std::invalid_argument("the false discovery rate must be in (0, 1)");
  check_p_values(p_values);
  const std::size_t m = p_values.size();
  const std::vector<std::size_t> order = ascending_order(p_values);
  // The largest k with p_(k) <= k q / m; it and every smaller one are rejected.
  std::size_t rejected_count = 0;
  for (std::size_t k = m; k > 0; --k)
    if (p_values[order[k - 1]] <= double(k) * q / double(m)) {
      rejected_count = k;
      break;
    }
  std::vector<bool> rejected(m, false);
  for (std::size_t k = 0; k < rejected_count; ++k) rejected[order[k]] = true;
  return rejected;
}

}  // namespace qgate::stats
