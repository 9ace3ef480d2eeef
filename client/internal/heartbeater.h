// Heartbeater: keeps a worker's sync leases alive. Where the shards'
// RegisterResponses set a worker_timeout (server/core/shard.h: a worker silent
// that long is dropped from its step), PsClient (client/ps_client.h) makes
// one at Connect; it calls `beat` every period on a thread of its own until
// it is destroyed. `beat` sends one Heartbeat to every shard and returns
// once they answered or timed out; its errors are not the heartbeater's to
// handle (the training calls see them too). HeartbeatPeriod picks the
// period for a lease.
//
// Thread safety: construct and destroy from one thread; `beat` runs on the
// heartbeater's thread, never after the destructor returned. The destructor
// stops the thread at once (a beat in progress first ends).
#ifndef PS_CLIENT_INTERNAL_HEARTBEATER_H_
#define PS_CLIENT_INTERNAL_HEARTBEATER_H_

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ps {

// Three heartbeats per `lease`, so that one lost or late one costs nothing,
// but no more than one per 100 ms. REQUIRES: lease > 0.
absl::Duration HeartbeatPeriod(absl::Duration lease);

class Heartbeater {
 public:
  // The first beat goes out one `period` after construction.
  Heartbeater(absl::Duration period, std::function<void()> beat);
  ~Heartbeater();
  Heartbeater(const Heartbeater&) = delete;
  Heartbeater& operator=(const Heartbeater&) = delete;

 private:
  void Loop();

  const absl::Duration period_;
  const std::function<void()> beat_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the rest is set
};

}  // namespace ps

#endif  // PS_CLIENT_INTERNAL_HEARTBEATER_H_
