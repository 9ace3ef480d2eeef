// BufferPool: recycles large float buffers, so that a shard's steady state of
// pushes and updates neither allocates nor page-faults (glibc hands buffers of
// 64 MB and more from non-main arenas back to the kernel on free, whatever
// the mallopt tuning).
//
// Thread-safe. The pool keeps at most `max_spare` buffers; more are freed.
// Buffers shared through Share() come back when their last reference is
// dropped, on whatever thread drops it; they keep the pool alive until then.
#ifndef PS_SERVER_CORE_BUFFER_POOL_H_
#define PS_SERVER_CORE_BUFFER_POOL_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ps {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  static std::shared_ptr<BufferPool> Create(size_t max_spare) {
    return std::shared_ptr<BufferPool>(new BufferPool(max_spare));
  }

  // A buffer of n floats. Its contents are unspecified when recycled (zero
  // when freshly allocated): the caller overwrites what it reads.
  std::vector<float> Take(size_t n);

  // Returns a buffer for reuse.
  void Give(std::vector<float> buffer);

  // Shares `buffer`; it returns to the pool when the last reference goes.
  std::shared_ptr<std::vector<float>> Share(std::vector<float> buffer);

  // Frees the spare buffers (e.g. when buffer sizes change for good).
  void Clear();

 private:
  explicit BufferPool(size_t max_spare) : max_spare_(max_spare) {}

  const size_t max_spare_;
  absl::Mutex mu_;
  std::vector<std::vector<float>> spare_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_SERVER_CORE_BUFFER_POOL_H_
