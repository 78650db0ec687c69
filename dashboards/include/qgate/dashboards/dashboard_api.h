// The dashboard's JSON API: a GET under /api/ mapped onto one read RPC (Harness or Dashboard) over a
// gRPC channel, answered with the response message in the envelope of the CLI's --json documents
// (schema_version, context, and the data under a key named for it; docs/dashboard.md). qgated serves
// it over an in-process channel; `qgate dashboard --out` calls it over its connection to write a
// snapshot.
#pragma once

#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qgate/v1/dashboard.grpc.pb.h"
#include "qgate/v1/harness.grpc.pb.h"

namespace qgate::dashboards {

/// Query parameters, by name; a name given twice is refused.
using QueryParams = std::multimap<std::string, std::string>;

struct ApiResponse {
  int status = 200;  // HTTP status
  std::string body;  // JSON: {"schema_version", "context", KEY: the RPC's response} or, refused,
                     // {"schema_version", "context", "error": {"code": ..., "message": ...}}
};

/// The routes, with the RPC and the key their data is under:
///   /api/device                      GetDevice            device
///   /api/jobs?limit=&state=          ListJobs             jobs (the list)
///   /api/jobs/ID                     GetJob               job
///   /api/jobs/ID/ab                  GetAbDetail          ab (runs, pairs, looks)
///   /api/jobs/ID/parity              GetParityResults     parity
///   /api/jobs/ID/cotenant            GetCotenantTimeline  cotenant
///   /api/trend?profile=&weight_type=&path=&build_glob=&since_unix_ms=&include_contended=&limit=&job_id=&raw_runs=
///                                    QueryTrend           points (the list: every page, at most 100,000)
///   /api/changes?profile=&weight_type=&path=&build_glob=&since_unix_ms=&slowdowns_only=&alpha=&min_segment=
///                                    QueryChanges         changes
///   /api/regressions?profile=&weight_type=&path=&build_glob=&since_unix_ms=&alpha=&min_segment=
///                                    QueryChanges, slowdowns_only (qgate regressions)   regressions
///   /api/compare?build_a=&build_b=&include_contended=&profile=&tokens=&weight_type=&same_margin=
///                                    Compare (qgate compare)                            compare
///   /api/builds?name=&limit=         ListBuilds           builds (the list)
class DashboardApi {
 public:
  explicit DashboardApi(std::shared_ptr<grpc::ChannelInterface> channel);

  /// Answers GET `path` with `query`. `authorization` (the request's Authorization header, may be
  /// empty) is passed on as the call's metadata, so the RPC applies its own token rule. An unknown
  /// path is 404, an unknown or malformed parameter 400, and an RPC's refusal its status mapped to
  /// HTTP (INVALID_ARGUMENT 400, UNAUTHENTICATED 401, PERMISSION_DENIED 403, NOT_FOUND 404,
  /// FAILED_PRECONDITION 409, RESOURCE_EXHAUSTED 429, UNAVAILABLE 503, anything else 500).
  ApiResponse get(const std::string& path, const QueryParams& query, const std::string& authorization = "") const;

  /// True when `path` is one of the routes (whatever its parameters).
  static bool is_route(const std::string& path);

  /// A message in the API's JSON: proto field names, enums by name, fields at their defaults shown,
  /// and 64-bit integers as numbers where they fit in 2^53 (strings beyond, as proto's mapping has it).
  static nlohmann::json to_json(const google::protobuf::Message& message);

 private:
  /// The envelope around `data`: {"schema_version", "context", key: data}. The context is the
  /// daemon's GetDevice answer, read with `authorization`; when it cannot be had, the context says why.
  std::string envelope(const std::string& key, nlohmann::json data, const std::string& authorization) const;
  ApiResponse refused(int status, const std::string& code, const std::string& message,
                      const std::string& authorization) const;

  std::unique_ptr<v1::Harness::Stub> harness_;
  std::unique_ptr<v1::Dashboard::Stub> dashboard_;
};

}  // namespace qgate::dashboards
