// The A/B worker's judge (docs/security.md, "The A/B judge"). `qgate-worker serve` loads a build that
// shares its process, so before it loads it, it starts `qgate-worker serve-judge` between itself and
// qgated: the judge reads qgated's requests and passes them on, and owns the record stream qgated
// reads. The worker's replies reach qgated only through the judge, which
//   - makes each run's greedy tokens itself from the output head's logits the worker hands over,
//     and counts the rows whose token is not the one the head was built to give (it derives those
//     targets from the prepare request's seed, without the head's weights);
//   - refuses what the protocol does not allow (bytes that do not parse, tokens the worker made,
//     logits of another size than the prepared head's) as CHANNEL_TAMPERED, and passes nothing on
//     after it.
// The timings are still measured in the worker's process: the build could fake them (docs/security.md).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "qgate/kernel_abi.h"

namespace qgate::worker {

/// The two ends the worker keeps once the judge runs: where it reads requests, and where it
/// writes its replies.
struct ServeJudgeChannel {
  int requests_fd = -1;  // becomes the worker's stdin
  int replies_fd = -1;   // what the worker's RecordWriter writes
  pid_t judge_pid = -1;
};

/// Starts `qgate-worker serve-judge` from this executable with `args` (the serve command line, the
/// subcommand renamed): its stdin is this process's stdin (qgated's requests), its stdout is
/// `record_fd`, which this process closes. Points this process's stdin at the judge's requests.
/// Throws std::runtime_error when the judge cannot be started.
ServeJudgeChannel start_serve_judge(const std::vector<std::string>& args, int record_fd);

/// The judge's loop: qgated's requests from stdin on to `to_worker_fd`, the worker's replies from
/// `from_worker_fd` on to stdout. Returns the exit status.
int run_serve_judge(qgate_backend backend, int to_worker_fd, int from_worker_fd);

}  // namespace qgate::worker
