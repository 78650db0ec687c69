// Exit codes of the qgate CLI, in one place because scripts and CI branch on them: 0, 1 and 2 are
// verdicts (docs/measurement.md, "A/B"), and every kind of error, usage mistakes included, is 3 so that
// a typo can never be read as a FAIL or an INCONCLUSIVE. 4 says a re-measure found no quiet window.
#pragma once

namespace qgate::client {

inline constexpr int kExitOk = 0;            // the command did what was asked
inline constexpr int kExitPass = 0;          // job done, verdict PASS
inline constexpr int kExitFail = 1;          // job done, verdict FAIL
inline constexpr int kExitInconclusive = 2;  // job done, verdict INCONCLUSIVE
inline constexpr int kExitError = 3;         // usage error, RPC error, job FAILED or CANCELLED
inline constexpr int kExitExpired = 4;       // a quiet-window job's deadline passed before the GPU was quiet
inline constexpr int kExitNotServing = 1;    // qgate health: the daemon answered, but not SERVING

}  // namespace qgate::client
