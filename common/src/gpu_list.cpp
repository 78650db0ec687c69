// parse_gpu_list: comma-separated GPU ordinals.
#include "qgate/common/gpu_list.h"

#include <stdexcept>

namespace qgate::common {

std::vector<int> parse_gpu_list(const std::string& text) {
  std::vector<int> out;
  size_t at = 0;
  while (true) {
    const size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (item.empty() || item.size() > 4 || item.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument("'" + text + "' is not a list of GPU ordinals such as 0,1");
    out.push_back(std::stoi(item));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  return out;
}

}  // namespace qgate::common
