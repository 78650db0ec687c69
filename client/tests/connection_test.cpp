// Tests of how a failed call to qgated is worded: one line, and UNAVAILABLE says how to fix it.
#include "qgate/client/connection.h"

#include <gtest/gtest.h>

namespace qgate::client {
namespace {

constexpr std::chrono::milliseconds kTimeout{30'000};

TEST(RpcError, UnavailableSaysHowToStartTheDaemonOnOneLine) {
  const grpc::Status status(grpc::UNAVAILABLE, "failed to connect\nto all addresses");
  EXPECT_EQ(describe_rpc_error(status, "unix:///tmp/q.sock", kTimeout),
            "cannot reach qgated at unix:///tmp/q.sock: failed to connect to all addresses (is it "
            "running? start it with qgated)");
}

TEST(RpcError, UserFacingCodesShowTheServerMessageAsItComes) {
  EXPECT_EQ(describe_rpc_error({grpc::NOT_FOUND, "no job 99"}, "a", kTimeout), "no job 99");
  EXPECT_EQ(describe_rpc_error({grpc::INVALID_ARGUMENT, "unknown profile 'x'"}, "a", kTimeout),
            "unknown profile 'x'");
  EXPECT_EQ(describe_rpc_error({grpc::RESOURCE_EXHAUSTED, "queue full (64 jobs)"}, "a", kTimeout),
            "queue full (64 jobs)");
  EXPECT_EQ(describe_rpc_error({grpc::NOT_FOUND, ""}, "a", kTimeout), "NOT_FOUND");
}

TEST(RpcError, DeadlineNamesTheTimeoutOption) {
  EXPECT_EQ(describe_rpc_error({grpc::DEADLINE_EXCEEDED, "x"}, "h:1", std::chrono::milliseconds(2500)),
            "qgated at h:1 did not answer within 2.5 s (raise --timeout)");
}

TEST(RpcError, OtherCodesAreNamed) {
  EXPECT_EQ(describe_rpc_error({grpc::INTERNAL, "db locked"}, "a", kTimeout),
            "qgated call failed (INTERNAL): db locked");
}

}  // namespace
}  // namespace qgate::client
