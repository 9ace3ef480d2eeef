// ShardMapWatch: follows a job's shard map in etcd (coord/shard_map.h) and
// reports each newer version to its owner. ps_server watches it so: a
// server whose shard the map gives to another address was taken over (its
// lease ran out while it was cut off, and a new server took its shard), and
// stops taking requests (docs/elastic.md).
//
// A thread of its own waits on the map's key (coord/key_wait.h) and reports
// every version above the last reported, starting with the one it finds.
// When etcd is unreachable the owner keeps the last map: the thread logs it
// once and tries again every `retry`. A record that does not parse is
// logged and skipped.
//
// Thread-safe. Borrows the EtcdClient, which must outlive it. The callback
// runs on the watch's thread, one call at a time; it must not destroy the
// watch. Stop (and the destructor) ends the thread within `poll`.
#ifndef PS_COORD_SHARD_MAP_WATCH_H_
#define PS_COORD_SHARD_MAP_WATCH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coord/etcd_client.h"
#include "coord/shard_map.h"

namespace ps {

struct ShardMapWatchOptions {
  std::string job = "default";
  // How often the watch is tried again after etcd failed it.
  absl::Duration retry = absl::Seconds(1);
  // How often the thread asks whether it was stopped while it waits.
  absl::Duration poll = absl::Milliseconds(200);
  // Where the thread's lines go (null: nowhere).
  std::function<void(const std::string&)> log;
};

class ShardMapWatch {
 public:
  // Starts the thread; `on_change` gets each newer map.
  static std::unique_ptr<ShardMapWatch> Start(EtcdClient* etcd, ShardMapWatchOptions options,
                                              std::function<void(const ShardMap&)> on_change);
  ~ShardMapWatch();
  ShardMapWatch(const ShardMapWatch&) = delete;
  ShardMapWatch& operator=(const ShardMapWatch&) = delete;

  // Ends the thread; idempotent.
  void Stop();
  // The version last reported (0: none yet).
  int64_t version() const;

 private:
  ShardMapWatch(EtcdClient* etcd, ShardMapWatchOptions options,
                std::function<void(const ShardMap&)> on_change);
  void Run();

  EtcdClient* const etcd_;
  const ShardMapWatchOptions options_;
  const std::function<void(const ShardMap&)> on_change_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace ps

#endif  // PS_COORD_SHARD_MAP_WATCH_H_
