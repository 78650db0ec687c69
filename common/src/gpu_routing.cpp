// GPU models, labels and host names in their one spelling (gpu_routing.h).
#include "qgate/common/gpu_routing.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>

namespace qgate {

namespace {
bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

/// Why `text` cannot be a `what` (a label, a host name): 1 to `longest` of letters, digits, '.', '_'
/// and '-', starting with a letter or digit; nullopt when it can.
std::optional<std::string> invalid_name_word(std::string_view text, const char* what, std::size_t longest) {
  const bool ok = !text.empty() && text.size() <= longest && is_alnum(text.front()) &&
                  std::all_of(text.begin(), text.end(), [](char c) { return is_alnum(c) || c == '.' || c == '_' || c == '-'; });
  if (ok) return std::nullopt;
  return std::string(what) + " '" + std::string(text) + "' must be 1 to " + std::to_string(longest) +
         " of letters, digits, '.', '_' and '-', starting with a letter or digit";
}
}  // namespace

std::string normalize_gpu_model(std::string_view text) {
  std::string out;
  bool gap = false;
  for (char c : text) {
    if (!is_alnum(c)) {
      gap = true;
      continue;
    }
    if (gap && !out.empty()) out += ' ';
    gap = false;
    out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return out;
}

bool gpu_is_model(std::string_view gpu_name, std::string_view model) {
  const std::string wanted = normalize_gpu_model(model);
  if (wanted.empty()) return true;
  // Padded with spaces, so the model's words must be whole words of the name.
  return (" " + normalize_gpu_model(gpu_name) + " ").find(" " + wanted + " ") != std::string::npos;
}

std::optional<std::string> invalid_gpu_model(std::string_view model) {
  if (model.empty() || model.size() > 64) return "a GPU model is 1 to 64 characters, e.g. H200 or \"RTX 4090\"";
  if (normalize_gpu_model(model).empty()) return "a GPU model needs a letter or digit, e.g. H200";
  return std::nullopt;
}

std::optional<std::string> invalid_label(std::string_view label) { return invalid_name_word(label, "label", 64); }

std::optional<std::string> invalid_host_name(std::string_view host) {
  return invalid_name_word(host, "host name", 253);
}

std::string machine_host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "unknown-host";
  return host;
}

std::vector<std::string> canonical_labels(std::vector<std::string> labels) {
  std::sort(labels.begin(), labels.end());
  labels.erase(std::unique(labels.begin(), labels.end()), labels.end());
  return labels;
}

}  // namespace qgate
