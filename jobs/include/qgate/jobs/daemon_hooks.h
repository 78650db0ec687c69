// DaemonHooks: what the application layer asks of the running daemon (the scheduler and the event
// fan-out), as an interface so the application is tested without threads or gRPC.
#pragma once

#include "qgate/db/records.h"
#include "qgate/v1/harness.pb.h"

namespace qgate::jobs {

class DaemonHooks {
 public:
  virtual ~DaemonHooks() = default;
  /// A job was queued: wake the scheduler.
  virtual void job_queued() = 0;
  /// Cancels the job if it is the one running; returns whether it was.
  virtual bool cancel_running(db::RowId job_id) = 0;
  /// The running job's id, 0 when none.
  virtual db::RowId running_job() const = 0;
  /// Tells the job's watchers.
  virtual void publish(const v1::JobEvent& event) = 0;
};

}  // namespace qgate::jobs
