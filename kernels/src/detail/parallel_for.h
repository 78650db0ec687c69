// A minimal parallel loop on std::thread, shared by the CPU references and the CPU backend.
#pragma once

#include <cstdint>
#include <functional>

namespace qgate::quant {

/// Threads to use for a request: `threads` when positive, else all hardware threads (at least 1).
int resolve_thread_count(int threads);

/// Calls fn(begin, end) over disjoint ranges that together cover [0, n), on up to `threads`
/// threads (threads <= 0: all hardware threads). Ranges are handed out dynamically, so one
/// thread may get several; the calling thread works too. The first exception thrown by fn is
/// rethrown here after every thread has stopped; ranges not yet started are then skipped.
void parallel_for(int64_t n, int threads, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace qgate::quant
