// Argument rules of the qgate CLI (see options.h).
#include "qgate/client/options.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <stdexcept>

#include "qgate/common/default_paths.h"
#include "qgate/common/gpu_list.h"
#include "qgate/common/gpu_routing.h"
#include "qgate/interop/output_reader.h"
#include "qgate/v1/record_words.h"
#include "qgate/v1/state_words.h"

namespace qgate::client {

std::string resolve_server_address(const std::optional<std::string>& flag,
                                   const char* env_value) {
  if (flag) return *flag;  // an explicit empty --server is a mistake, reported by normalize_address
  if (env_value != nullptr && *env_value != '\0') return env_value;
  return paths::default_server_address();
}

std::string normalize_address(const std::string& address) {
  std::string target = paths::to_grpc_target(address);
  if (target.empty()) throw UsageError("--server: empty address");
  if (target == "unix:" || target == "unix://")
    throw UsageError("--server: '" + address + "' names no socket path");
  return target;
}

std::int64_t parse_since(const std::string& text, std::int64_t now_ms) {
  auto bad = [&text]() {
    return UsageError("--since: '" + text + "' is not a duration like 30d (units: s, m, h, d, w)");
  };
  if (text.size() < 2) throw bad();
  std::int64_t unit_ms = 0;
  switch (text.back()) {
    case 's': unit_ms = 1'000; break;
    case 'm': unit_ms = 60'000; break;
    case 'h': unit_ms = 3'600'000; break;
    case 'd': unit_ms = 86'400'000; break;
    case 'w': unit_ms = 7 * 86'400'000LL; break;
    default: throw bad();
  }
  // Digits only: std::stoll would accept signs, spaces and trailing junk.
  std::int64_t count = 0;
  for (std::size_t i = 0; i + 1 < text.size(); ++i) {
    const char c = text[i];
    if (!std::isdigit(static_cast<unsigned char>(c))) throw bad();
    if (count > (std::numeric_limits<std::int64_t>::max() - (c - '0')) / 10) throw bad();
    count = count * 10 + (c - '0');
  }
  if (count == 0) throw bad();
  if (count > now_ms / unit_ms) throw bad();  // before 1970: surely a typo
  return now_ms - count * unit_ms;
}

v1::JobKind resolve_kind(const std::string& kind, const std::string& baseline) {
  if (kind.empty()) return baseline.empty() ? v1::JOB_KIND_AB : v1::JOB_KIND_GATE;
  if (kind == "gate") {
    if (baseline.empty()) throw UsageError("--kind gate needs --baseline BUILD to compare against");
    return v1::JOB_KIND_GATE;
  }
  if (kind == "ab" || kind == "parity") {
    if (!baseline.empty())
      throw UsageError("--baseline only applies to gate jobs, not --kind " + kind);
    return kind == "ab" ? v1::JOB_KIND_AB : v1::JOB_KIND_PARITY;
  }
  throw UsageError("--kind: '" + kind + "' is not one of gate, ab, parity");
}

v1::JobState parse_state(const std::string& text) {
  if (text.empty()) return v1::JOB_STATE_UNSPECIFIED;
  if (const auto state = words::job_state_from_word(text)) return *state;
  std::string known;
  for (const std::string& word : words::job_state_words()) known += (known.empty() ? "" : ", ") + word;
  throw UsageError("--state: '" + text + "' is not one of " + known);
}

void check_build_name(const std::string& name) {
  if (name.empty()) throw UsageError("--name: empty build name");
  for (const char c : name) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
    if (!ok)
      throw UsageError("--name: '" + name + "' may hold only letters, digits, '.', '_' and '-'");
  }
  if (name == "." || name == "..") throw UsageError("--name: '" + name + "' is not a build name");
}

std::optional<std::string> nearest_word(const std::string& word, const std::vector<std::string>& candidates) {
  // Optimal string alignment distance: Levenshtein plus the swap of two neighbouring characters.
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
      for (std::size_t j = 1; j <= b.size(); ++j) {
        const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
    return d[a.size()][b.size()];
  };
  std::optional<std::string> best;
  std::size_t best_distance = 3;
  for (const std::string& candidate : candidates) {
    const std::size_t edits = distance(word, candidate);
    if (edits < best_distance && 2 * edits < word.size()) {
      best = candidate;
      best_distance = edits;
    }
  }
  return best;
}

std::vector<std::string> split_command_line(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\') {
      if (++i == text.size()) throw UsageError("the command ends in a backslash");
      word += text[i];
    } else if (c == '\'') {
      const std::size_t end = text.find('\'', i + 1);
      if (end == std::string::npos) throw UsageError("the command has an unclosed ' quote");
      word += text.substr(i + 1, end - i - 1);
      i = end;
    } else if (c == '"') {
      for (++i;; ++i) {
        if (i == text.size()) throw UsageError("the command has an unclosed \" quote");
        if (text[i] == '"') break;
        if (text[i] == '\\' && i + 1 < text.size() && std::string_view("\"\\$`").find(text[i + 1]) != std::string_view::npos)
          ++i;
        word += text[i];
      }
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  if (words.empty()) throw UsageError("the command is empty");
  return words;
}

v1::OutputReader parse_output_reader(const std::string& text) {
  const std::size_t colon = text.find(':');
  const std::string format_word = text.substr(0, colon);
  const auto format = words::output_format_from_word(format_word);
  if (!format)
    throw UsageError("'" + text + "' is not an output reader: llama-bench-json[:FIELD], llama-bench-jsonl[:FIELD], "
                     "json-pointer:/PATH or regex:EXPR");
  v1::OutputReader reader;
  reader.set_format(*format);
  if (colon != std::string::npos) reader.set_expression(text.substr(colon + 1));
  if (const std::string bad = interop::check_reader(reader); !bad.empty()) throw UsageError(bad);
  return reader;
}

void parse_env_toggle(const std::string& text, v1::CommandSpec* command) {
  const std::size_t eq = text.find('='), bar = text.find('|');
  if (eq == std::string::npos || bar == std::string::npos || bar < eq || eq == 0)
    throw UsageError("--toggle: '" + text + "' is not VAR=a|b (e.g. MINFER_MMQ=1|0)");
  command->set_toggle(v1::COMMAND_TOGGLE_ENV);
  command->set_variable(text.substr(0, eq));
  command->set_value_a(text.substr(eq + 1, bar - eq - 1));
  command->set_value_b(text.substr(bar + 1));
  if (command->value_a() == command->value_b()) throw UsageError("--toggle: the two values are the same");
}

std::vector<int> parse_gpu_choice(const std::string& text, bool split) {
  std::vector<int> out;
  try {
    out = common::parse_gpu_list(text);
  } catch (const std::invalid_argument&) {
    throw UsageError("--gpu: '" + text + "' is not a GPU ordinal (or, with --split-gpus, a pair such as 0,1)");
  }
  if (out.size() > 2) throw UsageError("--gpu: name one GPU, or a pair with --split-gpus");
  if (out.size() == 2 && !split) throw UsageError("--gpu: a pair of GPUs is for --split-gpus; a job runs on one");
  if (out.size() == 1 && split) throw UsageError("--gpu with --split-gpus names the pair: two GPUs such as 0,1");
  if (out.size() == 2 && out[0] == out[1]) throw UsageError("--gpu: a split pair is two different GPUs");
  return out;
}

std::string check_gpu_model(const std::string& text) {
  if (const auto why = invalid_gpu_model(text)) throw UsageError("--gpu-model: '" + text + "': " + *why);
  return text;
}

std::string check_gpu_uuid(const std::string& text) {
  const bool printable = std::all_of(text.begin(), text.end(), [](char c) {
    return static_cast<unsigned char>(c) > ' ' && static_cast<unsigned char>(c) < 0x7f;
  });
  if (text.empty() || text.size() > 128 || !printable)
    throw UsageError("--gpu-uuid: '" + text +
                     "' is not a GPU uuid: 1 to 128 characters without blanks, e.g. GPU-5a8e1c2d-...");
  return text;
}

std::vector<std::string> parse_labels(const std::vector<std::string>& values) {
  std::vector<std::string> labels;
  for (const std::string& value : values) {
    std::size_t at = 0;
    while (true) {
      const std::size_t comma = value.find(',', at);
      const std::string label = value.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
      if (label.empty()) throw UsageError("--label: '" + value + "' holds an empty label (labels are comma-separated)");
      if (const auto why = invalid_label(label)) throw UsageError("--label: " + *why);
      labels.push_back(label);
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
  }
  return canonical_labels(std::move(labels));
}

void set_gpu_routing(v1::JobSpec* spec, const std::optional<std::string>& gpu_model,
                     const std::optional<std::string>& gpu_uuid, const std::vector<std::string>& labels) {
  spec->set_gpu_model(gpu_model ? check_gpu_model(*gpu_model) : "");
  spec->set_gpu_uuid(gpu_uuid ? check_gpu_uuid(*gpu_uuid) : "");
  spec->clear_labels();
  for (std::string& label : parse_labels(labels)) spec->add_labels(std::move(label));
}

}  // namespace qgate::client
