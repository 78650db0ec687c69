// Support for the stats tests' seeded Monte Carlo simulations of the A/B gate: a fixed generator
// (SplitMix64) with Box-Muller normals, so the simulated figures are the same with every standard
// library, and the slack of a simulated rate.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace qgate::stats::monte_carlo {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }  // in (0, 1)

  // Both normals of each Box-Muller pair: the cosine one now, the sine one at the next call.
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2 * std::log(uniform())), phi = 2 * std::numbers::pi * uniform();
    spare_ = r * std::sin(phi);
    has_spare_ = true;
    return r * std::cos(phi);
  }

  // The cosine normal of a fresh Box-Muller pair, the sine one dropped: two uniforms per call.
  double normal_from_fresh_pair() {
    const double r = std::sqrt(-2 * std::log(uniform())), phi = 2 * std::numbers::pi * uniform();
    return r * std::cos(phi);
  }

 private:
  uint64_t state_;
  double spare_ = 0;
  bool has_spare_ = false;
};

// Three standard errors of a proportion `rate` estimated from `trials` trials: the Monte Carlo slack
// a simulated rate is allowed over its bound.
inline double three_standard_errors(double rate, int trials) { return 3 * std::sqrt(rate * (1 - rate) / trials); }

}  // namespace qgate::stats::monte_carlo
