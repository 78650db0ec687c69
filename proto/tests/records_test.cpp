// The worker pipe is length-delimited WorkerRecords: many records in one stream come back intact,
// a truncated stream is detected, and newer fields are skipped by older readers (proto3 rules).
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/delimited_message_util.h>
#include <gtest/gtest.h>

#include <sstream>

#include "qgate/v1/harness.pb.h"
#include "qgate/v1/worker.pb.h"

using qgate::v1::WorkerRecord;

namespace {

std::string write_stream(const std::vector<WorkerRecord>& records) {
  std::ostringstream out;
  for (const auto& r : records) google::protobuf::util::SerializeDelimitedToOstream(r, &out);
  return out.str();
}

std::vector<WorkerRecord> read_stream(const std::string& bytes, bool* clean) {
  google::protobuf::io::ArrayInputStream in(bytes.data(), int(bytes.size()));
  std::vector<WorkerRecord> out;
  while (true) {
    WorkerRecord r;
    bool eof = false;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&r, &in, &eof)) {
      *clean = eof;
      return out;
    }
    out.push_back(r);
  }
}

}  // namespace

TEST(WorkerRecords, AStreamOfRecordsRoundTrips) {
  std::vector<WorkerRecord> records(3);
  records[0].mutable_context()->set_device_name("NVIDIA H200");
  records[1].mutable_parity()->set_type("q6_K");
  records[1].mutable_parity()->set_seed(0xFFFFFFFFFFFFFFFFull);
  records[1].mutable_parity()->set_max_abs_diff(5.2e-5);
  records[2].mutable_summary()->set_passed(128);
  bool clean = false;
  auto back = read_stream(write_stream(records), &clean);
  EXPECT_TRUE(clean);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0].context().device_name(), "NVIDIA H200");
  EXPECT_EQ(back[1].parity().seed(), 0xFFFFFFFFFFFFFFFFull) << "a 64-bit seed survives whole";
  EXPECT_EQ(back[1].parity().max_abs_diff(), 5.2e-5);
  EXPECT_EQ(back[2].summary().passed(), 128);
}

TEST(WorkerRecords, ATruncatedStreamIsNotACleanEnd) {
  WorkerRecord r;
  r.mutable_parity()->set_type("q4_0");
  r.mutable_parity()->set_message(std::string(300, 'x'));
  const std::string bytes = write_stream({r, r});
  for (size_t cut : {bytes.size() - 1, bytes.size() / 2 + 3, size_t(1)}) {
    bool clean = true;
    auto back = read_stream(bytes.substr(0, cut), &clean);
    EXPECT_FALSE(clean) << "cut at " << cut;
    EXPECT_LT(back.size(), 2u);
  }
}

TEST(WorkerRecords, UnknownFieldsFromANewerWriterAreSkipped) {
  // A "newer" record: a ParityCase with an extra field number the reader does not know.
  WorkerRecord r;
  r.mutable_parity()->set_type("q5_K");
  std::string payload = r.SerializeAsString();
  qgate::v1::ParityCase newer = r.parity();
  std::string extra = newer.SerializeAsString();
  extra += std::string("\xA8\x1F\x07", 3);  // field 501, varint 7
  WorkerRecord container;
  ASSERT_TRUE(container.mutable_parity()->ParseFromString(extra));
  EXPECT_EQ(container.parity().type(), "q5_K");
}

TEST(HarnessMessages, EnumsStartWithUnspecified) {
  qgate::v1::JobSpec spec;
  EXPECT_EQ(spec.kind(), qgate::v1::JOB_KIND_UNSPECIFIED) << "an unset kind must not mean a real kind";
  qgate::v1::Job job;
  EXPECT_EQ(job.state(), qgate::v1::JOB_STATE_UNSPECIFIED);
  EXPECT_FALSE(qgate::v1::JobKind_IsValid(99));
}
