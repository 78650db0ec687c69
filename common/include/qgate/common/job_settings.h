// A job's settings as domain enums, each with its one word list: the order of an A/B's timed runs,
// what a run's tok/s is timed over, and the parity sweep's shapes (docs/measurement.md). The store
// keeps their words; the CLI reads and prints the same words; each process converts them to the
// API's enums at one seam (qgate/v1/spec_words.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qgate {

/// The order of an A/B's timed runs: ABBA blocks, or all of A then all of B.
enum class RunOrder { Abba, Sequential };
std::string_view to_string(RunOrder order);  // "abba", "sequential"
std::optional<RunOrder> run_order_from_string(std::string_view text);

/// What a run's tok/s is timed over: each GEMM alone, summed, or whole passes over the profile.
enum class TimingMode { Gemm, Pass };
std::string_view to_string(TimingMode timing);  // "gemm", "pass"
std::optional<TimingMode> timing_mode_from_string(std::string_view text);

/// The parity sweep's shapes. Unspecified differs from Standard: with a model file it means that
/// file's tensors only.
enum class ShapeSet { Unspecified, Standard, Quick, None };
std::string_view to_string(ShapeSet shapes);  // "unspecified", "standard", "quick", "none"
std::optional<ShapeSet> shape_set_from_string(std::string_view text);

/// The words a user may name, in order (for a flag's check and help): abba, sequential; gemm, pass;
/// standard, quick, none ("unspecified" is the store's word for a spec that named no set).
const std::vector<std::string>& run_order_words();
const std::vector<std::string>& timing_mode_words();
const std::vector<std::string>& shape_set_words();

}  // namespace qgate
