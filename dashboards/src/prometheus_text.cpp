// PrometheusText: the text exposition format, version 0.0.4.
#include "qgate/dashboards/prometheus_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace qgate::dashboards {
namespace {

bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }

/// A metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) or, without colons, a label name.
bool valid_name(const std::string& name, bool colons) {
  if (name.empty()) return false;
  auto ok_start = [&](char c) { return name_start(c) || (colons && c == ':'); };
  auto ok_char = [&](char c) { return name_char(c) || (colons && c == ':'); };
  return ok_start(name[0]) && std::all_of(name.begin() + 1, name.end(), ok_char);
}

const char* type_word(MetricType type) {
  switch (type) {
    case MetricType::Counter:
      return "counter";
    case MetricType::Gauge:
      return "gauge";
    case MetricType::Histogram:
      return "histogram";
    case MetricType::Summary:
      return "summary";
    case MetricType::Untyped:
      break;
  }
  return "untyped";
}

bool suffix_allowed(MetricType type, const std::string& suffix) {
  if (suffix.empty()) return type != MetricType::Histogram;
  if (suffix == "_sum" || suffix == "_count") return type == MetricType::Histogram || type == MetricType::Summary;
  if (suffix == "_bucket") return type == MetricType::Histogram;
  return false;
}

}  // namespace

std::string PrometheusText::format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::trunc(value) && std::fabs(value) < 1e15) {
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<long long>(value));
    return std::string(buf, end);
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);  // the shortest form that reads back exactly
  return std::string(buf, end);
}

std::string PrometheusText::escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string PrometheusText::escape_help(const std::string& help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

void PrometheusText::family(const std::string& name, MetricType type, const std::string& help) {
  if (!valid_name(name, true)) throw std::invalid_argument("'" + name + "' is not a metric name");
  if (std::find(written_.begin(), written_.end(), name) != written_.end())
    throw std::invalid_argument("the metric " + name + " is written twice");
  written_.push_back(name);
  name_ = name;
  type_ = type;
  out_ += "# HELP " + name + " " + escape_help(help) + "\n";
  out_ += "# TYPE " + name + " " + type_word(type) + "\n";
}

void PrometheusText::sample(const MetricLabels& labels, double value, const std::string& suffix) {
  if (name_.empty()) throw std::invalid_argument("a sample before any metric family");
  if (!suffix_allowed(type_, suffix))
    throw std::invalid_argument("the " + std::string(type_word(type_)) + " " + name_ + " has no sample '" + name_ +
                                suffix + "'");
  out_ += name_ + suffix;
  if (!labels.empty()) {
    out_ += '{';
    bool first = true;
    for (const auto& [label, text] : labels) {
      if (!valid_name(label, false) || label.rfind("__", 0) == 0)
        throw std::invalid_argument("'" + label + "' is not a label name (" + name_ + ")");
      if (!first) out_ += ',';
      first = false;
      out_ += label + "=\"" + escape_label_value(text) + "\"";
    }
    out_ += '}';
  }
  out_ += ' ' + format_value(value) + '\n';
}

void PrometheusText::histogram(const MetricLabels& labels, const std::vector<double>& bounds,
                               const std::vector<std::uint64_t>& cumulative, std::uint64_t count, double sum) {
  if (bounds.size() != cumulative.size())
    throw std::invalid_argument("the histogram " + name_ + " has " + std::to_string(bounds.size()) + " bounds and " +
                                std::to_string(cumulative.size()) + " counts");
  for (size_t i = 0; i < bounds.size(); ++i) {
    MetricLabels with_le = labels;
    with_le.emplace_back("le", format_value(bounds[i]));
    sample(with_le, double(cumulative[i]), "_bucket");
  }
  MetricLabels all = labels;
  all.emplace_back("le", "+Inf");
  sample(all, double(count), "_bucket");
  sample(labels, sum, "_sum");
  sample(labels, double(count), "_count");
}

}  // namespace qgate::dashboards
