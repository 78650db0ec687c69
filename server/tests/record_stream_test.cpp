// RecordStreamParser: the framing qgated trusts to read qgate-worker's stdout. A worker pipe delivers
// bytes in arbitrary pieces, so the tests feed the same stream split at every byte offset, and the
// worker runs untrusted code, so broken lengths and payloads must end the stream, not the daemon.
#include "qgate/server/record_stream.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace qgate::server {
namespace {

using Result = RecordStreamParser::Result;

// Frames with protobuf's own writer (what qgate-worker uses), so the parser is checked against the
// real encoder rather than against a second hand-written one.
std::string frame(const std::string& payload) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream raw(&out);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.WriteVarint32(uint32_t(payload.size()));
    coded.WriteRaw(payload.data(), int(payload.size()));
  }
  return out;
}

std::vector<v1::WorkerRecord> three_records() {
  std::vector<v1::WorkerRecord> records(3);
  auto* ctx = records[0].mutable_context();
  ctx->set_host("host-a");
  ctx->set_backend(v1::BACKEND_CPU);
  ctx->set_qgate_version("0.1.0");
  (*ctx->mutable_options())["threads"] = "2";
  auto* parity = records[1].mutable_parity();
  parity->set_type("q4_K");
  parity->mutable_shape()->set_nt(64);
  parity->mutable_shape()->set_od(4096);
  parity->mutable_shape()->set_k(4096);
  parity->set_outcome(v1::CASE_OUTCOME_PASSED);
  // Long enough (> 127 bytes) that its length varint takes two bytes and can itself be split.
  parity->set_message(std::string(300, 'm'));
  auto* summary = records[2].mutable_summary();
  summary->set_cases(1);
  summary->set_passed(1);
  summary->set_wall_s(0.5);
  return records;
}

std::string stream_of(const std::vector<v1::WorkerRecord>& records) {
  std::string s;
  for (const auto& r : records) s += frame(r.SerializeAsString());
  return s;
}

/// Drains every record now available; returns the result that stopped it.
Result drain(RecordStreamParser& parser, std::vector<std::string>* out) {
  while (true) {
    v1::WorkerRecord r;
    const Result res = parser.next(&r);
    if (res != Result::record) return res;
    out->push_back(r.SerializeAsString());
  }
}

TEST(RecordStreamParser, EverySplitPointGivesTheSameRecords) {
  const auto records = three_records();
  const std::string stream = stream_of(records);
  std::vector<std::string> expected;
  for (const auto& r : records) expected.push_back(r.SerializeAsString());

  for (size_t split = 0; split <= stream.size(); ++split) {
    RecordStreamParser parser;
    std::vector<std::string> got;
    parser.append(std::string_view(stream).substr(0, split));
    ASSERT_NE(drain(parser, &got), Result::malformed) << "split " << split;
    parser.append(std::string_view(stream).substr(split));
    ASSERT_EQ(drain(parser, &got), Result::need_more) << "split " << split;
    EXPECT_EQ(got, expected) << "split " << split;
    EXPECT_EQ(parser.buffered(), 0u);
    EXPECT_EQ(parser.consumed(), stream.size());
  }
}

TEST(RecordStreamParser, ByteAtATime) {
  const auto records = three_records();
  const std::string stream = stream_of(records);
  RecordStreamParser parser;
  std::vector<std::string> got;
  for (char c : stream) {
    parser.append(&c, 1);
    ASSERT_NE(drain(parser, &got), Result::malformed);
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2], records[2].SerializeAsString());
}

TEST(RecordStreamParser, TruncatedStreamNeedsMore) {
  const std::string stream = stream_of(three_records());
  // Cut inside the last record's payload, and inside the two-byte length of the second record.
  for (size_t cut : {stream.size() - 1, size_t(frame(three_records()[0].SerializeAsString()).size() + 1)}) {
    RecordStreamParser parser;
    parser.append(std::string_view(stream).substr(0, cut));
    std::vector<std::string> got;
    EXPECT_EQ(drain(parser, &got), Result::need_more);
    EXPECT_GT(parser.buffered(), 0u) << "an incomplete record stays buffered (truncation at EOF)";
    EXPECT_FALSE(parser.malformed());
  }
}

TEST(RecordStreamParser, ZeroLengthRecordIsAnEmptyRecord) {
  RecordStreamParser parser;
  const char zero = 0;
  parser.append(&zero, 1);
  v1::WorkerRecord r;
  r.mutable_summary()->set_cases(7);  // must be replaced, not merged into
  ASSERT_EQ(parser.next(&r), Result::record);
  EXPECT_EQ(r.record_case(), v1::WorkerRecord::RECORD_NOT_SET);
  EXPECT_EQ(parser.next(&r), Result::need_more);
}

TEST(RecordStreamParser, OversizedLengthIsMalformedWithoutWaitingForTheBytes) {
  RecordStreamParser parser(1024);
  std::string s;
  {
    google::protobuf::io::StringOutputStream raw(&s);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.WriteVarint32(1025);
  }
  parser.append(s);
  v1::WorkerRecord r;
  EXPECT_EQ(parser.next(&r), Result::malformed);
  EXPECT_NE(parser.error().find("limit"), std::string::npos) << parser.error();

  // The default limit: 64 MiB + 1 is refused; a huge 5-byte value too, even before its last byte.
  RecordStreamParser big;
  std::string len;
  {
    google::protobuf::io::StringOutputStream raw(&len);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.WriteVarint32(uint32_t(RecordStreamParser::kDefaultMaxRecordBytes + 1));
  }
  big.append(len);
  EXPECT_EQ(big.next(&r), Result::malformed);
  RecordStreamParser partial;
  partial.append(std::string("\xff\xff\xff\xff", 4));  // 28 bits of ones: already > 64 MiB
  EXPECT_EQ(partial.next(&r), Result::malformed);
}

TEST(RecordStreamParser, LengthAtTheLimitIsAccepted) {
  RecordStreamParser parser(16);
  v1::WorkerRecord rec;
  rec.mutable_error()->set_kind(v1::WORKER_ERROR_KIND_DLOPEN_FAILED);
  rec.mutable_error()->set_message(std::string(16 - 2 - 2 - 2, 'x'));  // exactly 16 bytes serialized
  const std::string payload = rec.SerializeAsString();
  ASSERT_EQ(payload.size(), 16u);
  parser.append(frame(payload));
  v1::WorkerRecord r;
  ASSERT_EQ(parser.next(&r), Result::record);
  EXPECT_EQ(r.error().kind(), v1::WORKER_ERROR_KIND_DLOPEN_FAILED);
}

TEST(RecordStreamParser, OverlongVarintIsMalformed) {
  // Ten continuation bytes with zero payload bits: never a value too large, only too long.
  RecordStreamParser parser;
  parser.append(std::string(9, '\x80'));
  v1::WorkerRecord r;
  EXPECT_EQ(parser.next(&r), Result::need_more) << "nine bytes may still end in a tenth";
  parser.append(std::string(1, '\x80'));
  EXPECT_EQ(parser.next(&r), Result::malformed);
  EXPECT_NE(parser.error().find("varint"), std::string::npos) << parser.error();

  // A padded but terminated varint of zero is still a (non-canonical) valid length.
  RecordStreamParser padded;
  padded.append(std::string("\x80\x80\x00", 3));
  EXPECT_EQ(padded.next(&r), Result::record);
}

TEST(RecordStreamParser, InvalidPayloadIsMalformedAndSticks) {
  RecordStreamParser parser;
  const auto good = three_records();
  // A field with wire type 7 does not exist: no protobuf message parses from it.
  parser.append(frame(good[0].SerializeAsString()) + frame(std::string("\x0f\x01\x02", 3)) +
                frame(good[2].SerializeAsString()));
  v1::WorkerRecord r;
  ASSERT_EQ(parser.next(&r), Result::record);
  EXPECT_EQ(parser.next(&r), Result::malformed);
  EXPECT_NE(parser.error().find("WorkerRecord"), std::string::npos) << parser.error();
  // Sticky: the good record after the bad one is never returned, nor anything appended later.
  EXPECT_EQ(parser.next(&r), Result::malformed);
  parser.append(frame(good[1].SerializeAsString()));
  EXPECT_EQ(parser.next(&r), Result::malformed);
  EXPECT_TRUE(parser.malformed());
  EXPECT_EQ(parser.buffered(), 0u);

  // A sub-message cut short (length says 5, 2 bytes follow) inside an otherwise framed record.
  RecordStreamParser cut;
  cut.append(frame(std::string("\x2a\x05\x08\x01", 4)));
  EXPECT_EQ(cut.next(&r), Result::malformed);
}

TEST(RecordStreamParser, GarbageNeverReturnsARecordPastTheLimit) {
  // Deterministic garbage: whatever it decodes to, the parser must stop at malformed or need_more
  // within the bytes it has, and never report more consumed bytes than were appended.
  uint32_t x = 12345;
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes;
    for (int i = 0; i < 64; ++i) {
      x = x * 1664525u + 1013904223u;
      bytes.push_back(char(x >> 24));
    }
    RecordStreamParser parser(4096);
    parser.append(bytes);
    std::vector<std::string> got;
    const Result end = drain(parser, &got);
    EXPECT_NE(end, Result::record);
    EXPECT_LE(parser.consumed() + parser.buffered(), bytes.size());
  }
}

}  // namespace
}  // namespace qgate::server
