// GEMM problems the worker runs: shapes, the standard parity sweep, and seeded input data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "qgate/quant/block_formats.h"

namespace qgate::worker {

struct GemmShape {
  int64_t nt = 0;  // tokens
  int64_t od = 0;  // weight rows (outputs)
  int64_t k = 0;   // reduction
  std::string to_string() const;
  bool operator==(const GemmShape&) const = default;
};

/// Parses "NTxODxK" (e.g. "512x4096x4096"); sizes must be positive. Empty with *error otherwise.
std::optional<GemmShape> parse_shape(std::string_view text, std::string* error);

/// The standard sweep: odd tile edges in tokens and rows, k of 2 super-blocks (512), and a real
/// 7B shape (512x4096x4096). Every k is a multiple of 256, so every type runs every shape.
const std::vector<GemmShape>& standard_shapes();
/// The standard sweep without its 7B shape: every tile edge, in well under a second per type on a
/// small CPU (the 7B shape alone takes seconds a case there).
const std::vector<GemmShape>& quick_shapes();

/// Parses "all" or a comma-separated list of ggml type names.
std::optional<std::vector<quant::WeightType>> parse_types(std::string_view text, std::string* error);

/// A case's seed, derived from the run's base seed, the type and the shape, so any single case
/// can be re-run alone and get the same inputs.
uint64_t case_seed(uint64_t base_seed, quant::WeightType type, const GemmShape& shape);

/// Weights uniform in [-1, 1) quantized to `type`, od rows of raw blocks.
std::vector<uint8_t> make_weights(quant::WeightType type, int64_t od, int64_t k, uint64_t seed);
/// Activations uniform in [-1, 1), never zero blocks (zeros hide unwritten outputs).
std::vector<float> make_activations(int64_t nt, int64_t k, uint64_t seed);

/// The activation rows of a parity case (proto ActivationKind): random rows, or one of the edge
/// rows every sweep includes.
enum class ActivationKind { random, zero, outlier, tiny, ties, large };
std::string_view to_string(ActivationKind kind);
/// zero, outlier, tiny, ties, large: the edge rows, in sweep order.
const std::vector<ActivationKind>& edge_activation_kinds();
/// The shape the edge rows run at, for every type: 8 rows of one kind, 96 outputs, k = 512.
GemmShape edge_case_shape();
/// nt rows of `kind`:
/// - random: as make_activations;
/// - zero: all 0;
/// - outlier: random, with one value of 1e4 in the first block (hidden states have such channels);
/// - tiny: random times 1e-6;
/// - ties: per 32, amax = 127/64 and the other values (n + 1/2)/64, so x * 127/amax = n + 1/2
///   exactly: round-half-even and roundf give different integers;
/// - large: random times 10.
std::vector<float> make_activations(ActivationKind kind, int64_t nt, int64_t k, uint64_t seed);

}  // namespace qgate::worker
