// TestCluster: S real parameter servers started in-process on 127.0.0.1 with
// ephemeral ports (or on unix sockets in a 0700 folder the caller gives),
// for RPC tests, and clients for them. Stops the servers on
// destruction. LoggedServers: the same with any ServerOptions, keeping the
// lines the servers log.
#ifndef PS_TESTS_TEST_CLUSTER_H_
#define PS_TESTS_TEST_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "client/ps_client.h"
#include "gtest/gtest.h"
#include "tools/process/local_servers.h"

namespace ps {

class TestCluster {
 public:
  TestCluster(int num_shards, int num_workers, Mode mode, float lr,
              absl::Duration default_wait = absl::Seconds(60), const std::string& unix_dir = "") {
    auto started = LocalServers::Start(num_shards, num_workers, mode, lr, default_wait, unix_dir);
    EXPECT_TRUE(started.ok()) << started.status();
    if (started.ok()) local_ = *std::move(started);
  }

  const std::vector<std::string>& addresses() const { return local_.addresses; }

  // A client for worker `worker_id` of `num_workers`, connected to every shard.
  absl::StatusOr<std::unique_ptr<PsClient>> Connect(
      int worker_id, int num_workers,
      ClientOptions::Transport transport = ClientOptions::Transport::kStream) const {
    return PsClient::Connect(ClientOptionsFor(worker_id, num_workers, transport));
  }

  ClientOptions ClientOptionsFor(int worker_id, int num_workers,
                                 ClientOptions::Transport transport) const {
    ClientOptions co;
    co.servers = local_.addresses;
    co.worker_id = worker_id;
    co.num_workers = num_workers;
    co.transport = transport;
    return co;
  }
  PsServer* server(int s) { return local_.servers[s].get(); }

 private:
  LocalServers local_;
};

// In-process servers that keep every line their shards log, in order, for
// tests that check what the servers said (checkpoints written, restored,
// skipped). The lines outlive a move: the servers' log callbacks share them.
struct LoggedServers : LocalServers {
  std::vector<std::string> Lines() const {
    absl::MutexLock l(mu.get());
    return *lines;
  }
  // Waits until some line contains `text`; false if none did within
  // `timeout`.
  bool AwaitLine(absl::string_view text, absl::Duration timeout) const {
    auto logged = [this, text] {
      for (const std::string& line : *lines) {
        if (absl::StrContains(line, text)) return true;
      }
      return false;
    };
    absl::MutexLock l(mu.get());
    return mu->AwaitWithTimeout(absl::Condition(&logged), timeout);
  }

  std::shared_ptr<absl::Mutex> mu = std::make_shared<absl::Mutex>();
  std::shared_ptr<std::vector<std::string>> lines = std::make_shared<std::vector<std::string>>();
};

// Starts `num_shards` shards with `base` (as LocalServers::Start), their log
// replaced by one that keeps the lines. A failure to start fails the test
// and returns no servers.
inline LoggedServers StartLoggedServers(ServerOptions base, int num_shards) {
  LoggedServers c;
  base.shard.log = [mu = c.mu, lines = c.lines](absl::string_view line) {
    absl::MutexLock l(mu.get());
    lines->emplace_back(line);
  };
  absl::StatusOr<LocalServers> started = LocalServers::Start(base, num_shards);
  EXPECT_TRUE(started.ok()) << started.status();
  if (started.ok()) static_cast<LocalServers&>(c) = *std::move(started);
  return c;
}

// A client (default transport, 30 s wait timeout) for worker `worker` of
// `num_workers`, connected to every shard of `servers`; null, with the test
// failed, if it cannot connect.
inline std::unique_ptr<PsClient> ConnectWorker(const LocalServers& servers, int worker,
                                               int num_workers) {
  ClientOptions o;
  o.servers = servers.addresses;
  o.worker_id = worker;
  o.num_workers = num_workers;
  o.wait_timeout = absl::Seconds(30);
  auto client = PsClient::Connect(o);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

// For tests parameterized over the client transports.
inline auto AllTransports() {
  return ::testing::Values(ClientOptions::Transport::kStream, ClientOptions::Transport::kUnary);
}
inline std::string TransportName(const ::testing::TestParamInfo<ClientOptions::Transport>& info) {
  return info.param == ClientOptions::Transport::kStream ? "stream" : "unary";
}

}  // namespace ps

#endif  // PS_TESTS_TEST_CLUSTER_H_
