// LocalServers: S parameter-server shards started in this process on
// 127.0.0.1 with ephemeral ports (or on unix sockets in a folder the caller
// gives), for tests and benchmarks. Stops them on
// destruction. Not thread-safe to create; the servers themselves are.
#ifndef PS_TOOLS_PROCESS_LOCAL_SERVERS_H_
#define PS_TOOLS_PROCESS_LOCAL_SERVERS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/ps_server.h"

namespace ps {

struct LocalServers {
  // Shards 0 .. num_shards-1 with the options `base`, except for the listen
  // address (127.0.0.1, a free port; or, when `unix_dir` is given, the unix
  // socket unix_dir/shard-S.sock, unix_dir a folder of mode 0700) and the
  // shard id and count.
  static absl::StatusOr<LocalServers> Start(const ServerOptions& base, int num_shards,
                                            const std::string& unix_dir = "") {
    LocalServers out;
    for (int s = 0; s < num_shards; ++s) {
      ServerOptions o = base;
      o.listen = unix_dir.empty() ? std::string("127.0.0.1:0")
                                  : "unix:" + unix_dir + "/shard-" + std::to_string(s) + ".sock";
      o.shard.shard_id = s;
      o.shard.num_shards = num_shards;
      absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start(o);
      if (!server.ok()) return server.status();
      out.addresses.push_back((*server)->address());
      out.servers.push_back(*std::move(server));
    }
    return out;
  }

  // Shard s of num_shards for num_workers workers, in `mode` with SGD at `lr`.
  static absl::StatusOr<LocalServers> Start(int num_shards, int num_workers, Mode mode, float lr,
                                            absl::Duration default_wait = absl::Seconds(60),
                                            const std::string& unix_dir = "") {
    ServerOptions o;
    o.shard.num_workers = num_workers;
    o.shard.mode = mode;
    o.shard.optimizer.learning_rate = lr;
    o.shard.default_wait = default_wait;
    return Start(o, num_shards, unix_dir);
  }

  std::vector<std::unique_ptr<PsServer>> servers;
  std::vector<std::string> addresses;  // HOST:PORT (or unix:PATH) of shard 0, 1, ...
};

}  // namespace ps

#endif  // PS_TOOLS_PROCESS_LOCAL_SERVERS_H_
