// StoreOutage on its own: an outage is said once however many calls fail, its reason names the store
// and how it failed, the scheduler's wait doubles up to its cap, and the store answering again is said
// once too (docs/fleet.md, "When the database is unreachable").
#include "qgate/server/store_outage.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "qgate/db/store_error.h"

namespace {

using qgate::server::StoreOutage;
using namespace std::chrono_literals;

int count_in(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

class StoreOutageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = spdlog::default_logger();
    auto logger = std::make_shared<spdlog::logger>("qgated", std::make_shared<spdlog::sinks::ostream_sink_mt>(log_));
    logger->set_level(spdlog::level::info);
    spdlog::set_default_logger(logger);
  }
  void TearDown() override { spdlog::set_default_logger(previous_); }

  std::ostringstream log_;
  std::shared_ptr<spdlog::logger> previous_;
};

TEST_F(StoreOutageTest, AnOutageIsSaidOnceAndItsEndOnce) {
  StoreOutage outage("postgresql");
  EXPECT_TRUE(outage.reachable());
  EXPECT_EQ(outage.reason(), "");
  EXPECT_EQ(outage.retry_delay(), 0ms);
  const qgate::db::StoreError lost(qgate::db::StoreErrorKind::CannotOpen, "cannot connect: no such socket");
  for (int i = 0; i < 20; ++i) outage.failed(lost);
  EXPECT_FALSE(outage.reachable());
  EXPECT_EQ(count_in(log_.str(), "the store postgresql is unreachable (cannot connect: no such socket): not claiming "
                                 "jobs until it answers"),
            1)
      << log_.str();
  EXPECT_NE(outage.reason().find("the store postgresql is unreachable (cannot connect: no such socket)"),
            std::string::npos)
      << outage.reason();
  outage.answered();
  outage.answered();
  EXPECT_TRUE(outage.reachable());
  EXPECT_EQ(outage.reason(), "");
  EXPECT_EQ(count_in(log_.str(), "the store postgresql answers again"), 1) << log_.str();
  EXPECT_NE(log_.str().find("claiming jobs"), std::string::npos) << log_.str();

  // A second outage is said again, once; a failure that is not a lost connection "fails".
  outage.failed(std::runtime_error("disk I/O error"));
  outage.failed(std::runtime_error("disk I/O error"));
  EXPECT_EQ(count_in(log_.str(), "the store postgresql fails (disk I/O error)"), 1) << log_.str();
}

TEST_F(StoreOutageTest, TheWaitBetweenClaimsDoublesUpToItsCap) {
  StoreOutage outage("qgate.db");
  const std::runtime_error error("down");
  outage.failed(error);
  EXPECT_EQ(outage.retry_delay(), 250ms);
  outage.failed(error);
  EXPECT_EQ(outage.retry_delay(), 500ms);
  outage.failed(error);
  EXPECT_EQ(outage.retry_delay(), 1000ms);
  for (int i = 0; i < 50; ++i) outage.failed(error);
  EXPECT_EQ(outage.retry_delay(), StoreOutage::kMaxRetryDelay);
  outage.answered();
  EXPECT_EQ(outage.retry_delay(), 0ms);
}

}  // namespace
