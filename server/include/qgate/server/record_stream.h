// Incremental parser of a length-delimited qgate.v1.WorkerRecord stream (a varint length, then the
// message), as qgate-worker writes it to its stdout.
//
// It is pure (no I/O, no clock), so the pipe-reading code stays a thin loop around it and the parser
// itself can be unit-tested at every split point and fuzzed. The bytes come from a child process that
// runs untrusted builds, so everything is checked before it is trusted: a length is rejected as soon
// as its varint is too long or its value exceeds the record limit (without waiting for, or buffering,
// the bytes it promises), and a payload that does not parse as a WorkerRecord ends the stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "qgate/v1/worker.pb.h"

namespace qgate::server {

class RecordStreamParser {
 public:
  enum class Result {
    record,     // *record holds the next record
    need_more,  // no complete record buffered yet; append more bytes
    malformed,  // the stream is broken (see error()); every later call says so too
  };

  /// Large enough for any record a worker writes (a profile run with every sample is kilobytes),
  /// small enough that a corrupt length cannot make qgated buffer gigabytes.
  static constexpr size_t kDefaultMaxRecordBytes = size_t(64) << 20;
  /// A varint carries 7 bits a byte: 10 bytes are enough for any 64-bit value.
  static constexpr size_t kMaxVarintBytes = 10;

  explicit RecordStreamParser(size_t max_record_bytes = kDefaultMaxRecordBytes);

  /// Adds bytes read from the stream. Ignored once the stream is malformed.
  void append(std::string_view bytes);
  void append(const void* data, size_t size) { append(std::string_view(static_cast<const char*>(data), size)); }

  /// Takes the next complete record. A zero-length record is a valid, empty WorkerRecord (no field
  /// of its oneof set); what it means is the caller's business. `record` is only written on `record`.
  Result next(v1::WorkerRecord* record);

  bool malformed() const { return malformed_; }
  /// Why the stream is malformed, naming the stream offset of the bad record; empty otherwise.
  const std::string& error() const { return error_; }
  /// Bytes appended but not yet returned as records (an incomplete record at EOF means truncation).
  size_t buffered() const { return buffer_.size() - pos_; }
  /// Bytes consumed by returned records since construction.
  uint64_t consumed() const { return consumed_; }
  size_t max_record_bytes() const { return max_record_bytes_; }

 private:
  Result fail(std::string why);

  size_t max_record_bytes_;
  std::string buffer_;
  size_t pos_ = 0;          // start of the unconsumed bytes in buffer_
  uint64_t consumed_ = 0;   // stream offset of buffer_[pos_]
  bool malformed_ = false;
  std::string error_;
};

}  // namespace qgate::server
