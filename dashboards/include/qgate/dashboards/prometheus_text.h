// PrometheusText: writes metrics in Prometheus' text exposition format, version 0.0.4, as qgated
// answers /metrics (docs/operations.md): for each metric family a `# HELP` and a `# TYPE` line, then
// its samples, `name{label="value",...} value`. Names are checked, HELP text and label values are
// escaped, values are written so that Prometheus reads them back exactly (NaN and +Inf included).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace qgate::dashboards {

/// A sample's labels, in the order they are written.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { Counter, Gauge, Histogram, Summary, Untyped };

class PrometheusText {
 public:
  /// Starts a metric family: its HELP and TYPE lines. Throws std::invalid_argument for a name that
  /// is not [a-zA-Z_:][a-zA-Z0-9_:]* or a family already written.
  void family(const std::string& name, MetricType type, const std::string& help);
  /// One sample of the family begun last. `suffix` is "" or, for a histogram, "_bucket", "_sum" or
  /// "_count" (a summary: "_sum", "_count"). Throws std::invalid_argument for a bad label name, a
  /// suffix the family's type does not have, or a sample before any family.
  void sample(const MetricLabels& labels, double value, const std::string& suffix = "");
  /// A histogram's samples from its cumulative counts: `bounds` are the buckets' upper bounds in
  /// increasing order, `cumulative[i]` the observations <= bounds[i]; `count` is every observation
  /// (the +Inf bucket) and `sum` their sum.
  void histogram(const MetricLabels& labels, const std::vector<double>& bounds,
                 const std::vector<std::uint64_t>& cumulative, std::uint64_t count, double sum);

  const std::string& text() const { return out_; }

  /// A value as the format writes it: integers without an exponent, NaN, +Inf, -Inf.
  static std::string format_value(double value);
  /// A label value with backslash, double quote and newline escaped.
  static std::string escape_label_value(const std::string& value);
  /// HELP text with backslash and newline escaped.
  static std::string escape_help(const std::string& help);

 private:
  std::string out_;
  std::string name_;  // the family begun last
  MetricType type_ = MetricType::Untyped;
  std::vector<std::string> written_;
};

}  // namespace qgate::dashboards
