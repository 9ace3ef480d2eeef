// StartCoordinatedServer: the ps_server the tests against a real etcd
// start (coordinator_test, shard_map_etcd_test): shard `shard` of 2, async,
// registered in job "e2e" of `etcd` with a 2 s ttl, its log in `dir`.
#ifndef PS_TESTS_COORDINATED_SERVER_H_
#define PS_TESTS_COORDINATED_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tools/process/etcd_process.h"
#include "tools/process/server_process.h"

namespace ps {

inline absl::StatusOr<std::unique_ptr<ServerProcess>> StartCoordinatedServer(
    const std::string& binary, const std::string& dir, const EtcdProcess& etcd, int shard,
    const std::string& name) {
  ServerProcessOptions so;
  so.binary = binary;
  so.dir = dir;
  so.name = name;
  so.flags = {"--num_shards=2", absl::StrCat("--shard_id=", shard),
              "--mode=async",   absl::StrCat("--coordinator=", etcd.url()),
              "--job=e2e",      "--coordinator_ttl=2"};
  so.start_timeout = absl::Seconds(20);
  return ServerProcess::Start(so);
}

}  // namespace ps

#endif  // PS_TESTS_COORDINATED_SERVER_H_
