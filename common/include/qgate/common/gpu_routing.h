// The words a job and a daemon use to say which GPU runs a job (docs/fleet.md): a GPU model, matched
// against the words of a GPU's name, labels, and the host a daemon answers for. One spelling of
// each, shared by the CLI's checks, the daemon's submit and the store's claim.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace qgate {

/// A GPU model or name in its matching form: upper case, every run of characters other than
/// letters and digits one space, trimmed. "NVIDIA A100-SXM4-80GB" -> "NVIDIA A100 SXM4 80GB".
std::string normalize_gpu_model(std::string_view text);

/// Whether a GPU named `gpu_name` is of `model` (both in any spelling): the model's words appear
/// in the name's words, in order and side by side. "H100" is an "NVIDIA H100 80GB HBM3"; "A10" is
/// not an "NVIDIA A100-SXM4-80GB". An empty model matches every GPU.
bool gpu_is_model(std::string_view gpu_name, std::string_view model);

/// Why `model` cannot be a job's GPU model, or nullopt when it can: 1 to 64 characters with at
/// least one letter or digit.
std::optional<std::string> invalid_gpu_model(std::string_view model);

/// Why `label` cannot be a label, or nullopt when it can: 1 to 64 of a-z, A-Z, 0-9, '.', '_', '-',
/// starting with a letter or digit.
std::optional<std::string> invalid_label(std::string_view label);

/// Why `host` cannot name a daemon's host, or nullopt when it can: 1 to 253 of a-z, A-Z, 0-9, '.',
/// '_' and '-', starting with a letter or digit (a hostname or a Kubernetes node name).
std::optional<std::string> invalid_host_name(std::string_view host);

/// This machine's hostname (gethostname), or "unknown-host" when it has none.
std::string machine_host_name();

/// Labels sorted, without repeats: the form jobs and daemons keep.
std::vector<std::string> canonical_labels(std::vector<std::string> labels);

}  // namespace qgate
