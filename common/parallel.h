// ParallelFor: splits [0, n) into contiguous chunks of at least `min_chunk`
// elements and runs fn(begin, end) on each, at most one chunk per core, the
// caller's thread taking the first. Returns when all chunks are done.
// Thread-safe; fn must be safe to run concurrently on disjoint ranges.
#ifndef PS_COMMON_PARALLEL_H_
#define PS_COMMON_PARALLEL_H_

#include <cstddef>
#include <functional>

namespace ps {

void ParallelFor(size_t n, size_t min_chunk, const std::function<void(size_t, size_t)>& fn);

}  // namespace ps

#endif  // PS_COMMON_PARALLEL_H_
