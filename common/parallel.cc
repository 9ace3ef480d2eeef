#include "common/parallel.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace ps {

void ParallelFor(size_t n, size_t min_chunk, const std::function<void(size_t, size_t)>& fn) {
  static const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t chunks = std::max<size_t>(1, std::min(cores, n / std::max<size_t>(1, min_chunk)));
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  std::vector<std::thread> threads;
  for (size_t c = 1; c < chunks; ++c) {
    threads.emplace_back(fn, n * c / chunks, n * (c + 1) / chunks);
  }
  fn(0, n / chunks);
  for (std::thread& t : threads) t.join();
}

}  // namespace ps
