// Fault builds end to end: one real qgated on the CPU backend is handed every misbehaving kernel
// build in turn (kernels/test_builds/faults/fault_build.cpp, the wrong-ABI fixture, files that are no shared
// object) through the real qgate CLI. Each job must end with its disposition and detail, the daemon
// must keep serving after each, and the reference build must still pass at the end.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "daemon_under_test.h"

using namespace qgate::testing;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

constexpr int kRunTimeoutS = 3;  // the daemon's --run-timeout: how long the hang build gets

std::string disposition_of(const json& job) { return job.value("disposition", ""); }
std::string detail_of(const json& job) { return job.value("disposition_detail", ""); }

/// The daemon answers a read after the job: it is up and serving.
void expect_daemon_serving(const DaemonUnderTest& d, const std::string& after) {
  auto r = d.cli("--json device");
  EXPECT_EQ(r.code, 0) << "qgated stopped serving after " << after << ": " << r.err << "\n" << d.log();
}

/// True once `pid` is gone (or a zombie nobody has reaped yet), within `limit`.
bool process_gone(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::kill(pid, 0) != 0) return true;
    const std::string stat = slurp("/proc/" + std::to_string(pid) + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z') return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

/// The pid the hang build's forked child wrote to its marker file (0 when none).
pid_t hang_child_pid() {
  const std::string text = slurp(std::string(QGATE_FAULT_MARKER_DIR) + "/qgate_fault_hang.marker");
  return text.empty() ? 0 : pid_t(std::stol(text));
}

}  // namespace

TEST(FaultBuilds, EveryFaultEndsWithItsDispositionAndTheDaemonKeepsServing) {
  const auto started = std::chrono::steady_clock::now();
  DaemonUnderTest d;
  std::string why;
  // Without the worker sandbox: the crash_once and hang builds leave marker files beside themselves
  // in the build tree, which the sandbox keeps read-only (the hostile-builds test covers the sandbox).
  ASSERT_TRUE(d.try_start({"--run-timeout", std::to_string(kRunTimeoutS), "--worker-sandbox", "off"}, "", &why))
      << why;
  // The quick sweep (every shape but the 7B one) keeps each parity job to seconds on a small CPU.
  const std::string parity = "--kind parity --parity-shapes quick";

  {
    SCOPED_TRACE("segv_prepare");
    auto e = run_job(d, QGATE_FAULT_SEGV_PREPARE, "segv-prepare", parity);
    EXPECT_EQ(e.watch_code, 3);
    EXPECT_EQ(state_of(e.job), "JOB_STATE_FAILED") << e.job.dump();
    EXPECT_EQ(disposition_of(e.job), "DISPOSITION_CRASHED") << e.job.dump();
    EXPECT_EQ(detail_of(e.job), "SIGSEGV in gemm_prepare") << e.job.dump();
    expect_daemon_serving(d, "segv_prepare");
    // The human views carry it too.
    auto text = d.cli("show " + std::to_string(e.job["id"].get<int64_t>()));
    EXPECT_NE(text.out.find("CRASHED: SIGSEGV in gemm_prepare"), std::string::npos) << text.out;
  }
  {
    SCOPED_TRACE("illegal_address (CPU: abort)");
    auto e = run_job(d, QGATE_FAULT_ILLEGAL_ADDRESS, "illegal-address", parity);
    EXPECT_EQ(state_of(e.job), "JOB_STATE_FAILED") << e.job.dump();
    EXPECT_EQ(disposition_of(e.job), "DISPOSITION_CRASHED") << e.job.dump();
    EXPECT_EQ(detail_of(e.job), "SIGABRT in gemm_run") << e.job.dump();
    expect_daemon_serving(d, "illegal_address");
  }
  {
    SCOPED_TRACE("hang, stopped by the run timeout");
    std::filesystem::remove(std::string(QGATE_FAULT_MARKER_DIR) + "/qgate_fault_hang.marker");
    const auto t0 = std::chrono::steady_clock::now();
    auto e = run_job(d, QGATE_FAULT_HANG, "hang", parity);
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_EQ(state_of(e.job), "JOB_STATE_FAILED") << e.job.dump();
    EXPECT_EQ(disposition_of(e.job), "DISPOSITION_TIMEOUT") << e.job.dump();
    EXPECT_EQ(detail_of(e.job), "run exceeded " + std::to_string(kRunTimeoutS) + " s in gemm_run") << e.job.dump();
    EXPECT_LT(took, std::chrono::seconds(kRunTimeoutS + 15));
    // The build forked a child into the worker's process group: the group kill must take it too.
    const pid_t child = hang_child_pid();
    ASSERT_GT(child, 0) << "the hang build did not record its child";
    EXPECT_TRUE(process_gone(child, 3s)) << "the hung worker's child " << child << " outlived the kill";
    expect_daemon_serving(d, "hang");
  }
  {
    SCOPED_TRACE("hang, stopped by the job's own timeout");
    std::filesystem::remove(std::string(QGATE_FAULT_MARKER_DIR) + "/qgate_fault_hang.marker");
    auto e = run_job(d, QGATE_FAULT_HANG, "hang", parity + " --job-timeout 2");
    EXPECT_EQ(e.job["spec"].value("timeout_s", int64_t(0)), 2) << e.job.dump();
    EXPECT_EQ(disposition_of(e.job), "DISPOSITION_TIMEOUT") << e.job.dump();
    EXPECT_EQ(detail_of(e.job), "job exceeded 2 s in gemm_run") << e.job.dump();
    const pid_t child = hang_child_pid();
    ASSERT_GT(child, 0);
    EXPECT_TRUE(process_gone(child, 3s)) << "the hung worker's child " << child << " outlived the kill";
    expect_daemon_serving(d, "hang with --job-timeout");
  }
  {
    SCOPED_TRACE("nan_output");
    auto e = run_job(d, QGATE_FAULT_NAN_OUTPUT, "nan-output", parity);
    EXPECT_EQ(e.watch_code, 1) << "NaN fails parity: the verdict is FAIL";
    EXPECT_EQ(state_of(e.job), "JOB_STATE_DONE") << e.job.dump();
    EXPECT_EQ(e.job["verdict"]["verdict"], "VERDICT_FAIL");
    EXPECT_EQ(e.job["verdict"].value("parity_passed", 0), 0) << "not one case may pass with NaN output";
    EXPECT_EQ(disposition_of(e.job), "DISPOSITION_INCORRECT") << e.job.dump();
    EXPECT_NE(detail_of(e.job).find(" NaN"), std::string::npos) << detail_of(e.job);
    EXPECT_NE(detail_of(e.job).find("parity case(s) failed"), std::string::npos) << detail_of(e.job);
    expect_daemon_serving(d, "nan_output");
  }
  {
    SCOPED_TRACE("unwritten_output");
    auto e = run_job(d, QGATE_FAULT_UNWRITTEN_OUTPUT, "unwritten-output", parity);
    EXPECT_EQ(e.watch_code, 1);
    EXPECT_EQ(e.job["verdict"].value("parity_passed", 0), 0);
    EXPECT_EQ(disposition_of(e.job), "DISPOSITION_INCORRECT") << e.job.dump();
    EXPECT_NE(detail_of(e.job).find("elements unwritten"), std::string::npos) << detail_of(e.job);
    expect_daemon_serving(d, "unwritten_output");
  }
  {
    SCOPED_TRACE("leak (correct numbers, memory never freed)");
    auto e = run_job(d, QGATE_FAULT_LEAK, "leak", parity);
    EXPECT_EQ(e.watch_code, 1) << "a leak fails the gate";
    EXPECT_EQ(state_of(e.job), "JOB_STATE_DONE") << e.job.dump();
    EXPECT_EQ(disposition_of(e.job), "DISPOSITION_LEAKED") << e.job.dump();
    EXPECT_EQ(e.job["verdict"]["verdict"], "VERDICT_FAIL") << e.job.dump();
    EXPECT_NE(detail_of(e.job).find("parity sweep"), std::string::npos) << detail_of(e.job);
    // It grows again in the second cycle (16 calls of 4 MiB): a leak, not memory kept once.
    EXPECT_NE(detail_of(e.job).find("after a second cycle of 16 runs"), std::string::npos) << detail_of(e.job);
    EXPECT_FALSE(e.job["verdict"]["leaks"][0].value("kept_once", false)) << e.job.dump();
    EXPECT_GE(e.job["verdict"]["leaks"][0].value("host_bytes", int64_t(0)), int64_t(60) << 20) << e.job.dump();
    expect_daemon_serving(d, "leak");
  }
  {
    SCOPED_TRACE("crash_once: one worker death, one retry, a verdict");
    std::filesystem::remove(std::string(QGATE_FAULT_MARKER_DIR) + "/qgate_fault_crash_once.marker");
    auto e = run_job(d, QGATE_FAULT_CRASH_ONCE, "crash-once", "--kind ab --profile cpu-tiny --max-pairs 4");
    EXPECT_LE(e.watch_code, 2);
    EXPECT_EQ(state_of(e.job), "JOB_STATE_DONE") << e.job.dump();
    EXPECT_EQ(disposition_of(e.job), "DISPOSITION_OK") << e.job.dump();
    EXPECT_NE(detail_of(e.job).find("worker restarted once after SIGSEGV in gemm_run"), std::string::npos)
        << detail_of(e.job);
    std::filesystem::remove(std::string(QGATE_FAULT_MARKER_DIR) + "/qgate_fault_crash_once.marker");
    expect_daemon_serving(d, "crash_once");
  }
  {
    SCOPED_TRACE("crash_run: the retry crashes too");
    auto e = run_job(d, QGATE_FAULT_CRASH_RUN, "crash-run", "--kind ab --profile cpu-tiny --max-pairs 4");
    EXPECT_EQ(e.watch_code, 3);
    EXPECT_EQ(state_of(e.job), "JOB_STATE_FAILED") << e.job.dump();
    EXPECT_NE(e.job.value("error", "").find("failed twice"), std::string::npos) << e.job.dump();
    EXPECT_EQ(disposition_of(e.job), "DISPOSITION_CRASHED") << e.job.dump();
    EXPECT_EQ(detail_of(e.job), "SIGSEGV in gemm_run") << e.job.dump();
    expect_daemon_serving(d, "crash_run");
  }
  {
    SCOPED_TRACE("wrong ABI version");
    auto e = run_job(d, QGATE_WRONG_ABI_LIBRARY, "wrong-abi", parity);
    EXPECT_EQ(state_of(e.job), "JOB_STATE_FAILED") << e.job.dump();
    EXPECT_EQ(disposition_of(e.job), "DISPOSITION_REJECTED") << e.job.dump();
    EXPECT_EQ(detail_of(e.job).rfind("wrong ABI version: ", 0), 0u) << detail_of(e.job);
    EXPECT_NE(detail_of(e.job).find("ABI version"), std::string::npos) << detail_of(e.job);
    expect_daemon_serving(d, "the wrong-ABI build");
  }
  {
    SCOPED_TRACE("an ELF header over garbage");
    const std::string corrupt = d.dir() + "/corrupt.so";
    std::ofstream(corrupt, std::ios::binary) << "\x7f" "ELF" << std::string(4096, '\x5a');
    auto e = run_job(d, corrupt, "corrupt", parity);
    EXPECT_EQ(state_of(e.job), "JOB_STATE_FAILED") << e.job.dump();
    EXPECT_EQ(disposition_of(e.job), "DISPOSITION_REJECTED") << e.job.dump();
    EXPECT_EQ(detail_of(e.job).rfind("not an ELF shared object: ", 0), 0u) << detail_of(e.job);
    expect_daemon_serving(d, "the corrupt ELF file");
  }
  {
    SCOPED_TRACE("no ELF at all: refused at upload, no job");
    const std::string script = d.dir() + "/script.so";
    std::ofstream(script) << "#!/bin/sh\necho not a kernel\n";
    auto r = d.cli("submit --build " + script + " --name script --kind parity");
    EXPECT_EQ(r.code, 3);
    EXPECT_NE(r.err.find("not an ELF shared object"), std::string::npos) << r.err;
  }

  // Every job is listed with its disposition, in the table and in JSON.
  auto table = d.cli("jobs");
  EXPECT_NE(table.out.find("DISPOSITION"), std::string::npos) << table.out;
  for (const char* shown : {"CRASHED", "TIMEOUT", "INCORRECT", "REJECTED", "OK"})
    EXPECT_NE(table.out.find(shown), std::string::npos) << shown << " missing from\n" << table.out;
  auto listed = json_data(d.cli("--json jobs"), "jobs");
  EXPECT_EQ(listed.size(), 11u);
  for (const auto& job : listed) EXPECT_NE(disposition_of(job), "") << job.dump();

  {
    SCOPED_TRACE("the reference build after all of that");
    auto e = run_job(d, QGATE_REF_LIBRARY, "ref", parity);
    EXPECT_EQ(e.watch_code, 0);
    EXPECT_EQ(state_of(e.job), "JOB_STATE_DONE") << e.job.dump();
    EXPECT_EQ(e.job["verdict"]["verdict"], "VERDICT_PASS") << e.job.dump();
    EXPECT_EQ(e.job["verdict"].value("parity_passed", 0), 8 * (7 + 5) * 2) << e.job.dump();
    EXPECT_EQ(disposition_of(e.job), "DISPOSITION_OK") << e.job.dump();
    EXPECT_EQ(detail_of(e.job), "");
  }
  const auto took = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started);
  std::printf("fault builds: %lld s in all\n", static_cast<long long>(took.count()));
}
