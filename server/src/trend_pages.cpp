// QueryTrend's page size and page tokens (trend_pages.h).
#include "qgate/server/trend_pages.h"

#include <array>

#include "qgate/common/fnv1a.h"
#include "qgate/common/sha256.h"

namespace qgate::server {
namespace {

constexpr std::uint8_t kTokenVersion = 1;
constexpr std::size_t kPayloadBytes = 2 + 4 * 8;  // version, flags, four 64-bit numbers
constexpr std::size_t kCheckBytes = 8;
constexpr std::string_view kCheckDomain = "qgate QueryTrend page token v1\n";
constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_u64(std::string_view in, std::size_t at) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t(static_cast<std::uint8_t>(in[at + i])) << (8 * i);
  return v;
}

/// The first kCheckBytes of SHA-256 over the domain and the payload. Not a secret: a token a client
/// makes up only positions a read it could ask for with since_unix_ms; the check tells a damaged or
/// altered token from one the daemon wrote, so that it is refused rather than read.
std::string check_of(std::string_view payload) {
  common::Sha256 hash;
  hash.update(kCheckDomain.data(), kCheckDomain.size());
  hash.update(payload.data(), payload.size());
  const std::string hex = hash.hex_digest();
  std::string out;
  for (std::size_t i = 0; i < kCheckBytes; ++i) out.push_back(static_cast<char>(std::stoi(hex.substr(2 * i, 2), nullptr, 16)));
  return out;
}

std::string base64url(std::string_view bytes) {
  std::string out;
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t n = (std::uint32_t(std::uint8_t(bytes[i])) << 16) | (std::uint32_t(std::uint8_t(bytes[i + 1])) << 8) |
                            std::uint8_t(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out.push_back(kAlphabet[(n >> shift) & 63]);
  }
  const std::size_t rest = bytes.size() - i;
  if (rest > 0) {
    std::uint32_t n = std::uint32_t(std::uint8_t(bytes[i])) << 16;
    if (rest == 2) n |= std::uint32_t(std::uint8_t(bytes[i + 1])) << 8;
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    if (rest == 2) out.push_back(kAlphabet[(n >> 6) & 63]);
  }
  return out;
}

/// The bytes of URL-safe base64 without padding; false on any other character or a length no
/// encoding has.
bool from_base64url(std::string_view text, std::string& bytes) {
  std::array<int, 256> value{};
  value.fill(-1);
  for (std::size_t i = 0; i < kAlphabet.size(); ++i) value[std::uint8_t(kAlphabet[i])] = int(i);
  if (text.size() % 4 == 1) return false;
  std::uint32_t n = 0;
  int bits = 0;
  for (char c : text) {
    const int v = value[std::uint8_t(c)];
    if (v < 0) return false;
    n = (n << 6) | std::uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(static_cast<char>((n >> bits) & 0xff));
    }
  }
  return (n & ((1u << bits) - 1)) == 0;  // the unused low bits of the last character are zero
}

}  // namespace

int trend_page_size(std::int32_t requested) {
  if (requested < 0) return -1;
  if (requested == 0) return kTrendPageSizeDefault;
  return requested > kTrendPageSizeMax ? kTrendPageSizeMax : requested;
}

std::uint64_t trend_query_fingerprint(const v1::QueryTrendRequest& request) {
  v1::QueryTrendRequest filters = request;
  filters.clear_page_size();
  filters.clear_page_token();
  // Scalar fields only: their encoding is one byte string for one set of values.
  return common::fnv1a64(filters.SerializeAsString());
}

std::string write_trend_page_token(const TrendPageCursor& cursor) {
  std::string payload;
  payload.push_back(static_cast<char>(kTokenVersion));
  payload.push_back(static_cast<char>(cursor.raw_runs ? 1 : 0));
  put_u64(payload, std::uint64_t(cursor.after_ms));
  put_u64(payload, std::uint64_t(cursor.after_id));
  put_u64(payload, std::uint64_t(cursor.returned));
  put_u64(payload, cursor.query);
  return base64url(payload + check_of(payload));
}

bool read_trend_page_token(std::string_view token, const v1::QueryTrendRequest& request, TrendPageCursor& cursor,
                           std::string& why) {
  const std::string damaged =
      "page_token is not a token this daemon wrote (damaged or altered): send the next_page_token of the previous "
      "page as it came, or no token for the first page";
  std::string bytes;
  if (token.size() > 128 || !from_base64url(token, bytes) || bytes.size() != kPayloadBytes + kCheckBytes) {
    why = damaged;
    return false;
  }
  const std::string_view payload = std::string_view(bytes).substr(0, kPayloadBytes);
  if (check_of(payload) != std::string_view(bytes).substr(kPayloadBytes) || std::uint8_t(payload[0]) != kTokenVersion ||
      std::uint8_t(payload[1]) > 1) {
    why = damaged;
    return false;
  }
  TrendPageCursor read;
  read.raw_runs = payload[1] == 1;
  read.after_ms = std::int64_t(get_u64(payload, 2));
  read.after_id = std::int64_t(get_u64(payload, 10));
  read.returned = std::int64_t(get_u64(payload, 18));
  read.query = get_u64(payload, 26);
  const bool raw_runs = request.raw_runs() || request.job_id() > 0;
  if (read.query != trend_query_fingerprint(request) || read.raw_runs != raw_runs) {
    why = "page_token belongs to another query: a page's request must have the same filters (profile, weight_type, "
          "path, build_glob, since_unix_ms, include_contended, limit, raw_runs, job_id, host) as the first page's";
    return false;
  }
  if (read.returned < 0 || (request.limit() > 0 && read.returned >= request.limit())) {
    why = damaged;
    return false;
  }
  cursor = read;
  return true;
}

}  // namespace qgate::server
