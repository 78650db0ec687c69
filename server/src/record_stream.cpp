// RecordStreamParser: varint length decoding by hand (so a length split across reads, an overlong
// varint and an oversized value are each told apart), then a protobuf parse of exactly that many bytes.
#include "qgate/server/record_stream.h"

#include <limits>
#include <utility>

namespace qgate::server {
namespace {

enum class VarintEnd { done, need_more, too_long, too_large };

/// Decodes the varint at `p[0, n)`. Fails with too_large as soon as the value so far already exceeds
/// `max` (later bytes can only add to it), so an absurd length is refused without more input.
VarintEnd decode_length(const unsigned char* p, size_t n, uint64_t max, uint64_t* value, size_t* used) {
  uint64_t v = 0;
  for (size_t i = 0; i < RecordStreamParser::kMaxVarintBytes; ++i) {
    if (i == n) return VarintEnd::need_more;
    const uint64_t bits = p[i] & 0x7fu;
    const unsigned shift = unsigned(7 * i);
    // The 10th byte holds only bit 63; anything above it would not fit in 64 bits.
    if (shift == 63 && bits > 1) return VarintEnd::too_large;
    v |= bits << shift;
    if (v > max) return VarintEnd::too_large;
    if ((p[i] & 0x80u) == 0) {
      *value = v;
      *used = i + 1;
      return VarintEnd::done;
    }
  }
  return VarintEnd::too_long;
}

}  // namespace

RecordStreamParser::RecordStreamParser(size_t max_record_bytes) : max_record_bytes_(max_record_bytes) {
  // ParseFromArray takes an int: a larger limit could not be honoured.
  if (max_record_bytes_ > size_t(std::numeric_limits<int>::max())) max_record_bytes_ = size_t(std::numeric_limits<int>::max());
}

void RecordStreamParser::append(std::string_view bytes) {
  if (malformed_ || bytes.empty()) return;
  // Drop consumed bytes before growing, but only when that moves less than it frees (amortised O(1)).
  if (pos_ > 0 && pos_ >= buffer_.size() - pos_) {
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  buffer_.append(bytes.data(), bytes.size());
}

RecordStreamParser::Result RecordStreamParser::fail(std::string why) {
  malformed_ = true;
  error_ = "malformed worker stream at byte " + std::to_string(consumed_) + ": " + std::move(why);
  // Nothing after a broken record can be framed again; free it.
  buffer_.clear();
  buffer_.shrink_to_fit();
  pos_ = 0;
  return Result::malformed;
}

RecordStreamParser::Result RecordStreamParser::next(v1::WorkerRecord* record) {
  if (malformed_) return Result::malformed;
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data()) + pos_;
  const size_t avail = buffer_.size() - pos_;
  uint64_t length = 0;
  size_t header = 0;
  switch (decode_length(p, avail, max_record_bytes_, &length, &header)) {
    case VarintEnd::need_more:
      return Result::need_more;
    case VarintEnd::too_long:
      return fail("the record length is not a varint (more than 10 bytes)");
    case VarintEnd::too_large:
      return fail("a record length beyond the " + std::to_string(max_record_bytes_) + "-byte limit");
    case VarintEnd::done:
      break;
  }
  if (avail - header < length) return Result::need_more;
  v1::WorkerRecord parsed;
  if (!parsed.ParseFromArray(p + header, int(length)))
    return fail("a " + std::to_string(length) + "-byte record that is not a qgate.v1.WorkerRecord");
  pos_ += header + size_t(length);
  consumed_ += header + length;
  if (pos_ == buffer_.size()) {  // the common case: the buffer drained exactly; reuse its storage
    buffer_.clear();
    pos_ = 0;
  }
  *record = std::move(parsed);
  return Result::record;
}

}  // namespace qgate::server
