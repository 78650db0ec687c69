// Holm's step-down procedure (multiplicity.h).
#include "qgate/stats/multiplicity.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace qgate::stats {

std::vector<bool> holm_rejections(std::span<const double> p_values, double alpha) {
  if (!(alpha > 0 && alpha < 1)) throw std::invalid_argument("alpha must be in (0, 1)");
  for (double p : p_values) {
    if (!(p >= 0 && p <= 1)) throw std::invalid_argument("a p-value must be in [0, 1], got " + std::to_string(p));
  }
  const std::size_t m = p_values.size();
  std::vector<std::size_t> order(m);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return p_values[x] < p_values[y]; });
  std::vector<bool> rejected(m, false);
  for (std::size_t k = 0; k < m; ++k) {
    if (p_values[order[k]] > alpha / double(m - k)) break;  // this one and every larger one stay
    rejected[order[k]] = true;
  }
  return rejected;
}

}  // namespace qgate::stats
