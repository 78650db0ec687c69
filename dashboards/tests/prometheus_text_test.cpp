// PrometheusText, the writer behind qgated's /metrics: HELP and TYPE before each family's samples,
// label values and HELP text escaped, values in the forms Prometheus reads (integers, NaN, +Inf),
// histograms from cumulative counts, and bad names or samples refused.
#include "qgate/dashboards/prometheus_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace qgate::dashboards {
namespace {

TEST(PrometheusText, WritesHelpTypeAndSamplesWithLabels) {
  PrometheusText t;
  t.family("qgate_jobs", MetricType::Gauge, "Jobs in the store, by state.");
  t.sample({{"state", "done"}}, 3);
  t.sample({{"state", "failed"}, {"kind", "ab"}}, 0);
  t.family("qgate_uptime_seconds", MetricType::Gauge, "Seconds.");
  t.sample({}, 12.5);
  EXPECT_EQ(t.text(),
            "# HELP qgate_jobs Jobs in the store, by state.\n"
            "# TYPE qgate_jobs gauge\n"
            "qgate_jobs{state=\"done\"} 3\n"
            "qgate_jobs{state=\"failed\",kind=\"ab\"} 0\n"
            "# HELP qgate_uptime_seconds Seconds.\n"
            "# TYPE qgate_uptime_seconds gauge\n"
            "qgate_uptime_seconds 12.5\n");
}

TEST(PrometheusText, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(PrometheusText::escape_label_value(R"(a\b"c)" "\n" "d"), R"(a\\b\"c\nd)");
  EXPECT_EQ(PrometheusText::escape_help(R"(a\b"c)" "\n" "d"), R"(a\\b"c\nd)") << "HELP keeps its quotes";
  PrometheusText t;
  t.family("qgate_gpu_info", MetricType::Gauge, "one\nline");
  t.sample({{"name", "NVIDIA \"H200\"\nrev \\2"}}, 1);
  EXPECT_EQ(t.text(),
            "# HELP qgate_gpu_info one\\nline\n"
            "# TYPE qgate_gpu_info gauge\n"
            "qgate_gpu_info{name=\"NVIDIA \\\"H200\\\"\\nrev \\\\2\"} 1\n");
}

TEST(PrometheusText, ValuesReadBackExactly) {
  EXPECT_EQ(PrometheusText::format_value(0), "0");
  EXPECT_EQ(PrometheusText::format_value(-7), "-7");
  EXPECT_EQ(PrometheusText::format_value(123456789012), "123456789012") << "no exponent for a byte count";
  EXPECT_EQ(PrometheusText::format_value(0.1), "0.1");
  EXPECT_EQ(std::stod(PrometheusText::format_value(1.0 / 3)), 1.0 / 3);
  EXPECT_EQ(PrometheusText::format_value(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(PrometheusText::format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(PrometheusText::format_value(-std::numeric_limits<double>::infinity()), "-Inf");
}

TEST(PrometheusText, HistogramsAreCumulativeWithInfSumAndCount) {
  PrometheusText t;
  t.family("qgate_job_run_duration_seconds", MetricType::Histogram, "Run seconds.");
  t.histogram({{"gpu", "0"}}, {1, 5}, {1, 3}, 4, 21.5);
  EXPECT_EQ(t.text(),
            "# HELP qgate_job_run_duration_seconds Run seconds.\n"
            "# TYPE qgate_job_run_duration_seconds histogram\n"
            "qgate_job_run_duration_seconds_bucket{gpu=\"0\",le=\"1\"} 1\n"
            "qgate_job_run_duration_seconds_bucket{gpu=\"0\",le=\"5\"} 3\n"
            "qgate_job_run_duration_seconds_bucket{gpu=\"0\",le=\"+Inf\"} 4\n"
            "qgate_job_run_duration_seconds_sum{gpu=\"0\"} 21.5\n"
            "qgate_job_run_duration_seconds_count{gpu=\"0\"} 4\n");
  EXPECT_THROW(t.histogram({}, {1, 5}, {1}, 1, 1), std::invalid_argument) << "a count per bound";
}

TEST(PrometheusText, RefusesBadNamesAndSamples) {
  PrometheusText t;
  EXPECT_THROW(t.sample({}, 1), std::invalid_argument) << "a sample before any family";
  EXPECT_THROW(t.family("1jobs", MetricType::Gauge, "x"), std::invalid_argument);
  EXPECT_THROW(t.family("qgate-jobs", MetricType::Gauge, "x"), std::invalid_argument);
  EXPECT_THROW(t.family("", MetricType::Gauge, "x"), std::invalid_argument);
  t.family("qgate:jobs_total", MetricType::Counter, "Colons are allowed in metric names.");
  EXPECT_THROW(t.family("qgate:jobs_total", MetricType::Counter, "again"), std::invalid_argument);
  EXPECT_THROW(t.sample({{"bad-label", "x"}}, 1), std::invalid_argument);
  EXPECT_THROW(t.sample({{"__reserved", "x"}}, 1), std::invalid_argument);
  EXPECT_THROW(t.sample({{"a:b", "x"}}, 1), std::invalid_argument) << "no colons in label names";
  EXPECT_THROW(t.sample({}, 1, "_bucket"), std::invalid_argument) << "a counter has no buckets";
  t.family("qgate_latency_seconds", MetricType::Histogram, "x");
  EXPECT_THROW(t.sample({}, 1), std::invalid_argument) << "a histogram's samples are _bucket, _sum, _count";
}

}  // namespace
}  // namespace qgate::dashboards
