// GPU ordinals as a user writes them, "0" or "0,1": read the same way by qgated --gpus and by the
// CLI's --gpu.
#pragma once

#include <string>
#include <vector>

namespace qgate::common {

/// "0,1" as ordinals. Throws std::invalid_argument on anything but comma-separated non-negative
/// integers of at most four digits.
std::vector<int> parse_gpu_list(const std::string& text);

}  // namespace qgate::common
