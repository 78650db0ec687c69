// What /metrics and /healthz read inside qgated, in-process: DaemonMetrics' buckets and counts, the
// scheduler counting a claimed job, its end and its claim statements into it, and HealthProbe with a scheduler that has not
// started, runs, and has stopped, and with a daemon that started read-only. The pages themselves are
// scraped from a real qgated in dashboards/tests/daemon_http_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "qgate/server/daemon_metrics.h"
#include "qgate/server/health_probe.h"
#include "scheduler_parts.h"

namespace qgate::server {
namespace {

using namespace std::chrono_literals;

using testing::SchedulerParts;

template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds within = 20s) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return pred();
}

TEST(DaemonMetrics, ObservationsLandInEveryBucketAtOrAboveThem) {
  DaemonMetrics metrics;
  metrics.job_claimed(0.05);  // the first bucket (0.1) and every one above
  metrics.job_claimed(3);     // 5 and above
  metrics.job_claimed(-2);    // a clock set back: counted as 0
  metrics.job_claimed(1e9);   // beyond the last bound: only in +Inf (the count)
  const DaemonMetrics::Snapshot s = metrics.snapshot();
  EXPECT_EQ(s.claimed, 4u);
  ASSERT_EQ(s.claim.bounds, DaemonMetrics::claim_bounds());
  ASSERT_EQ(s.claim.cumulative.size(), s.claim.bounds.size());
  for (size_t i = 0; i < s.claim.bounds.size(); ++i) {
    const double b = s.claim.bounds[i];
    const std::uint64_t expected = 2 + (b >= 3 ? 1 : 0);
    EXPECT_EQ(s.claim.cumulative[i], expected) << "le " << b;
  }
  EXPECT_EQ(s.claim.count, 4u);
  EXPECT_DOUBLE_EQ(s.claim.sum_s, 0.05 + 3 + 0 + 1e9);
  EXPECT_EQ(s.run.count, 0u);
  EXPECT_TRUE(s.finished.empty());

  metrics.job_finished("done", 12);
  metrics.job_finished("failed", 0.5);
  metrics.job_finished("done", 40);
  const DaemonMetrics::Snapshot after = metrics.snapshot();
  EXPECT_EQ(after.finished.at("done"), 2u);
  EXPECT_EQ(after.finished.at("failed"), 1u);
  EXPECT_EQ(after.run.count, 3u);
  EXPECT_DOUBLE_EQ(after.run.sum_s, 52.5);
  EXPECT_EQ(after.run.cumulative.front(), 1u) << "only the 0.5 s run is within the first bound (1 s)";
  EXPECT_GE(after.uptime_s, 0);
}

TEST(DaemonMetrics, ClaimStatementsAreTimedAndCountedByWhatTheyFound) {
  DaemonMetrics metrics;
  metrics.claim_statement(0.0001, true);  // within the first bucket (0.25 ms)
  metrics.claim_statement(0.003, false);  // 5 ms and above
  metrics.claim_statement(0.003, false);
  metrics.claim_statement(60, false);     // beyond the last bound: only in +Inf (the count)
  metrics.claim_statement_failed();       // counted, not timed
  const DaemonMetrics::Snapshot s = metrics.snapshot();
  EXPECT_EQ(s.statements_failed, 1u);
  ASSERT_EQ(s.statement_job.bounds, DaemonMetrics::statement_bounds());
  ASSERT_EQ(s.statement_empty.bounds, DaemonMetrics::statement_bounds());
  ASSERT_EQ(s.statement_job.cumulative.size(), s.statement_job.bounds.size());
  ASSERT_EQ(s.statement_empty.cumulative.size(), s.statement_empty.bounds.size());
  for (size_t i = 0; i < s.statement_job.bounds.size(); ++i) {
    const double b = s.statement_job.bounds[i];
    EXPECT_EQ(s.statement_job.cumulative[i], 1u) << "le " << b;
    EXPECT_EQ(s.statement_empty.cumulative[i], b >= 0.003 ? 2u : 0u) << "le " << b;
  }
  EXPECT_EQ(s.statement_job.count, 1u);
  EXPECT_EQ(s.statement_empty.count, 3u);
  EXPECT_DOUBLE_EQ(s.statement_job.sum_s, 0.0001);
  EXPECT_DOUBLE_EQ(s.statement_empty.sum_s, 0.006 + 60);
  EXPECT_EQ(s.claimed, 0u) << "a statement is not a claimed job";
  EXPECT_EQ(s.claim.count, 0u);
}

TEST(SchedulerMetrics, AClaimedJobAndItsEndAreCounted) {
  SchedulerParts parts("observability-test");
  DaemonMetrics metrics;
  parts.scheduler->set_metrics(&metrics);
  const int64_t job = parts.queue_job_without_its_build("gone", 'b');
  parts.scheduler->start();
  ASSERT_TRUE(eventually([&] { return metrics.snapshot().run.count == 1; })) << "the job never came back";
  parts.scheduler->stop();
  const DaemonMetrics::Snapshot s = metrics.snapshot();
  EXPECT_EQ(s.claimed, 1u);
  EXPECT_EQ(s.claim.count, 1u);
  EXPECT_GE(s.claim.sum_s, 0);
  EXPECT_LT(s.claim.sum_s, 60) << "claimed within the test's time";
  ASSERT_EQ(s.finished.size(), 1u);
  EXPECT_EQ(s.finished.count("failed"), 1u) << "a job whose build is missing ends FAILED";
  EXPECT_EQ(parts.store->find_job(job)->state, qgate::JobState::Failed);
  // Its claim statements: the one that found the job, and the empty ones around it (its own queue
  // first, then any GPU's), every one timed.
  EXPECT_EQ(s.statement_job.count, 1u);
  EXPECT_GE(s.statement_empty.count, 1u) << "the pinned queue is looked at first, and is empty";
  EXPECT_EQ(s.statements_failed, 0u);
  EXPECT_GT(s.statement_job.sum_s, 0);
  EXPECT_LT(s.statement_job.sum_s + s.statement_empty.sum_s, 60);
}

TEST(HealthProbe, HealthyOnlyWhileTheSchedulerLoops) {
  SchedulerParts parts("observability-test");
  const HealthProbe probe(*parts.store, *parts.scheduler, "");
  dashboards::ServiceHealth h = probe.check();
  EXPECT_FALSE(h.healthy) << "not started yet";
  EXPECT_NE(h.reason.find("the scheduler's loop for GPU 0 is not running"), std::string::npos) << h.reason;

  parts.scheduler->start();
  ASSERT_TRUE(eventually([&] { return probe.check().healthy; })) << probe.check().reason;
  h = probe.check();
  EXPECT_TRUE(h.reason.empty());
  ASSERT_EQ(h.checks.size(), 2u);
  EXPECT_EQ(h.checks[0], (std::pair<std::string, std::string>{"store", "ok"}));
  EXPECT_EQ(h.checks[1], (std::pair<std::string, std::string>{"scheduler", "ok"}));

  parts.scheduler->stop();
  h = probe.check();
  EXPECT_FALSE(h.healthy) << "stopped";
  EXPECT_NE(h.reason.find("is not running"), std::string::npos) << h.reason;
  EXPECT_EQ(h.checks[0].second, "ok") << "the store still answers";
}

TEST(HealthProbe, AReadOnlyDaemonIsNotHealthyAndSaysWhy) {
  SchedulerParts parts("observability-test");
  const HealthProbe probe(*parts.store, *parts.scheduler, "the database /x/qgate.db is read-only for uid 1000");
  const dashboards::ServiceHealth h = probe.check();
  EXPECT_FALSE(h.healthy);
  EXPECT_EQ(h.reason, "no job runs: qgated started read-only (the database /x/qgate.db is read-only for uid 1000)");
  EXPECT_EQ(h.checks[0].second, "ok");
}

}  // namespace
}  // namespace qgate::server
