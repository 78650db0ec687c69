// parallel_for: dynamic chunking over std::thread, so a core busy with something else slows
// the loop by its share instead of stalling one fixed slice.
#include "detail/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace qgate::quant {

int resolve_thread_count(int threads) {
  if (threads > 0) return threads;
  const unsigned hardware = std::thread::hardware_concurrency();
  return hardware == 0 ? 1 : static_cast<int>(hardware);
}

void parallel_for(int64_t n, int threads, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t workers = std::min<int64_t>(resolve_thread_count(threads), n);
  if (workers == 1) {
    fn(0, n);
    return;
  }
  // A few chunks per worker balance uneven progress without much hand-out overhead.
  const int64_t chunks = std::min<int64_t>(n, workers * 4);
  std::atomic<int64_t> next_chunk{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;
  std::mutex error_mutex;

  auto work = [&] {
    for (;;) {
      if (failed.load(std::memory_order_relaxed)) return;
      const int64_t c = next_chunk.fetch_add(1);
      if (c >= chunks) return;
      const int64_t begin = n * c / chunks;
      const int64_t end = n * (c + 1) / chunks;
      try {
        fn(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
        failed.store(true);
        return;
      }
    }
  };

  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(workers - 1));
  for (int64_t i = 0; i + 1 < workers; ++i) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads available: the ones started (and this one) finish the work
    }
  }
  work();
  for (std::thread& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace qgate::quant
