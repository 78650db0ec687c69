// `qgate-worker serve`: the long-lived mode qgated uses for A/B. One process per arm, started with
// that arm's environment (MINFER_MMQ, the arm's build), prepares a model profile once and answers
// timed-run requests from stdin until told to stop, so start-up is paid once per job.
#pragma once

#include <istream>
#include <ostream>

#include "qgate/worker/device_api.h"
#include "qgate/worker/kernel_build.h"
#include "qgate/worker/record_writer.h"

namespace qgate::worker {

/// Reads length-delimited WorkerRequests from `input_fd` and writes WorkerRecords to `writer`
/// until a shutdown request or end of input. A shutdown is answered by a ReleaseDone record:
/// every prepared GEMM released and the build's context destroyed, then the memory left.
/// Returns the process exit code.
int serve_requests(const KernelBuild& build, DeviceApi& device, int threads, int input_fd,
                   RecordWriter& writer);

}  // namespace qgate::worker
