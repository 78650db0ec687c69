// qgate-worker's command line: `info`, `parity`, `bench` and `argmax`, with exit codes scripts
// can rely on (see kExit*).
#pragma once

namespace qgate::worker {

inline constexpr int kExitOk = 0;
inline constexpr int kExitCaseFailed = 1;   // a parity case failed, or argmax differed
inline constexpr int kExitUsage = 2;        // bad option or argument
inline constexpr int kExitBuild = 3;        // the kernel build could not be loaded
inline constexpr int kExitDevice = 4;       // the backend or device could not be used
inline constexpr int kExitChannelTampered = 5;  // the parity judge's channel held what the worker never sends

int run_worker_cli(int argc, char** argv);

}  // namespace qgate::worker
