// ShardMap: which server serves each shard of a job, one versioned record
// in etcd, /ps/<job>/shard_map, that the servers write and the clients
// read to find them (docs/elastic.md). Each shard's dense ranges and table
// rows follow from the shard count (common/partition.h,
// common/embedding_shard.h), so the record names the servers in shard
// order. etcdctl get shows it:
//
//   version 3
//   shards 2
//   0 10.0.0.1:50051
//   1 10.0.0.2:50051
//
// Every change raises the version by one and is a compare-and-swap on the
// record's mod revision (EtcdClient::CompareAndPut): two servers never
// overwrite each other unseen, and a reader that holds version v knows any
// map it reads later with a higher version is newer.
//
// The rules (WithServer) are pure functions, tested without etcd; the etcd
// functions are stateless and thread-safe as EtcdClient is.
#ifndef PS_COORD_SHARD_MAP_H_
#define PS_COORD_SHARD_MAP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coord/etcd_client.h"

namespace ps {

struct ShardMap {
  int64_t version = 0;               // 0: no map yet
  std::vector<std::string> servers;  // by shard; "" where none has published

  // The record's text (above).
  std::string Format() const;
  // Whether every shard has a server.
  bool complete() const;
  // The shards without a server, "1, 3".
  std::string Missing() const;
  bool operator==(const ShardMap& o) const { return version == o.version && servers == o.servers; }
};

// INVALID_ARGUMENT naming the text unless it is Format's: a version >= 1,
// a shard count >= 1 and at most one line per shard below it.
absl::StatusOr<ShardMap> ParseShardMap(const std::string& text);

// The map after the server at `address` takes shard `shard` of
// `num_shards`, one version up; nullopt when `current` says so already. A
// map of another shard count (an earlier run's) is started over with
// `num_shards` empty entries. INVALID_ARGUMENT for a shard outside
// [0, num_shards) or an address that is empty or holds a line break.
absl::StatusOr<std::optional<ShardMap>> WithServer(const ShardMap& current, int shard,
                                                   int num_shards, const std::string& address);

// The record's key.
std::string ShardMapKey(const std::string& job);

// The job's map; version 0 and no servers when there is none. Errors:
// etcd's, INVALID_ARGUMENT when the record does not parse.
absl::StatusOr<ShardMap> ReadShardMap(EtcdClient* etcd, const std::string& job);

// ps_server: records itself as shard `shard`'s server (WithServer),
// reading the map again each time another writer changed it first. The
// map now stored. ABORTED when the record kept changing for 10 tries.
absl::StatusOr<ShardMap> PublishShardServer(EtcdClient* etcd, const std::string& job, int shard,
                                            int num_shards, const std::string& address);

// A client: the job's map, complete, every server of it live (registered
// under its shard's key with the map's address). FAILED_PRECONDITION
// naming the job, etcd and the shards without a server, or whose server is
// not live (down, or restarting: try again), or that there is no map.
absl::StatusOr<ShardMap> ServersOfJob(EtcdClient* etcd, const std::string& job);

}  // namespace ps

#endif  // PS_COORD_SHARD_MAP_H_
