// ParallelFor: splits [0, n) into contiguous chunks of at least `min_chunk`
// elements and runs fn(begin, end) on each, at most one chunk per core, the
// caller's thread taking the first. Returns when all chunks are done.
// Thread-safe; fn must be safe to run concurrently on disjoint ranges.
//
// The other chunks run on a process-wide pool of (cores - 1) threads,
// started on first use and never stopped, so a call costs a wake-up, not a
// thread's start. A call takes only the pool threads idle when it starts
// (none idle: it runs whole on the caller, the cores being busy with other
// calls' chunks), and a caller runs the chunks of its own call that no pool
// thread has taken yet, so calls from many threads at once (or from inside
// fn) never wait on one another's chunks: each waits only for chunks
// already running.
#ifndef PS_COMMON_PARALLEL_H_
#define PS_COMMON_PARALLEL_H_

#include <cstddef>
#include <functional>

namespace ps {

void ParallelFor(size_t n, size_t min_chunk, const std::function<void(size_t, size_t)>& fn);

}  // namespace ps

#endif  // PS_COMMON_PARALLEL_H_
