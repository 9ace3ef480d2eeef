#include "common/parallel.h"

#include <algorithm>
#include <deque>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ps {
namespace {

// One ParallelFor call's chunks: how many are not done yet.
struct Call {
  const std::function<void(size_t, size_t)>* fn;
  int pending;  // guarded by the pool's mutex
};

struct Chunk {
  Call* call;
  size_t begin, end;
};

class Pool {
 public:
  explicit Pool(size_t threads) : idle_(threads) {
    for (size_t i = 0; i < threads; ++i) std::thread([this] { Serve(); }).detach();
  }

  // Runs [0, n) in at most `chunks` chunks, chunk 0 on the caller and the
  // others on idle pool threads (none idle: all on the caller, since the
  // cores are busy with other calls); returns when all are done.
  void Run(size_t n, size_t chunks, const std::function<void(size_t, size_t)>& fn) {
    Call call{&fn, 0};
    {
      absl::MutexLock lock(&mu_);
      chunks = std::min(chunks, 1 + idle_ - std::min(idle_, queue_.size()));
      call.pending = static_cast<int>(chunks - 1);
      for (size_t c = 1; c < chunks; ++c) {
        queue_.push_back(Chunk{&call, n * c / chunks, n * (c + 1) / chunks});
      }
    }
    if (chunks == 1) {
      fn(0, n);
      return;
    }
    fn(0, n / chunks);
    absl::MutexLock lock(&mu_);
    // The chunks of this call no thread took yet: run them here.
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (it->call != &call) {
        ++it;
        continue;
      }
      const Chunk chunk = *it;
      it = queue_.erase(it);
      mu_.Unlock();
      fn(chunk.begin, chunk.end);
      mu_.Lock();
      --call.pending;
      it = queue_.begin();  // the queue may have changed meanwhile
    }
    // The rest are running on pool threads; each ends.
    mu_.Await(absl::Condition(
        +[](Call* c) { return c->pending == 0; }, &call));
  }

 private:
  void Serve() {
    absl::MutexLock lock(&mu_);
    for (;;) {
      mu_.Await(absl::Condition(
          +[](std::deque<Chunk>* q) { return !q->empty(); }, &queue_));
      const Chunk chunk = queue_.front();
      queue_.pop_front();
      --idle_;
      mu_.Unlock();
      (*chunk.call->fn)(chunk.begin, chunk.end);
      mu_.Lock();
      --chunk.call->pending;
      ++idle_;
    }
  }

  absl::Mutex mu_;
  std::deque<Chunk> queue_ ABSL_GUARDED_BY(mu_);
  size_t idle_ ABSL_GUARDED_BY(mu_);  // threads not running a chunk
};

}  // namespace

void ParallelFor(size_t n, size_t min_chunk, const std::function<void(size_t, size_t)>& fn) {
  static const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t chunks = std::max<size_t>(1, std::min(cores, n / std::max<size_t>(1, min_chunk)));
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  static Pool* const pool = new Pool(cores - 1);  // never destroyed: its threads live on
  pool->Run(n, chunks, fn);
}

}  // namespace ps
