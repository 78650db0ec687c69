// Which GPU a job may run on (JobSpec.gpus, split_gpus; docs/two-gpus.md): the checks a submit or a
// re-measure must pass against the GPUs the daemon serves, and the jobs.device value the job is queued
// under, which each GPU's scheduler claims by.
#pragma once

#include <string>
#include <vector>

#include "qgate/jobs/job_policy.h"
#include "qgate/v1/harness.pb.h"

namespace qgate::jobs {

/// jobs.device of a job that any served GPU may take (a pinned job holds its GPU's ordinal).
inline constexpr int kAnyGpu = -1;

/// The jobs.device a spec is queued under: its one pinned GPU, the first GPU of a named split pair, or
/// kAnyGpu.
int queued_device(const v1::JobSpec& spec);

/// Refuses (ApplicationError InvalidArgument) a GPU choice the daemon cannot honour: an ordinal it does
/// not serve, more than one GPU for a job that is not split, a split of a parity job, a split on a
/// daemon with fewer than two GPUs, a pair of one GPU twice, or a pair of two different models. An
/// empty `served` (a daemon that has not described its GPUs) serves options.gpu alone.
/// In a fleet (options.fleet) a split needs two GPUs of whichever daemon claims it, not of this one.
/// Checks check_gpu_routing first.
void check_gpu_choice(const v1::JobSpec& spec, const JobPolicy& options);

/// Refuses a GPU model, uuid or label out of its spelling (gpu_routing.h), and, on a daemon whose
/// store is its own, a job no GPU of it can run: a model or uuid none of its GPUs has, or a label it
/// does not carry. In a fleet such a job waits for a daemon that can (docs/fleet.md).
void check_gpu_routing(const v1::JobSpec& spec, const JobPolicy& options);

}  // namespace qgate::jobs
