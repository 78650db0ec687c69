// qgate-worker driven as a user or qgated would drive it: records on stdout, a clear one-line
// error and a distinct exit code for every kind of bad input, and never a crash.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <nlohmann/json.hpp>

#include "qgate/testing/gguf_test_model.h"
#include "qgate/worker/device_api.h"
#include "qgate/worker/worker_cli.h"
#include "worker_process.h"

using namespace qgate::worker;
using namespace qgate::worker::testing;
using qgate::v1::WorkerRecord;

namespace {
const std::string kBuild = " --build " + ref_library();
}

TEST(WorkerCli, ParityWritesContextCasesAndSummary) {
  auto r = run_worker("parity --backend cpu --types q4_0,q6_K --shapes none --shape 7x33x256 --shape 65x63x512 "
                      "--path both --format proto" + kBuild);
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  auto records = parse_records(r.out);
  ASSERT_EQ(records.size(), 1u + 1u + 8u + 1u);
  ASSERT_TRUE(records.front().has_context());
  ASSERT_TRUE(records[1].has_plan());
  EXPECT_EQ(records[1].plan().cases(), 8);
  EXPECT_EQ(records.front().context().build().name(), "qgate-ref");
  EXPECT_EQ(records.front().context().options().at("seed"), "20260831");
  int mmq = 0, f16 = 0;
  for (size_t i = 2; i + 1 < records.size(); ++i) {
    ASSERT_TRUE(records[i].has_parity());
    const auto& c = records[i].parity();
    EXPECT_EQ(c.outcome(), qgate::v1::CASE_OUTCOME_PASSED) << c.message();
    EXPECT_LT(c.max_abs_diff(), 1e-3);
    EXPECT_GT(c.ref_max_abs(), 0.1) << "inputs must not be degenerate";
    EXPECT_NE(c.seed(), 0u);
    mmq += c.path() == qgate::v1::GEMM_PATH_MMQ;
    f16 += c.path() == qgate::v1::GEMM_PATH_F16;
  }
  EXPECT_EQ(mmq, 4);
  EXPECT_EQ(f16, 4);
  ASSERT_TRUE(records.back().has_summary());
  EXPECT_EQ(records.back().summary().passed(), 8);
}

TEST(WorkerCli, ACpuFakeDeviceReportsItsOrdinalNameAndUuid) {
  auto plain = run_worker("describe --backend cpu --format proto" + kBuild);
  ASSERT_EQ(plain.exit_code, kExitOk) << plain.err;
  const auto before = parse_records(plain.out).front().context();
  EXPECT_EQ(before.device_ordinal(), 0);
  EXPECT_EQ(before.device_name(), "cpu");
  EXPECT_EQ(before.device_uuid(), "");
  auto fake = run_worker("describe --backend cpu --device 1 --cpu-device-name cpu-b --cpu-device-uuid CPU-fake-1 "
                         "--format proto" + kBuild);
  ASSERT_EQ(fake.exit_code, kExitOk) << fake.err;
  const auto context = parse_records(fake.out).front().context();
  EXPECT_EQ(context.device_ordinal(), 1);
  EXPECT_EQ(context.device_name(), "cpu-b");
  EXPECT_EQ(context.device_uuid(), "CPU-fake-1");
  EXPECT_NE(run_worker("describe --backend cpu --cpu-slowdown 0.5 --format proto" + kBuild).exit_code, kExitOk);
}

// Compared with the call's own duration, measured inside it: a loaded machine may stretch the
// work itself, but the device must still report three times whatever the work took.
TEST(CpuDevice, ASlowdownMakesEveryTimedCallTakeThatManyTimesAsLong) {
  auto normal = make_cpu_device_api(1);
  auto slow = make_cpu_device_api(1, {0, "cpu", "", 3.0});
  double work_us = 0;
  auto work = [&work_us] {
    const auto t0 = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    work_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  };
  const double t1 = normal->time_us(work);
  EXPECT_GE(t1, work_us);
  EXPECT_LT(t1, 3.0 * work_us) << "no slowdown without one";
  const double t3 = slow->time_us(work);
  EXPECT_GE(t3, 3.0 * work_us);
}

TEST(WorkerCli, EdgeRowsRunPerTypeAndScaleTheirBound) {
  auto r = run_worker("parity --backend cpu --types q4_0,q5_K --shapes none --edge-cases --path mmq --format proto" +
                      kBuild);
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  auto records = parse_records(r.out);
  ASSERT_EQ(records.size(), 1u + 1u + 10u + 1u);
  std::vector<qgate::v1::ActivationKind> kinds;
  for (size_t i = 2; i + 1 < records.size(); ++i) {
    const auto& c = records[i].parity();
    EXPECT_EQ(c.outcome(), qgate::v1::CASE_OUTCOME_PASSED) << c.type() << " " << c.activation() << ": " << c.message();
    EXPECT_LE(c.worst_tolerance_fraction(), 1.0);
    EXPECT_EQ(c.exact_nmse_limit(), 0.0) << "edge rows report NMSE against the exact product, ungated";
    kinds.push_back(c.activation());
    if (c.activation() == qgate::v1::ACTIVATION_KIND_OUTLIER) {
      EXPECT_GT(c.ref_max_abs(), 1e3) << "a 1e4 outlier makes |y| large";
      EXPECT_GT(c.tolerance(), 10 * c.atol()) << "the bound grows with sum|terms|";
    }
    if (c.activation() == qgate::v1::ACTIVATION_KIND_ZERO) EXPECT_EQ(c.max_abs_diff(), 0.0);
  }
  const std::vector<qgate::v1::ActivationKind> expected = {
      qgate::v1::ACTIVATION_KIND_ZERO, qgate::v1::ACTIVATION_KIND_OUTLIER, qgate::v1::ACTIVATION_KIND_TINY,
      qgate::v1::ACTIVATION_KIND_TIES, qgate::v1::ACTIVATION_KIND_LARGE};
  EXPECT_EQ(std::vector(kinds.begin(), kinds.begin() + 5), expected);
}

TEST(WorkerCli, NumericsComeFromTheBuildUnlessAsked) {
  auto r = run_worker("parity --backend cpu --types q4_1 --shapes none --shape 4x32x256 --path mmq --format proto" +
                      kBuild);
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  auto records = parse_records(r.out);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0].context().build().numerics(), "qgate");
  EXPECT_EQ(records[1].plan().numerics(), qgate::v1::NUMERICS_PROFILE_QGATE);
  EXPECT_EQ(records[1].plan().numerics_source(), "declared by the build");
  EXPECT_EQ(records[2].parity().numerics(), qgate::v1::NUMERICS_PROFILE_QGATE);
  EXPECT_EQ(records[2].parity().reference(), "qgate/mmq") << "the route the reference took";
}

TEST(WorkerCli, QgatesOwnMmqJudgedInGgmlNumericsFailsOnItsBoundButNotOnTheExactProduct) {
  // qgate's activation sums (d * sum(q)) are not ggml's (sum of x): the ggml profile must tell.
  auto r = run_worker("parity --backend cpu --types q4_1 --shapes none --shape 4x32x256 --path mmq --numerics ggml "
                      "--format proto" + kBuild);
  EXPECT_EQ(r.exit_code, kExitCaseFailed) << r.err;
  auto records = parse_records(r.out);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[1].plan().numerics_source(), "requested");
  const auto& c = records[2].parity();
  EXPECT_EQ(c.outcome(), qgate::v1::CASE_OUTCOME_INCORRECT);
  EXPECT_EQ(c.numerics(), qgate::v1::NUMERICS_PROFILE_GGML);
  EXPECT_GT(c.worst_tolerance_fraction(), 1.0);
  EXPECT_LT(c.exact_nmse(), c.exact_nmse_limit()) << "the maths is right; only the profile is wrong";
  EXPECT_NE(c.message().find("ggml numerics"), std::string::npos) << c.message();
}

TEST(WorkerCli, ParityRunsOnTheBlocksOfAModelFile) {
  namespace t = qgate::profiles::testing;
  const std::string path = ::testing::TempDir() + "/model.gguf";
  const auto tensors = t::llama_test_tensors();
  const t::GgufTestFile file = t::make_test_gguf(tensors);
  std::string error;
  ASSERT_TRUE(t::write_file(path, file.bytes, &error)) << error;
  auto r = run_worker("parity --backend cpu --gguf " + path + " --tensors 'blk.0.*' --path both --format proto" + kBuild);
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  auto records = parse_records(r.out);
  // blk.0 gates 7 matrices (q4_K, q8_0, q5_1, q4_0, q5_K, q5_0, q6_K); its two norms are skipped.
  ASSERT_EQ(records.size(), 1u + 1u + 14u + 1u) << r.err;
  std::set<std::string> types;
  for (size_t i = 2; i + 1 < records.size(); ++i) {
    const auto& c = records[i].parity();
    EXPECT_EQ(c.outcome(), qgate::v1::CASE_OUTCOME_PASSED) << c.weights_source() << ": " << c.message();
    EXPECT_EQ(c.weights_source().rfind("gguf:model.gguf:blk.0.", 0), 0u) << c.weights_source();
    EXPECT_EQ(c.shape().nt(), 64);
    EXPECT_LT(c.exact_nmse(), c.exact_nmse_limit());
    types.insert(c.type());
  }
  EXPECT_EQ(types.size(), 7u);
  EXPECT_NE(r.err.find("skipping blk.0.attn_norm.weight"), std::string::npos) << r.err;

  // A glob that matches nothing is a usage error that names it.
  r = run_worker("parity --backend cpu --gguf " + path + " --tensors 'blk.9.*' --format proto" + kBuild);
  EXPECT_EQ(r.exit_code, kExitUsage);
  EXPECT_NE(r.err.find("blk.9.*"), std::string::npos) << r.err;
  records = parse_records(r.out);
  ASSERT_FALSE(records.empty());
  ASSERT_TRUE(records.back().has_error());
  EXPECT_EQ(records.back().error().kind(), qgate::v1::WORKER_ERROR_KIND_MODEL_FILE);
}

TEST(WorkerCli, PathFollowsMinferMmq) {
  auto r = run_worker("parity --backend cpu --types q8_0 --shapes none --shape 3x5x64 --format proto" + kBuild,
                      "MINFER_MMQ=1");
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  auto records = parse_records(r.out);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[2].parity().path(), qgate::v1::GEMM_PATH_MMQ);
  EXPECT_EQ(records[0].context().options().at("MINFER_MMQ"), "1");
  r = run_worker("parity --backend cpu --types q8_0 --shapes none --shape 3x5x64 --format proto" + kBuild);
  EXPECT_EQ(parse_records(r.out)[2].parity().path(), qgate::v1::GEMM_PATH_F16);
}

TEST(WorkerCli, JsonLinesForPeople) {
  auto r = run_worker("parity --backend cpu --types q4_1 --shapes none --shape 2x3x32 --json" + kBuild);
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    auto j = nlohmann::json::parse(line);  // throws, failing the test, on a malformed line
    if (j.contains("parity")) EXPECT_EQ(j["parity"]["outcome"], "CASE_OUTCOME_PASSED");
    ++n;
  }
  EXPECT_EQ(n, 4);  // context, plan, case, summary
}

TEST(WorkerCli, UnknownTypeIsAUsageError) {
  auto r = run_worker("parity --backend cpu --types q4_0,q3_K --format proto" + kBuild);
  EXPECT_EQ(r.exit_code, kExitUsage);
  EXPECT_NE(r.err.find("unknown weight type 'q3_K'"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

TEST(WorkerCli, NonPositiveSizesAreUsageErrors) {
  for (const char* shape : {"0x64x256", "4x-64x256", "4x64x0", "4x64"}) {
    auto r = run_worker(std::string("parity --backend cpu --shapes none --shape ") + shape + kBuild);
    EXPECT_EQ(r.exit_code, kExitUsage) << shape << ": " << r.err;
    EXPECT_NE(r.err.find("shape"), std::string::npos) << r.err;
  }
}

TEST(WorkerCli, KNotAMultipleOfTheBlockIsAnInvalidProblemNotACrash) {
  auto r = run_worker("parity --backend cpu --types q4_0,q4_K --shapes none --shape 4x8x96 --path mmq --format proto" + kBuild);
  EXPECT_EQ(r.exit_code, kExitCaseFailed) << r.err;
  auto records = parse_records(r.out);
  ASSERT_EQ(records.size(), 5u);
  EXPECT_EQ(records[2].parity().outcome(), qgate::v1::CASE_OUTCOME_PASSED) << "k=96 is fine for q4_0";
  EXPECT_EQ(records[3].parity().outcome(), qgate::v1::CASE_OUTCOME_INVALID_PROBLEM);
  EXPECT_NE(records[3].parity().message().find("not a multiple"), std::string::npos);
  EXPECT_EQ(records[4].summary().failed(), 1);
}

TEST(WorkerCli, AnAllocationLargerThanTheDeviceIsRefusedCleanly) {
  // 10^6 x 10^6 q8_0 weights: about 1 TB, more than any host or GPU here.
  auto r = run_worker("parity --backend cpu --types q8_0 --shapes none --shape 1x1000000x1000000 --format proto" + kBuild);
  EXPECT_EQ(r.exit_code, kExitCaseFailed) << r.err;
  auto records = parse_records(r.out);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[2].parity().outcome(), qgate::v1::CASE_OUTCOME_ERROR);
  EXPECT_NE(records[2].parity().message().find("OUT_OF_MEMORY"), std::string::npos) << records[2].parity().message();
}

TEST(WorkerCli, ABuildThatIsNotElfIsRefused) {
  const std::string path = ::testing::TempDir() + "/fake_build.so";
  std::ofstream(path) << "not a library";
  auto r = run_worker("parity --backend cpu --format proto --build " + path);
  EXPECT_EQ(r.exit_code, kExitBuild);
  EXPECT_NE(r.err.find("not a shared object"), std::string::npos) << r.err;
  auto records = parse_records(r.out);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].error().kind(), qgate::v1::WORKER_ERROR_KIND_NOT_ELF);
  // People reading the table see the kind by name.
  r = run_worker("parity --backend cpu --format table --build " + path);
  EXPECT_NE(r.out.find("error (not_elf): "), std::string::npos) << r.out;
}

TEST(WorkerCli, AMissingBuildIsNotFound) {
  auto r = run_worker("parity --backend cpu --format proto --build /nonexistent/libnothing.so");
  EXPECT_EQ(r.exit_code, kExitBuild);
  auto records = parse_records(r.out);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].error().kind(), qgate::v1::WORKER_ERROR_KIND_NOT_FOUND);
}

TEST(WorkerCli, AnAbiMismatchIsRefused) {
  auto r = run_worker(std::string("parity --backend cpu --format proto --build ") + QGATE_WRONG_ABI_LIBRARY);
  EXPECT_EQ(r.exit_code, kExitBuild);
  EXPECT_NE(r.err.find("ABI version 999"), std::string::npos) << r.err;
  auto records = parse_records(r.out);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].error().kind(), qgate::v1::WORKER_ERROR_KIND_ABI_MISMATCH);
}

TEST(WorkerCli, CudaWithoutADeviceIsADeviceError) {
  if (qgate::worker::cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  auto r = run_worker("parity --backend cuda --types q4_0 --shapes none --shape 1x32x32 --format proto" + kBuild);
  EXPECT_EQ(r.exit_code, kExitDevice);
  EXPECT_FALSE(r.err.empty());
  auto records = parse_records(r.out);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].error().kind(), qgate::v1::WORKER_ERROR_KIND_DEVICE);
}

TEST(WorkerCli, ParitySummaryCarriesMemoryBeforeAndAfter) {
  auto r = run_worker("parity --backend cpu --types q4_0 --shapes none --shape 4x64x256 --format proto" + kBuild);
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  auto records = parse_records(r.out);
  ASSERT_TRUE(records.back().has_summary());
  const auto& s = records.back().summary();
  ASSERT_TRUE(s.has_memory_before());
  ASSERT_TRUE(s.has_memory_after());
  EXPECT_GT(s.memory_before().host_rss_bytes(), 0);
  EXPECT_GT(s.memory_before().host_anon_bytes(), 0);
  EXPECT_GT(s.memory_after().host_rss_bytes(), 0);
  EXPECT_EQ(s.memory_before().device_source(), "") << "the CPU backend has no device memory";
  EXPECT_EQ(s.memory_after().device_bytes(), 0);
}

namespace {

qgate::v1::WorkerRequest prepare_request() {
  qgate::v1::WorkerRequest req;
  auto* p = req.mutable_prepare();
  p->set_tokens(8);
  p->set_seed(7);
  p->mutable_profile()->set_name("two-gemms");
  auto* g = p->mutable_profile()->add_gemms();
  g->set_type("q4_0");
  g->set_od(64);
  g->set_k(256);
  g->set_count(2);
  g = p->mutable_profile()->add_gemms();
  g->set_type("q8_0");
  g->set_od(32);
  g->set_k(128);
  g->set_count(1);
  return req;
}

qgate::v1::WorkerRequest run_request(int64_t id) {
  qgate::v1::WorkerRequest req;
  req.mutable_run()->set_run_id(id);
  req.mutable_run()->set_repetitions(2);
  return req;
}

qgate::v1::WorkerRequest shutdown_request() {
  qgate::v1::WorkerRequest req;
  req.set_shutdown(true);
  return req;
}

}  // namespace

TEST(WorkerServe, AnswersEveryRequestWithMemoryAndShutdownWithReleaseDone) {
  auto r = run_worker_with_input("serve --backend cpu --threads 1" + kBuild,
                                 serialize_requests({prepare_request(), run_request(1), run_request(2), shutdown_request()}));
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  auto records = parse_records(r.out);
  ASSERT_EQ(records.size(), 5u) << "context, prepared, two runs, released";
  ASSERT_TRUE(records[0].has_context());
  ASSERT_TRUE(records[1].has_prepared());
  const auto& prepared = records[1].prepared();
  EXPECT_EQ(prepared.outcome(), qgate::v1::CASE_OUTCOME_PASSED) << prepared.message();
  EXPECT_GT(prepared.memory_before().host_rss_bytes(), 0);
  EXPECT_GT(prepared.memory_after().host_rss_bytes(), 0);
  EXPECT_EQ(prepared.memory_before().device_source(), "");
  EXPECT_FALSE(prepared.has_cuda());
  for (int i : {2, 3}) {
    ASSERT_TRUE(records[i].has_profile_run());
    EXPECT_EQ(records[i].profile_run().outcome(), qgate::v1::CASE_OUTCOME_PASSED) << records[i].profile_run().message();
    EXPECT_EQ(records[i].profile_run().run_id(), i - 1);
    EXPECT_GT(records[i].profile_run().memory().host_anon_bytes(), 0);
  }
  ASSERT_TRUE(records[4].has_released()) << records[4].DebugString();
  EXPECT_EQ(records[4].released().released_gemms(), 2);
  EXPECT_GT(records[4].released().memory().host_rss_bytes(), 0);
}

// qgated ends a worker by killing its process group. The scratch folder's janitor must not die with
// it: it lives in its own session and removes the folder once the worker is gone.
TEST(WorkerScratch, AWorkerKilledWithItsProcessGroupLeavesNoScratchFolder) {
  char tmp_pattern[] = "/tmp/qgate-scratch-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmp_pattern), nullptr);
  const std::filesystem::path tmpdir = tmp_pattern;
  auto entries = [&] {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(tmpdir)) names.push_back(e.path().filename());
    return names;
  };
  int input[2];
  ASSERT_EQ(pipe(input), 0);
  const std::string worker = worker_binary(), build = ref_library();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setpgid(0, 0);
    dup2(input[0], 0);
    close(input[1]);
    setenv("TMPDIR", tmpdir.c_str(), 1);
    execl(worker.c_str(), worker.c_str(), "serve", "--backend", "cpu", "--build", build.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(input[0]);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (entries().empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(entries().size(), 1u) << "the worker made no scratch folder under TMPDIR";
  EXPECT_EQ(entries()[0].rfind("qgate-worker-", 0), 0u) << entries()[0];
  // The janitor goes by a name of its own, so that once it outlives the worker nobody (an operator,
  // qgated's reaper, a test looking for the worker) takes it for one.
  auto child_names = [&] {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      std::ifstream stat(entry.path() / "stat");
      std::string text;
      if (!std::getline(stat, text)) continue;
      const size_t open = text.find('('), close = text.rfind(')');
      long ppid = 0;
      char state = 0;
      if (open == std::string::npos || close == std::string::npos ||
          std::sscanf(text.c_str() + close + 1, " %c %ld", &state, &ppid) != 2 || ppid != pid)
        continue;
      names.push_back(text.substr(open + 1, close - open - 1));
    }
    return names;
  };
  std::vector<std::string> children = child_names();
  for (int i = 0; i < 100 && std::find(children.begin(), children.end(), "qgate-janitor") == children.end(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    children = child_names();
  }
  EXPECT_NE(std::find(children.begin(), children.end(), "qgate-janitor"), children.end());
  EXPECT_EQ(std::count(children.begin(), children.end(), "qgate-worker"), 0) << "a child that looks like a worker";
  ASSERT_EQ(kill(-pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  close(input[1]);
  const auto gone_by = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!entries().empty() && std::chrono::steady_clock::now() < gone_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(entries().empty()) << "left behind: " << entries()[0];
  std::filesystem::remove_all(tmpdir);
}

TEST(WorkerServe, ShutdownBeforeAnyPrepareReleasesNothing) {
  auto r = run_worker_with_input("serve --backend cpu" + kBuild, serialize_requests({shutdown_request()}));
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  auto records = parse_records(r.out);
  ASSERT_EQ(records.size(), 2u);
  ASSERT_TRUE(records[1].has_released());
  EXPECT_EQ(records[1].released().released_gemms(), 0);
}

TEST(WorkerServe, AMalformedRequestIsAnInvalidRequestError) {
  // The serve judge reads qgated's requests: it answers the malformed one and ends the worker's
  // input, and the worker ends as it does at the end of its input.
  auto r = run_worker_with_input("serve --backend cpu" + kBuild, std::string("\x05\xff\xff\xff\xff\xff", 6));
  EXPECT_EQ(r.exit_code, kExitOk) << r.err;
  auto records = parse_records(r.out);
  ASSERT_EQ(records.size(), 2u);  // the context and the error, in either order
  const auto& error = records[0].has_error() ? records[0] : records[1];
  ASSERT_TRUE(error.has_error());
  EXPECT_EQ(error.error().kind(), qgate::v1::WORKER_ERROR_KIND_INVALID_REQUEST);
  // An empty request (no oneof set) is answered, and the worker goes on.
  r = run_worker_with_input("serve --backend cpu" + kBuild,
                            serialize_requests({qgate::v1::WorkerRequest(), shutdown_request()}));
  EXPECT_EQ(r.exit_code, kExitOk) << r.err;
  records = parse_records(r.out);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[1].error().kind(), qgate::v1::WORKER_ERROR_KIND_INVALID_REQUEST);
  EXPECT_TRUE(records[2].has_released());
}

TEST(WorkerCli, VersionNamesTheCommitAndTheRecordSchema) {
  auto r = run_worker("--version");
  EXPECT_EQ(r.exit_code, kExitOk) << r.err;
  EXPECT_EQ(r.out.rfind("qgate-worker ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("), worker record schema 1"), std::string::npos) << r.out;
}

TEST(WorkerCli, InfoDescribesTheBuild) {
  auto r = run_worker("info --json" + kBuild);
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["name"], "qgate-ref");
  EXPECT_EQ(j["sha256"].get<std::string>().size(), 64u);
}

TEST(WorkerCli, BenchTimesBackToBackCallsPerCall) {
  const std::string json_path = ::testing::TempDir() + "/bench-b2b.json";
  auto r = run_worker("bench --backend cpu --types q4_0 --nt 4 --odk 64x256 --warmup 0 --reps 3 --warm-l2 "
                      "--back-to-back 5 --json-out " + json_path + kBuild);
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("each sample 5 calls back to back"), std::string::npos) << r.out;
  std::ifstream in(json_path);
  auto doc = nlohmann::json::parse(in);
  ASSERT_EQ(doc["timings"].size(), 2u);
  for (const auto& t : doc["timings"]) {
    EXPECT_EQ(t["outcome"], "CASE_OUTCOME_PASSED");
    EXPECT_EQ(t["calls_per_sample"], 5);
    EXPECT_EQ(t["samples_us"].size(), 3u);
  }
  EXPECT_EQ(doc["context"]["options"]["calls_per_sample"], "5");
}

TEST(WorkerCli, BenchRefusesBackToBackCallsWithACleanL2OrNone) {
  const std::string json_path = ::testing::TempDir() + "/bench-refused.json";
  std::remove(json_path.c_str());
  auto cold = run_worker("bench --backend cpu --types q4_0 --nt 4 --odk 64x256 --reps 2 --back-to-back 4 --json-out " +
                         json_path + kBuild);
  EXPECT_EQ(cold.exit_code, kExitUsage);
  EXPECT_NE(cold.err.find("needs --warm-l2"), std::string::npos) << cold.err;
  EXPECT_FALSE(std::ifstream(json_path).good()) << "a refused run writes nothing";
  auto none = run_worker("bench --backend cpu --types q4_0 --nt 4 --odk 64x256 --warm-l2 --back-to-back 0" + kBuild);
  EXPECT_EQ(none.exit_code, kExitUsage);
  EXPECT_NE(none.err.find("--back-to-back"), std::string::npos) << none.err;
}

TEST(WorkerCli, BenchPrintsATableAndWritesJson) {
  const std::string json_path = ::testing::TempDir() + "/bench.json";
  auto r = run_worker("bench --backend cpu --types q4_0 --nt 4,8 --odk 64x256 --warmup 1 --reps 3 --json-out " +
                      json_path + kBuild);
  ASSERT_EQ(r.exit_code, kExitOk) << r.err;
  EXPECT_NE(r.out.find("mmq/f16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("64x256"), std::string::npos) << r.out;
  std::ifstream in(json_path);
  auto doc = nlohmann::json::parse(in);
  ASSERT_EQ(doc["timings"].size(), 4u);  // 2 token counts x 2 paths
  for (const auto& t : doc["timings"]) {
    EXPECT_EQ(t["outcome"], "CASE_OUTCOME_PASSED");
    EXPECT_EQ(t["samples_us"].size(), 3u);
    EXPECT_GT(t["median_us"].get<double>(), 0.0);
  }
  EXPECT_EQ(doc["context"]["build"]["name"], "qgate-ref");
}
