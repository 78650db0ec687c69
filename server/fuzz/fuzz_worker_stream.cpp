// libFuzzer target: RecordStreamParser fed in pieces whose sizes the input chooses, as a pipe
// would deliver them. Besides ASan/UBSan, it checks the parser's central promise: how the bytes are
// split never changes what comes out. The same bytes appended in one piece must give the same
// records, in the same order, and the same final state; any difference aborts (a finding).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>

#include "qgate/server/record_stream.h"

namespace {

using qgate::server::RecordStreamParser;

struct Outcome {
  std::vector<std::string> records;  // serialized, to compare by value
  RecordStreamParser::Result last = RecordStreamParser::Result::need_more;
  uint64_t consumed = 0;
  size_t buffered = 0;
};

// Deterministic: a map field (RunContext.options) otherwise serializes in hash order, which differs
// between two message objects holding the same entries.
std::string canonical(const qgate::v1::WorkerRecord& record) {
  std::string bytes;
  google::protobuf::io::StringOutputStream raw(&bytes);
  google::protobuf::io::CodedOutputStream coded(&raw);
  coded.SetSerializationDeterministic(true);
  record.SerializeToCodedStream(&coded);
  coded.Trim();
  return bytes;
}

void drain(RecordStreamParser& parser, Outcome* out) {
  qgate::v1::WorkerRecord record;
  while ((out->last = parser.next(&record)) == RecordStreamParser::Result::record)
    out->records.push_back(canonical(record));
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_worker_stream: %s\n", what);
    std::abort();
  }
}

}  // namespace

// protobuf logs every invalid UTF-8 string it rejects; at ~20k inputs a second that is only noise.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // Byte 0: how many chunk-size bytes follow (1-8); they are cycled through as the sizes (1-256)
  // of successive appends. A small record limit (from the low bits of byte 0 too) lets the fuzzer
  // reach the oversized-length path without megabytes of input.
  const size_t n_sizes = 1 + (data[0] & 7);
  if (size < 1 + n_sizes) return 0;
  const size_t max_record = (data[0] & 8) ? 64 : RecordStreamParser::kDefaultMaxRecordBytes;
  const uint8_t* sizes = data + 1;
  const uint8_t* stream = data + 1 + n_sizes;
  const size_t stream_size = size - 1 - n_sizes;

  RecordStreamParser chunked(max_record);
  Outcome a;
  size_t off = 0;
  for (size_t i = 0; off < stream_size; ++i) {
    const size_t want = size_t(sizes[i % n_sizes]) + 1;
    const size_t n = want < stream_size - off ? want : stream_size - off;
    chunked.append(stream + off, n);
    off += n;
    drain(chunked, &a);
  }
  drain(chunked, &a);  // an empty stream, or a final call after the last append
  a.consumed = chunked.consumed();
  a.buffered = chunked.buffered();

  RecordStreamParser whole(max_record);
  Outcome b;
  whole.append(stream, stream_size);
  drain(whole, &b);
  b.consumed = whole.consumed();
  b.buffered = whole.buffered();

  check(a.records == b.records, "chunked and whole parses returned different records");
  check(a.last == b.last, "chunked and whole parses ended differently");
  check(a.consumed == b.consumed && a.buffered == b.buffered, "chunked and whole parses consumed differently");
  check(b.consumed + b.buffered <= stream_size, "more bytes accounted for than were appended");
  check(b.last != RecordStreamParser::Result::malformed || b.buffered == 0, "a malformed stream kept its buffer");
  return 0;
}
