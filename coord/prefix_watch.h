// PrefixWatch: the keys under one etcd prefix, kept current on a thread of
// its own and handed to the owner after every change. It is the watch loop
// of the coordinator's watchers (MemberWatch: a role's members;
// ShardMapWatch: the shard map).
//
// The thread lists the prefix, reports the keys, and watches the prefix
// from the listing's revision on, so that no change between the two is
// missed; each batch of changes reports the keys again. When the watch
// breaks (etcd down, restarted, or unreachable), the owner keeps the last
// keys: the thread logs it once, tries again every `retry`, and when etcd
// answers lists the prefix again and reports what it holds then. If etcd
// came back without its data (its revision is below the last one seen),
// the members register again within a third of their ttl (coord/
// registration.h), so the listing waits one `ttl` first: a restart of etcd
// does not drop every member.
//
// Thread-safe. Borrows the EtcdClient, which must outlive it. The callback
// runs on the watch's thread, one call at a time; it must not destroy the
// watch. Stop cancels the watch at once and joins the thread.
#ifndef PS_COORD_PREFIX_WATCH_H_
#define PS_COORD_PREFIX_WATCH_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coord/etcd_client.h"
#include "coord/key_wait.h"

namespace ps {

struct PrefixWatchOptions {
  std::string prefix;
  // What is watched, for the log lines: "the workers of job demo".
  std::string what;
  // The members' lease ttl (--coordinator_ttl): how long the listing waits
  // after etcd came back without its data.
  absl::Duration ttl = absl::Seconds(10);
  // How often a broken watch is tried again.
  absl::Duration retry = absl::Seconds(1);
  // Where the thread's lines go (null: nowhere).
  std::function<void(const std::string&)> log;
  // What the owner keeps while the watch is broken, for the log line
  // ("the last set [0, 1]"); asked on the watch's thread. Null: "the last
  // keys".
  std::function<std::string()> kept;
};

class PrefixWatch {
 public:
  // Starts the thread; `on_change` gets the keys under the prefix after
  // each listing and after every change.
  static std::unique_ptr<PrefixWatch> Start(EtcdClient* etcd, PrefixWatchOptions options,
                                            std::function<void(const KeyMap&)> on_change);
  ~PrefixWatch();  // Stop()

  PrefixWatch(const PrefixWatch&) = delete;
  PrefixWatch& operator=(const PrefixWatch&) = delete;

  // Ends the watch and joins the thread. Idempotent.
  void Stop();

  // Whether the watch runs (false from a failure until etcd answers again:
  // the keys reported last may be stale meanwhile).
  bool watching() const;

 private:
  PrefixWatch(EtcdClient* etcd, PrefixWatchOptions options,
              std::function<void(const KeyMap&)> on_change);
  void Run();  // the thread
  // Waits `d` or until Stop; whether to go on.
  bool Sleep(absl::Duration d);
  void Log(const std::string& line) const;
  void SetWatching(bool on);

  EtcdClient* const etcd_;
  const PrefixWatchOptions options_;
  const std::function<void(const KeyMap&)> on_change_;
  EtcdClient::WatchCanceller canceller_;

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool watching_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the rest is set
};

}  // namespace ps

#endif  // PS_COORD_PREFIX_WATCH_H_
