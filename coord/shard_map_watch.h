// ShardMapWatch: follows a job's shard map in etcd (coord/shard_map.h) and
// reports each newer version to its owner. ps_server watches it so: a
// server whose shard the map gives to another address was taken over (its
// lease ran out while it was cut off, and a new server took its shard), and
// stops taking requests (docs/elastic.md).
//
// It runs on a PrefixWatch (coord/prefix_watch.h) of the map's key and
// reports every version above the last reported, starting with the one it
// finds. When etcd is unreachable the owner keeps the last map: the watch
// logs it once and tries again every `retry`. A record that does not parse
// is logged and skipped.
//
// Thread-safe. Borrows the EtcdClient, which must outlive it. The callback
// runs on the watch's thread, one call at a time; it must not destroy the
// watch. Stop (and the destructor) cancels the watch at once.
#ifndef PS_COORD_SHARD_MAP_WATCH_H_
#define PS_COORD_SHARD_MAP_WATCH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coord/etcd_client.h"
#include "coord/prefix_watch.h"
#include "coord/shard_map.h"

namespace ps {

struct ShardMapWatchOptions {
  std::string job = "default";
  // How often the watch is tried again after etcd failed it.
  absl::Duration retry = absl::Seconds(1);
  // The servers' lease ttl: how long the watch waits to read the map
  // again after etcd came back without its data.
  absl::Duration ttl = absl::Seconds(10);
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
  ShardMapWatch() = default;

  // The version last reported, shared with the watch's callback.
  struct Seen {
    absl::Mutex mu;
    int64_t version ABSL_GUARDED_BY(mu) = 0;
  };
  std::shared_ptr<Seen> seen_ = std::make_shared<Seen>();
  // Last: stopped first.
  std::unique_ptr<PrefixWatch> watch_;
};

}  // namespace ps

#endif  // PS_COORD_SHARD_MAP_WATCH_H_
