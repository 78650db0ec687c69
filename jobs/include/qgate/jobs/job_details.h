// The application layer's read use case behind the Dashboard RPCs: one job's A/B runs, pairs and
// sequential looks, its parity cases, and the co-tenant readings of its runs, as API messages.
#pragma once

#include "qgate/db/store.h"
#include "qgate/jobs/application_error.h"
#include "qgate/v1/dashboard.pb.h"

namespace qgate::jobs {

class JobDetails {
 public:
  explicit JobDetails(db::Store& store) : store_(store) {}

  /// The job's finished timed runs by arm, its pairs (A / B per pair index, complete pairs only)
  /// and every planned look of its sequential design, judged again from those pairs for the looks
  /// the job reached. A job without an A/B (a parity job) has no runs and no reached look.
  /// ApplicationError(NotFound) for an unknown job.
  v1::AbDetail ab(db::RowId job_id) const;
  /// The job's parity cases, in the order they were stored.
  v1::ParityResults parity(db::RowId job_id) const;
  /// Every co-tenant reading taken during the job's runs, oldest first, and each run's summary.
  v1::CotenantTimeline cotenant(db::RowId job_id) const;

 private:
  db::Store& store_;
};

}  // namespace qgate::jobs
