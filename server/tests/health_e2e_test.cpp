// `qgate health` end to end: the real CLI against a real qgated on a unix socket (SERVING as a whole
// and for qgate.v1.Harness, an unknown service, a stopped daemon that does not answer in time, a
// daemon that is gone, a daemon with a certificate), and against a gRPC server whose standard health
// service says NOT_SERVING.
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <fstream>

#include "daemon_under_test.h"

namespace qgate::testing {
namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class HealthE2eTest : public ::testing::Test {
 protected:
  void SetUp() override { daemon_.start(); }
  DaemonUnderTest daemon_;
};

TEST_F(HealthE2eTest, AServingDaemonExitsZero) {
  CliResult r = daemon_.cli("health");
  EXPECT_EQ(r.code, 0) << r.err << daemon_.log();
  EXPECT_TRUE(contains(r.out, "SERVING")) << r.out;
  EXPECT_TRUE(r.err.empty()) << r.err;

  r = daemon_.cli("health --service qgate.v1.Harness");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "service qgate.v1.Harness")) << r.out;

  r = daemon_.cli("--json health");
  ASSERT_EQ(r.code, 0) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["health"]["status"], "SERVING") << r.out;
}

TEST_F(HealthE2eTest, AnUnknownServiceIsNotServing) {
  const CliResult r = daemon_.cli("health --service qgate.v1.NoSuchService");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "unknown service")) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST_F(HealthE2eTest, AStoppedDaemonFailsWithinTheTimeout) {
  // A hung daemon (here: stopped) must fail a probe, not hang it.
  ASSERT_EQ(::kill(daemon_.pid(), SIGSTOP), 0);
  const auto start = std::chrono::steady_clock::now();
  const CliResult r = daemon_.cli("--timeout 1 health");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::kill(daemon_.pid(), SIGCONT);
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "did not answer within 1 s")) << r.err;
  EXPECT_LT(seconds, 10.0);
  EXPECT_EQ(daemon_.cli("health").code, 0);  // and serves again once it runs
}

TEST_F(HealthE2eTest, AGoneDaemonIsUnreachable) {
  ASSERT_TRUE(daemon_.terminate(std::chrono::seconds(30)));
  const CliResult r = daemon_.cli("--timeout 2 health");
  EXPECT_EQ(r.code, 3) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "cannot reach qgated")) << r.err;
  const CliResult j = daemon_.cli("--timeout 2 --json health");
  EXPECT_EQ(j.code, 3);
  EXPECT_EQ(json::parse(j.out)["health"]["status"], "UNREACHABLE") << j.out;
}

// As the compose file and the DaemonSet run it: with a certificate (for its dashboard), qgated serves
// TLS on its socket too, so the probe passes --tls-ca; without it, the probe fails.
TEST(HealthWithTls, TheProbeVerifiesTheDaemonsCertificate) {
  DaemonUnderTest d;
  const std::string cert = d.dir() + "/cert.pem", key = d.dir() + "/key.pem", token = d.dir() + "/token";
  const std::string openssl = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
                              "-addext subjectAltName=DNS:localhost -keyout " + key + " -out " + cert +
                              " >/dev/null 2>&1";
  ASSERT_EQ(std::system(openssl.c_str()), 0) << "openssl could not make a test certificate";
  std::ofstream(token) << "health-token-0123456789abcdef";
  std::string why;
  ASSERT_TRUE(d.try_start({"--tls-cert", cert, "--tls-key", key, "--auth-token-file", token}, "", &why)) << why;
  CliResult r = d.cli("--tls-ca " + cert + " --timeout 5 health");
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(contains(r.out, "SERVING")) << r.out;
  r = d.cli("--timeout 5 health");
  EXPECT_EQ(r.code, 3) << "a plaintext probe cannot talk to a TLS daemon: " << r.out << r.err;
}

// The NOT_SERVING answer itself, from a server built the way qgated builds its own (grpc++'s default
// health service), told it is not serving; qgated says so only while it shuts down.
TEST(HealthNotServing, ANotServingAnswerExitsOne) {
  DaemonUnderTest scratch;  // only for its temp directory and CLI runner; no daemon is started
  const std::string socket = "unix://" + scratch.dir() + "/health.sock";
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(socket, grpc::InsecureServerCredentials());
  qgate::v1::Harness::Service unimplemented;  // a server needs one service of its own to start
  builder.RegisterService(&unimplemented);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_TRUE(server);
  ASSERT_NE(server->GetHealthCheckService(), nullptr);
  server->GetHealthCheckService()->SetServingStatus(false);

  CliResult r = scratch.cli_at(socket, "health");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "NOT_SERVING")) << r.err;
  r = scratch.cli_at(socket, "--json health");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(json::parse(r.out)["health"]["status"], "NOT_SERVING") << r.out;

  server->GetHealthCheckService()->SetServingStatus(true);
  EXPECT_EQ(scratch.cli_at(socket, "health").code, 0);
  server->Shutdown();
}

}  // namespace
}  // namespace qgate::testing

namespace qgate::testing {
namespace {

// A second qgated on a data dir that one already serves would take over its socket and leave the
// first serving no one: it refuses to start, naming the first one's pid, and the first serves on.
TEST(DataDirLock, ASecondDaemonOnTheSameDataDirIsRefused) {
  DaemonUnderTest first;
  first.start();
  const std::string command = std::string(QGATED_BINARY) + " --backend cpu --data-dir " + first.dir() +
                              " --listen unix://" + first.dir() + "/second.sock 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[512];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  const int status = pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0) << output;
  EXPECT_TRUE(contains(output, "another qgated (pid " + std::to_string(first.pid()) + ") serves the data dir " +
                                   first.dir()))
      << output;
  const CliResult r = first.cli("health");
  EXPECT_EQ(r.code, 0) << "the first daemon must still answer: " << r.err;
  // Once the first is gone (even by kill -9), the data dir is free again.
  first.kill9();
  first.start();
  EXPECT_EQ(first.cli("health").code, 0);
}

}  // namespace
}  // namespace qgate::testing
