// The Dashboard RPCs (dashboard.proto): a thin adapter over JobDetails, served beside Harness.
#pragma once

#include "qgate/db/store.h"
#include "qgate/jobs/job_details.h"
#include "qgate/v1/dashboard.grpc.pb.h"

namespace qgate::server {

class DashboardService final : public v1::Dashboard::CallbackService {
 public:
  explicit DashboardService(db::Store& store) : details_(store) {}

  grpc::ServerUnaryReactor* GetAbDetail(grpc::CallbackServerContext* context, const v1::JobDetailRequest* request,
                                        v1::AbDetail* response) override;
  grpc::ServerUnaryReactor* GetParityResults(grpc::CallbackServerContext* context, const v1::JobDetailRequest* request,
                                             v1::ParityResults* response) override;
  grpc::ServerUnaryReactor* GetCotenantTimeline(grpc::CallbackServerContext* context,
                                                const v1::JobDetailRequest* request,
                                                v1::CotenantTimeline* response) override;

 private:
  jobs::JobDetails details_;
};

}  // namespace qgate::server
