// The CUDA side of the slow build (slow_build.cpp): a one-thread kernel that spins on
// %globaltimer, and the calibration that decides how long it spins for one prepared GEMM and
// token count. Compiled as CUDA (slow_device.cu) when CUDA is on, else as slow_device_absent.cpp,
// which says that nothing can be done on a device.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace qgate_slow {

/// True when this build can slow down CUDA runs (slow_device.cu was compiled in).
bool device_compiled();

/// Per-context CUDA state: the timing events and the buffer that evicts L2 before each calibration
/// run (as the worker does before each timed repetition).
struct DeviceState;

/// Makes `device` current on this thread and creates the events. nullptr, with *error, on failure.
DeviceState* device_open(int device, std::string* error);
void device_close(DeviceState* state);

/// How one (prepared GEMM, token count) is slowed down.
struct Calibration {
  double forward_ns = 0;   // the forwarded run's GPU time, cold L2 (median)
  double overhead_ns = 0;  // what an enqueued spin kernel adds beyond its spin (kernel switch, timer
                           // ticks); negative where the spin fills a gap the run had anyway
  double spin_ns = 0;      // the spin that makes the run `fraction` longer in all
  bool launch = false;     // false when even an empty spin kernel would overshoot by more than it helps
};

/// Runs `forward` (which enqueues the forwarded GEMM on `stream` and says whether it succeeded) a
/// number of times on `stream`, alone and after a spin kernel, each between two events with the L2
/// evicted first, synchronizing after each (27 runs). It then sets the spin so that spin kernel +
/// forwarded run takes (1 + fraction) times the forwarded run. Host-synchronous: call it only on a GEMM's first
/// run, which every worker mode runs untimed as a warm-up. The output is left as `forward` wrote it.
bool device_calibrate(DeviceState* state, void* stream, double fraction, const std::function<bool()>& forward,
                      Calibration* out, std::string* error);

/// Enqueues on `stream` the one-thread kernel that busy-waits `ns` nanoseconds of %globaltimer.
bool device_spin(void* stream, uint64_t ns, std::string* error);

}  // namespace qgate_slow
