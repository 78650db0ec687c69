// DashboardService: each RPC delegates to JobDetails and maps what it throws to a status.
#include "qgate/server/dashboard_service.h"

#include "qgate/server/grpc_status.h"

namespace qgate::server {
namespace {

template <typename Fn>
grpc::ServerUnaryReactor* answer(grpc::CallbackServerContext* context, Fn&& fn) {
  auto* reactor = context->DefaultReactor();
  reactor->Finish(guarded_status(std::forward<Fn>(fn)));
  return reactor;
}

grpc::Status positive_id(const v1::JobDetailRequest& request) {
  if (request.job_id() <= 0) return {grpc::StatusCode::INVALID_ARGUMENT, "job_id must be positive"};
  return grpc::Status::OK;
}

}  // namespace

grpc::ServerUnaryReactor* DashboardService::GetAbDetail(grpc::CallbackServerContext* context,
                                                        const v1::JobDetailRequest* request, v1::AbDetail* response) {
  return answer(context, [&]() -> grpc::Status {
    if (auto s = positive_id(*request); !s.ok()) return s;
    *response = details_.ab(request->job_id());
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* DashboardService::GetParityResults(grpc::CallbackServerContext* context,
                                                             const v1::JobDetailRequest* request,
                                                             v1::ParityResults* response) {
  return answer(context, [&]() -> grpc::Status {
    if (auto s = positive_id(*request); !s.ok()) return s;
    *response = details_.parity(request->job_id());
    return grpc::Status::OK;
  });
}

grpc::ServerUnaryReactor* DashboardService::GetCotenantTimeline(grpc::CallbackServerContext* context,
                                                                const v1::JobDetailRequest* request,
                                                                v1::CotenantTimeline* response) {
  return answer(context, [&]() -> grpc::Status {
    if (auto s = positive_id(*request); !s.ok()) return s;
    *response = details_.cotenant(request->job_id());
    return grpc::Status::OK;
  });
}

}  // namespace qgate::server
