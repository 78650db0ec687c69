// QueryTrend's pages (docs/trends.md, "Pages"): the page size a request gets, and the page token,
// a keyset cursor in the answer's order that the daemon writes into one page's answer and checks
// when a request brings it back.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "qgate/v1/harness.pb.h"

namespace qgate::server {

/// A page when the request names none: about 15 ms through qgated on the 2-core development
/// machine at 10,000,000 runs (bench/RESULTS.md, "QueryTrend in pages").
inline constexpr int kTrendPageSizeDefault = 1000;
/// The most points a page holds; a larger page_size is taken as this, not refused.
inline constexpr int kTrendPageSizeMax = 5000;

/// Where the next page starts: after the row (after_ms, after_id) in the read's order, with
/// `returned` points already given (which `limit` counts), for the query whose filters hash to
/// `query` (trend_query_fingerprint) and the read it asked for (points or raw runs).
struct TrendPageCursor {
  bool raw_runs = false;
  std::int64_t after_ms = 0;
  std::int64_t after_id = 0;
  std::int64_t returned = 0;
  std::uint64_t query = 0;
};

/// The request's page size: 0 is the default, more than the maximum the maximum; -1 when negative
/// (the caller refuses it).
int trend_page_size(std::int32_t requested);

/// A hash of every field of the request but page_size and page_token: the query a token belongs to.
std::uint64_t trend_query_fingerprint(const v1::QueryTrendRequest& request);

/// The token: the cursor and a check over it, in URL-safe base64 without padding.
std::string write_trend_page_token(const TrendPageCursor& cursor);

/// The cursor in `token`, checked against `request`: false, with `why` set to a sentence for the
/// caller, when it is not one write_trend_page_token wrote (damaged or altered), or was written for
/// a query with other filters.
bool read_trend_page_token(std::string_view token, const v1::QueryTrendRequest& request, TrendPageCursor& cursor,
                           std::string& why);

}  // namespace qgate::server
