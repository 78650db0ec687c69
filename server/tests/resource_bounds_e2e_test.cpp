// qgated's resource bounds, each met head on against a real daemon: the upload size
// (--max-upload-bytes), the queue (--max-queued-jobs), concurrent uploads (--max-uploads) and
// concurrent WatchJob streams (--max-streams). A request over a bound gets RESOURCE_EXHAUSTED at
// once, with a message naming the bound, and the daemon goes on serving everyone else.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <spawn.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "daemon_under_test.h"

using namespace std::chrono_literals;
using namespace qgate::testing;

namespace {

qgate::v1::SubmitHeader parity_header(int64_t size_bytes, bool wait_for_quiet = false) {
  qgate::v1::SubmitHeader header;
  header.mutable_build()->set_name("bounds");
  header.mutable_job()->set_kind(qgate::v1::JOB_KIND_PARITY);
  header.mutable_job()->set_wait_for_quiet(wait_for_quiet);
  header.set_size_bytes(size_bytes);
  return header;
}

/// Uploads `bytes` as one build through the stub; the status SubmitBuild ends with.
grpc::Status upload(qgate::v1::Harness::Stub& stub, const std::string& bytes, int64_t declared_size,
                    bool wait_for_quiet = false) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 30s);
  qgate::v1::SubmitBuildResponse response;
  auto writer = stub.SubmitBuild(&context, &response);
  qgate::v1::SubmitBuildRequest request;
  *request.mutable_header() = parity_header(declared_size, wait_for_quiet);
  writer->Write(request);
  for (size_t at = 0; at < bytes.size(); at += 64 << 10) {
    request.set_chunk(bytes.substr(at, 64 << 10));
    if (!writer->Write(request)) break;
  }
  writer->WritesDone();
  return writer->Finish();
}

std::string library_bytes() { return slurp(QGATE_REF_LIBRARY); }

template <typename Fn>
std::chrono::milliseconds timed(Fn&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
}

}  // namespace

TEST(ResourceBounds, AnUploadOverMaxUploadBytesIsRefused) {
  DaemonUnderTest d;
  std::string why;
  ASSERT_TRUE(d.try_start({"--max-upload-bytes", "4096"}, "", &why)) << why;
  auto stub = d.stub();
  const std::string bytes = library_bytes();
  ASSERT_GT(bytes.size(), 4096u);

  // Declared honestly: refused from the header, before any byte is stored.
  grpc::Status s = upload(*stub, bytes, int64_t(bytes.size()));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("the limit is 4096"), std::string::npos) << s.error_message();
  // Declared small, sent large: refused when the bytes pass the limit.
  s = upload(*stub, bytes, 100);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("limit of 4096"), std::string::npos) << s.error_message();

  // The CLI shows the reason, and nothing was queued.
  auto r = d.cli("submit --build " + std::string(QGATE_REF_LIBRARY) + " --name bounds --kind parity");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("the limit is 4096"), std::string::npos) << r.err;
  auto jobs = d.cli("--json jobs");
  ASSERT_EQ(jobs.code, 0) << jobs.err;
  const json list = json_data(jobs, "jobs");
  EXPECT_EQ((list.is_array() ? list : list["jobs"]).size(), 0u) << jobs.out;
}

TEST(ResourceBounds, ASubmitOverMaxQueuedJobsIsRefusedAndTheQueueIsIntact) {
  DaemonUnderTest d;
  std::string why;
  ASSERT_TRUE(d.try_start({"--max-queued-jobs", "2"}, "", &why)) << why;
  auto stub = d.stub();
  const std::string bytes = library_bytes();
  // One job runs, two wait; the next is one too many. A job may leave the queue while the uploads
  // go on (it starts, or on a loaded machine ends early), so what is checked is the queue itself:
  // whatever was accepted is in the store, and never more than two jobs wait.
  int accepted = 0;
  grpc::Status refused;
  for (int i = 0; i < 8 && refused.ok(); ++i) {
    grpc::Status s = upload(*stub, bytes, int64_t(bytes.size()));
    if (s.ok()) ++accepted;
    else refused = s;
  }
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("the queue is full (2 jobs)"), std::string::npos) << refused.error_message();
  EXPECT_GE(accepted, 2);

  grpc::ClientContext all_context;
  qgate::v1::ListJobsResponse all;
  ASSERT_TRUE(stub->ListJobs(&all_context, qgate::v1::ListJobsRequest{}, &all).ok());
  EXPECT_EQ(all.jobs_size(), accepted) << "every accepted job is stored, and no refused one";
  int running = 0;
  for (const auto& job : all.jobs()) running += job.state() == qgate::v1::JOB_STATE_RUNNING;
  EXPECT_LE(running, 1) << "one device runs one job";

  grpc::ClientContext context;
  qgate::v1::ListJobsRequest request;
  request.set_state(qgate::v1::JOB_STATE_QUEUED);
  qgate::v1::ListJobsResponse queued;
  ASSERT_TRUE(stub->ListJobs(&context, request, &queued).ok());
  EXPECT_LE(queued.jobs_size(), 2);
  EXPECT_GE(queued.jobs_size(), 1) << "the refusal came from a full queue";
  for (const auto& job : queued.jobs()) d.cli("cancel " + std::to_string(job.id()));
  // Room again: a submit is accepted.
  EXPECT_TRUE(upload(*stub, bytes, int64_t(bytes.size())).ok());
}

TEST(ResourceBounds, AnUploadOverMaxUploadsIsRefusedAtOnce) {
  DaemonUnderTest d;
  std::string why;
  ASSERT_TRUE(d.try_start({"--max-uploads", "1"}, "", &why)) << why;
  auto stub = d.stub();
  const std::string bytes = library_bytes();

  // One upload in progress: its header and first chunk sent, the stream held open. On a loaded
  // machine its call can reach the server after the second upload has begun, and then the first is
  // the one refused; so the scenario is set up again until the held stream holds the place.
  std::unique_ptr<grpc::ClientContext> slow_context;
  qgate::v1::SubmitBuildResponse slow_response;
  std::unique_ptr<grpc::ClientWriter<qgate::v1::SubmitBuildRequest>> slow;
  qgate::v1::SubmitBuildRequest request;
  grpc::Status second;
  std::chrono::milliseconds took{0};
  for (int attempt = 0; attempt < 10; ++attempt) {
    slow_context = std::make_unique<grpc::ClientContext>();
    slow = stub->SubmitBuild(slow_context.get(), &slow_response);
    request.Clear();
    *request.mutable_header() = parity_header(int64_t(bytes.size()));
    ASSERT_TRUE(slow->Write(request));
    request.set_chunk(bytes.substr(0, 1024));
    ASSERT_TRUE(slow->Write(request));
    std::this_thread::sleep_for(200ms * (attempt + 1));  // time for the call to reach the server
    took = timed([&] { second = upload(*stub, bytes, int64_t(bytes.size())); });
    if (second.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) break;
    slow_context->TryCancel();  // the held stream did not hold the place: set it up again
    slow->Finish();
  }
  EXPECT_EQ(second.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << second.error_message();
  EXPECT_NE(second.error_message().find("--max-uploads"), std::string::npos) << second.error_message();
  EXPECT_LT(took, 2000ms) << "refused at once, not served slowly";

  // The held upload still completes, and then its place is free again.
  request.set_chunk(bytes.substr(1024));
  ASSERT_TRUE(slow->Write(request));
  slow->WritesDone();
  grpc::Status first = slow->Finish();
  EXPECT_TRUE(first.ok()) << first.error_message();
  EXPECT_GT(slow_response.job_id(), 0);
  grpc::Status third = upload(*stub, bytes, int64_t(bytes.size()));
  EXPECT_TRUE(third.ok()) << third.error_message();
  d.cli("cancel " + std::to_string(slow_response.job_id()));
}

TEST(ResourceBounds, AWatchOverMaxStreamsIsRefusedAtOnceAndReadsGoOn) {
  DaemonUnderTest d;
  std::string why;
  ASSERT_TRUE(d.try_start({"--max-streams", "2"}, "", &why)) << why;
  auto stub = d.stub();
  const int64_t job = submit_no_wait(d, "--name ref --kind parity");

  // Two CLI watchers hold both places (the parity sweep takes a minute or more). posix_spawn, not
  // fork: this process already runs gRPC's threads.
  const std::string server = "unix://" + d.dir() + "/qgated.sock", job_text = std::to_string(job);
  auto start_watcher = [&](const std::string& output) {
    std::vector<std::string> args = {QGATE_CLI_BINARY, "--server", server, "watch", job_text};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid = -1;
    EXPECT_EQ(posix_spawn(&pid, QGATE_CLI_BINARY, &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    return pid;
  };
  // One at a time, each seen streaming (its first line out) before the next starts.
  auto start_streaming_watcher = [&](const std::string& output) {
    const pid_t pid = start_watcher(output);
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (slurp(output).find("job " + job_text) == std::string::npos && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(20ms);
    EXPECT_NE(slurp(output).find("job " + job_text), std::string::npos) << slurp(output);
    return pid;
  };
  const pid_t w1 = start_streaming_watcher(d.dir() + "/watch1.out");
  const pid_t w2 = start_streaming_watcher(d.dir() + "/watch2.out");

  // A third stream is refused at once.
  grpc::Status third;
  const auto took = timed([&] {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 2s);
    qgate::v1::WatchJobRequest request;
    request.set_job_id(job);
    auto reader = stub->WatchJob(&context, request);
    qgate::v1::JobEvent e;
    while (reader->Read(&e)) {
    }
    third = reader->Finish();
  });
  EXPECT_EQ(third.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << third.error_message();
  EXPECT_NE(third.error_message().find("--max-streams"), std::string::npos) << third.error_message();
  EXPECT_LT(took, 1000ms) << "refused at once, not after the deadline";

  // The CLI says why; unary reads are not streams and go on.
  auto r = d.cli("watch " + std::to_string(job));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.err.find("--max-streams"), std::string::npos) << r.err;
  EXPECT_EQ(d.cli("--json jobs").code, 0);

  // A watcher that goes away (killed mid-stream) gives its place back.
  kill(w1, SIGKILL);
  waitpid(w1, nullptr, 0);
  bool reopened = false;
  for (int attempt = 0; attempt < 100 && !reopened; ++attempt) {
    grpc::ClientContext context;
    qgate::v1::WatchJobRequest request;
    request.set_job_id(job);
    auto reader = stub->WatchJob(&context, request);
    qgate::v1::JobEvent e;
    reopened = reader->Read(&e);
    context.TryCancel();
    reader->Finish();
    if (!reopened) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(reopened) << "a killed watcher's place is reused";
  d.cli("cancel " + std::to_string(job));
  int status = 0;
  waitpid(w2, &status, 0);  // the cancel ends its watch
  EXPECT_TRUE(WIFEXITED(status)) << "the second watcher ended with the job";
}

// A job that waits for a quiet GPU, sent to a daemon that cannot see co-tenant load (the CPU
// backend has no sampler), would wait forever and hold a place in the queue: refused at the header.
TEST(ResourceBounds, AJobWaitingForQuietOnADaemonWithoutASamplerIsRefused) {
  DaemonUnderTest d;
  d.start();
  auto stub = d.stub();
  const std::string bytes = library_bytes();
  grpc::Status s = upload(*stub, bytes, int64_t(bytes.size()), /*wait_for_quiet=*/true);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("can never find a quiet window to run in"), std::string::npos)
      << s.error_message();
  const json list = json_data(d.cli("--json jobs"), "jobs");
  EXPECT_TRUE(list.empty()) << list.dump();
  // The same job without the wait is taken.
  s = upload(*stub, bytes, int64_t(bytes.size()));
  EXPECT_TRUE(s.ok()) << s.error_message();
}

// A profile that cannot fit where its two workers would prepare it is refused at the header,
// instead of a worker being OOM-killed and the build blamed. On the CPU backend the bound is the
// host's available memory: one 2^20 x 2^20 GEMM is 2 TiB as f16.
TEST(ResourceBounds, AProfileLargerThanTheMemoryItWouldRunInIsRefused) {
  DaemonUnderTest d;
  d.start();
  auto stub = d.stub();
  const std::string bytes = library_bytes();
  auto submit = [&](int64_t od, int64_t k) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 30s);
    qgate::v1::SubmitBuildResponse response;
    auto writer = stub->SubmitBuild(&context, &response);
    qgate::v1::SubmitBuildRequest request;
    auto* header = request.mutable_header();
    header->mutable_build()->set_name("bounds");
    header->set_size_bytes(int64_t(bytes.size()));
    auto* job = header->mutable_job();
    job->set_kind(qgate::v1::JOB_KIND_AB);
    job->set_tokens(8);
    auto* profile = job->mutable_custom_profile();
    profile->set_name("sized");
    auto* gemm = profile->add_gemms();
    gemm->set_type("q4_0");
    gemm->set_od(od);
    gemm->set_k(k);
    gemm->set_count(1);
    writer->Write(request);
    request.clear_header();
    request.set_chunk(bytes);
    writer->Write(request);
    writer->WritesDone();
    return writer->Finish();
  };
  grpc::Status s = submit(1 << 20, 1 << 20);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("profile 'sized' needs about 4096.1 GiB (2 worker(s), each up to 2048.1 GiB"),
            std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("more than the host's available"), std::string::npos) << s.error_message();
  const json list = json_data(d.cli("--json jobs"), "jobs");
  EXPECT_TRUE(list.empty()) << list.dump();
  // A small one is taken.
  s = submit(256, 256);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

// An upload that sends its header and then nothing holds one of the --max-uploads places; at
// --upload-timeout it is ended and the place is free for the next client.
TEST(ResourceBounds, AStalledUploadIsEndedAtItsDeadlineAndItsPlaceGivenBack) {
  DaemonUnderTest d;
  std::string why;
  ASSERT_TRUE(d.try_start({"--max-uploads", "1", "--upload-timeout", "2"}, "", &why)) << why;
  auto stub = d.stub();
  const std::string bytes = library_bytes();

  grpc::ClientContext stalled_context;
  stalled_context.set_deadline(std::chrono::system_clock::now() + 60s);
  qgate::v1::SubmitBuildResponse stalled_response;
  auto stalled = stub->SubmitBuild(&stalled_context, &stalled_response);
  qgate::v1::SubmitBuildRequest request;
  *request.mutable_header() = parity_header(int64_t(bytes.size()));
  ASSERT_TRUE(stalled->Write(request));
  request.set_chunk(bytes.substr(0, 1024));
  ASSERT_TRUE(stalled->Write(request));
  // Nothing more: the server ends the stream at its deadline.
  grpc::Status ended;
  const auto took = timed([&] { ended = stalled->Finish(); });
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << ended.error_message();
  EXPECT_NE(ended.error_message().find("did not finish within 2 s (qgated --upload-timeout)"), std::string::npos)
      << ended.error_message();
  EXPECT_LT(took, 20000ms) << "the server's deadline, not the client's 60 s";

  grpc::Status next = upload(*stub, bytes, int64_t(bytes.size()));
  EXPECT_TRUE(next.ok()) << next.error_message();
  const json list = json_data(d.cli("--json jobs"), "jobs");
  EXPECT_EQ(list.size(), 1u) << "only the finished upload is a job: " << list.dump();
}
