// Prefetcher: a shard's background worker for rows that pulls to come will
// want (PullRowsRequest.prefetch): the caller is answered at once, and the
// job (reading the rows back from the on-disk tier, under the shard's lock)
// runs on this thread while the worker computes.
//
// Jobs run one at a time, in order, on a thread started by the first Add.
// At most max_jobs wait: past it the oldest waiting job is dropped
// (counted): a prefetch is a hint, and a late one is worth less than the
// next. The destructor drops the jobs waiting, lets the one running end,
// and joins the thread.
//
// Thread-safe.
#ifndef PS_SERVER_CORE_PREFETCHER_H_
#define PS_SERVER_CORE_PREFETCHER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ps {

class Prefetcher {
 public:
  using Job = std::function<void()>;

  explicit Prefetcher(size_t max_jobs = 16);
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;
  ~Prefetcher();

  void Add(Job job);
  // Jobs dropped for a full queue.
  int64_t dropped() const;
  // True once no job waits or runs; false at `deadline` (for tests).
  bool WaitIdle(absl::Time deadline) const;

 private:
  void Run();

  const size_t max_jobs_;
  mutable absl::Mutex mu_;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  bool running_ ABSL_GUARDED_BY(mu_) = false;  // a job is running
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // started by the first Add (under mu_)
};

}  // namespace ps

#endif  // PS_SERVER_CORE_PREFETCHER_H_
