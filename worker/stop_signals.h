// StopSignals: what ps_worker does at SIGINT or SIGTERM. With a coordinator
// (worker/job.h) it leaves its job first: the registration's lease is
// revoked, so the servers stop waiting for it at once (docs/elastic.md)
// instead of a --coordinator_ttl later. Then it exits with status
// 128 + the signal, as the default action would report it, printing
//   ps_worker: received SIGTERM; left the job (workers/1 of demo)
//
// Install sets a handler of the two signals, which only tells the one
// thread Install starts; that thread leaves and exits. Call it once, early
// in main. (null if the process cannot make a pipe: the signals then act
// as by default.)
//
// Thread-safe. Watch borrows the registration until Unwatch, which waits
// for a leave in progress to end.
#ifndef PS_WORKER_STOP_SIGNALS_H_
#define PS_WORKER_STOP_SIGNALS_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "coord/registration.h"

namespace ps {

class StopSignals {
 public:
  // The process's one instance (never destroyed).
  static StopSignals* Install();

  // Leave through `registration` (null: nothing to leave) at a signal.
  void Watch(Registration* registration) ABSL_LOCKS_EXCLUDED(mu_);
  // Stop using it (before it is destroyed).
  void Unwatch() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  StopSignals() = default;
  void Wait(int in);  // the thread, reading the handler's pipe

  absl::Mutex mu_;
  Registration* registration_ ABSL_GUARDED_BY(mu_) = nullptr;
};

}  // namespace ps

#endif  // PS_WORKER_STOP_SIGNALS_H_
