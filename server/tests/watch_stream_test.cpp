// WatchJob streams under a job that publishes events as fast as it can, in-process: watchers start,
// read a few events and cancel, or read to the end, while the event hub pushes into them from another
// thread. It is the shape of `qgate submit --wait` right after a submit (the stream is created while
// the job already publishes progress), which once crashed qgated: an event published before gRPC
// bound the reactor moved the message StartWrite was holding. Run under ASan this finds such
// lifetime errors; without it, every event must still arrive intact and in order.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "qgate/server/harness_service.h"
#include "scheduler_parts.h"
#include "qgate/v1/harness.grpc.pb.h"

namespace qgate::server {
namespace {


/// The service as qgated wires it, without a port and with the scheduler never started, so the
/// test's job stays queued and its events come only from the test.
struct WatchedService : testing::SchedulerParts {
  std::unique_ptr<HarnessService> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::Harness::Stub> stub;
  int64_t job_id = 0;

  explicit WatchedService(int max_streams = 256) : SchedulerParts("watch-test", max_streams) {
    service = std::make_unique<HarnessService>(*store, events, *scheduler, options, DeviceDescription{"cpu", "", 0, ""});
    grpc::ServerBuilder builder;
    builder.RegisterService(service.get());
    server = builder.BuildAndStart();
    stub = v1::Harness::NewStub(server->InProcessChannel(grpc::ChannelArguments()));
    job_id = queue_job_without_its_build("watched", 'a');
  }
  ~WatchedService() {
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    service.reset();
  }

  v1::JobEvent progress_event(int64_t sequence) const {
    v1::JobEvent e;
    e.set_job_id(job_id);
    e.set_state(v1::JOB_STATE_RUNNING);
    e.set_message("event " + std::to_string(sequence));
    e.mutable_progress()->set_phase("parity");
    return e;
  }
};

/// The sequence number of "event N", -1 for the stream's first event (the job's state as stored).
int64_t sequence_of(const v1::JobEvent& e) {
  if (e.message().rfind("event ", 0) != 0) return -1;
  return std::stoll(e.message().substr(6));
}

TEST(WatchStream, WatchersStartingWhileTheJobPublishesGetEveryEventIntact) {
  WatchedService s;
  std::atomic<bool> publishing{true};
  std::atomic<int64_t> published{0};
  std::thread publisher([&] {
    while (publishing) s.events.publish(s.progress_event(published++));
  });

  constexpr int kWatchers = 6, kStreamsEach = 60, kEventsRead = 4;
  std::atomic<int> bad{0}, streams{0};
  std::vector<std::thread> watchers;
  for (int w = 0; w < kWatchers; ++w) {
    watchers.emplace_back([&] {
      for (int i = 0; i < kStreamsEach; ++i) {
        grpc::ClientContext context;
        v1::WatchJobRequest request;
        request.set_job_id(s.job_id);
        auto reader = s.stub->WatchJob(&context, request);
        v1::JobEvent e;
        int64_t last = -2;
        for (int n = 0; n < kEventsRead && reader->Read(&e); ++n) {
          // The stored state may come after events published while the stream was set up; the
          // published ones must be this job's, well formed and in order.
          const int64_t seq = sequence_of(e);
          if (e.job_id() != s.job_id || (seq >= 0 && seq <= last) ||
              (seq >= 0 && e.progress().phase() != "parity")) {
            ADD_FAILURE() << "a garbled or reordered event: " << e.ShortDebugString() << " after " << last;
            ++bad;
            break;
          }
          if (seq >= 0) last = seq;
        }
        context.TryCancel();  // the client goes away mid-stream, with writes in flight
        reader->Finish();
        ++streams;
      }
    });
  }
  for (auto& t : watchers) t.join();

  // Watchers that stay to the end get the final event and an OK status.
  std::vector<std::thread> finishers;
  std::atomic<int> finished_ok{0};
  std::atomic<int> subscribed{0};
  for (int w = 0; w < 4; ++w) {
    finishers.emplace_back([&] {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      v1::WatchJobRequest request;
      request.set_job_id(s.job_id);
      auto reader = s.stub->WatchJob(&context, request);
      v1::JobEvent e;
      bool saw_done = false;
      if (reader->Read(&e)) ++subscribed;
      while (reader->Read(&e)) saw_done = e.state() == v1::JOB_STATE_DONE;
      if (reader->Finish().ok() && saw_done) ++finished_ok;
    });
  }
  while (subscribed < 4) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  publishing = false;
  publisher.join();
  v1::JobEvent done;
  done.set_job_id(s.job_id);
  done.set_state(v1::JOB_STATE_DONE);
  s.events.publish(done);
  for (auto& t : finishers) t.join();

  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(streams.load(), kWatchers * kStreamsEach);
  EXPECT_EQ(finished_ok.load(), 4) << "every watcher that stayed got the final event and OK";
  EXPECT_GT(published.load(), 100) << "the publisher ran alongside the watchers";
}

TEST(WatchStream, AStreamOverTheBoundIsRefusedAtOnceAndItsPlaceComesBack) {
  WatchedService s(/*max_streams=*/2);
  auto open_stream = [&](grpc::ClientContext& context) {
    v1::WatchJobRequest request;
    request.set_job_id(s.job_id);
    auto reader = s.stub->WatchJob(&context, request);
    v1::JobEvent e;
    EXPECT_TRUE(reader->Read(&e)) << "a stream within the bound gets the job's state";
    return reader;
  };
  grpc::ClientContext c1, c2;
  auto r1 = open_stream(c1);
  auto r2 = open_stream(c2);

  grpc::ClientContext c3;
  v1::WatchJobRequest request;
  request.set_job_id(s.job_id);
  const auto before = std::chrono::steady_clock::now();
  auto r3 = s.stub->WatchJob(&c3, request);
  v1::JobEvent e;
  EXPECT_FALSE(r3->Read(&e));
  const grpc::Status refused = r3->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_NE(refused.error_message().find("--max-streams"), std::string::npos) << refused.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::seconds(2)) << "refused at once";

  // Closing one stream gives its place back.
  c1.TryCancel();
  r1->Finish();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool reopened = false;
  while (!reopened && std::chrono::steady_clock::now() < deadline) {
    grpc::ClientContext c4;
    auto r4 = s.stub->WatchJob(&c4, request);
    reopened = r4->Read(&e);
    c4.TryCancel();
    r4->Finish();
    if (!reopened) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(reopened) << "the place of a closed stream is reused";
  c2.TryCancel();
  r2->Finish();
}

}  // namespace
}  // namespace qgate::server
