// The leak judge: reads a worker's memory readings (qgate-worker serve's PrepareDone, ProfileRun
// and ReleaseDone records, or a parity sweep's WorkerSummary) and says whether the build kept
// memory. Pure: no I/O, no clock; the daemon decides what a finding does to the job.
//
// What a correct build looks like, and why the rules below do not call it a leak:
//  - The first run allocates lazily: the CUDA runtime and driver load the build's kernels and grow
//    their local-memory reservation at a first launch, malloc arenas grow at first use, pages are
//    touched for the first time. So growth is judged from the first run's reading on, never from
//    the readings before the first run.
//  - Allocators move in steps: an arena or a driver pool grows once and is then reused. A leak
//    grows run after run. So growth needs most steps growing (growing_step_fraction), each by more
//    than a step's noise, and a total beyond a threshold.
//  - Host readings use the anonymous resident set when the worker sent it (RssAnon: heap and
//    anonymous maps), since a library's code pages become resident as code first runs and leak
//    nothing; the worker trims malloc's free pages before every reading.
//  - Device readings are compared only when both were read the same way. "nvml-process" is this
//    process's own figure; "cuda-meminfo" is device-wide, so another process's allocations show in
//    it, and a finding from it says so.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qgate/v1/harness.pb.h"
#include "qgate/v1/worker.pb.h"

namespace qgate::server {

struct LeakThresholds {
  // Across runs (after the first). The leak fault build keeps 64 MiB of device memory (4 MiB of
  // host memory on the CPU) per GEMM call, and a run makes (warmup + repetitions) calls per GEMM,
  // so it grows by hundreds of MiB per run; a correct build's readings after its first run move
  // by driver pool steps (2 MiB pages) and heap fragments. 32 MiB device / 16 MiB host in total
  // is far above the second and far below the first.
  int64_t device_growth_bytes = int64_t(32) << 20;
  int64_t host_growth_bytes = int64_t(16) << 20;
  // A step (one run to the next) counts as growing when it grows by more than this: one driver
  // page on the device, a few heap pages on the host.
  int64_t device_step_bytes = int64_t(2) << 20;
  int64_t host_step_bytes = int64_t(1) << 20;
  // At least this share of the steps must grow (3 of 4), so one allocator step among flat readings,
  // or a co-tenant's allocation in a device-wide reading, is not a leak.
  double growing_step_fraction = 0.75;
  // Growth is judged only with at least this many steps after the first run (so 4 runs or more).
  int min_steps = 2;
  // At release (every GEMM released, the context destroyed) against before the first prepare: what
  // may stay is the lazy loading of the first run (kernel code, a larger local memory reservation,
  // driver staging buffers). The reference build returned to the byte on an H200 (638 MiB before
  // and after, NVML) and kept under 1 MiB of host memory on the CPU and on CUDA. A build that keeps
  // its weights keeps at least one GEMM's worth, 32 MiB and up for a 7B layer's shapes, times the
  // profile's distinct GEMMs.
  int64_t device_release_bytes = int64_t(64) << 20;
  int64_t host_release_bytes = int64_t(32) << 20;
  // A parity sweep: before its first case against after its last, contexts destroyed. Every kernel
  // of both paths has loaded lazily in between. The reference build's quick sweep kept nothing on
  // an H200 and under 1 MiB of host memory (CPU and CUDA); the sweep makes one GEMM call per case
  // and path, so the leak fault build kept 6.0 GiB of device memory (96 calls x 64 MiB) and 385 MiB
  // of host memory on the CPU (96 x 4 MiB).
  int64_t device_sweep_bytes = int64_t(256) << 20;
  int64_t host_sweep_bytes = int64_t(32) << 20;
  // A second cycle (prepare, run, release again in the same process) against the end of the first.
  // What a library sets up once (ggml's pool, cuBLAS handles) is in place after the first cycle: a
  // second one finds it and reuses it, and moves by heap fragments (8 MiB of host memory measured
  // for ggml's f16 path from its first cycle to its second, level from then on). The leak fault
  // build keeps 64 MiB of device (4 MiB of host) memory per call: a second parity cycle of one
  // case per type and path makes 16 calls (1 GiB, 64 MiB).
  int64_t device_cycle_bytes = int64_t(32) << 20;
  int64_t host_cycle_bytes = int64_t(16) << 20;
};

/// One arm of an A/B (or a gate's timed phase) as one worker process saw it.
struct ArmMemory {
  std::string arm;                                // "A" or "B": MemoryLeak.where names it
  v1::PrepareDone prepared;                       // memory_before / memory_after
  std::vector<v1::MemoryReading> runs;            // ProfileRun.memory, in run order
  std::optional<v1::ReleaseDone> released;        // absent when the worker died or never answered
};

/// Growth across the arm's runs ("arm A across runs"), else memory not returned at release
/// ("arm A at release"); nullopt when neither, or when the readings are too few to say. A release
/// that a second cycle found level comes back with kept_once set, as for the parity sweep.
std::optional<v1::MemoryLeak> judge_arm_memory(const ArmMemory& arm, const LeakThresholds& limits = {});

/// Memory a parity sweep kept ("parity sweep"): WorkerSummary.memory_after against memory_before;
/// nullopt when within the thresholds or when either reading is missing. With a second cycle's
/// reading, growth across the second cycle is the leak, and what the first kept while the second
/// stayed level comes back with kept_once set: a finding to report, not a leak.
std::optional<v1::MemoryLeak> judge_parity_memory(const v1::WorkerSummary& summary,
                                                  const LeakThresholds& limits = {});

/// "64.0 MiB", "1.50 GiB", "-2.0 MiB": the sizes a finding's detail uses.
std::string format_bytes(int64_t bytes);

}  // namespace qgate::server
