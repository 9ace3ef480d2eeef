// ConnectTableClient: a worker (by default the one) of in-process servers
// (LocalServers), with one embedding table declared and a 4-float dense
// model "w" at zero (worker 0 makes it), for the tests of table settings
// (tier, admission, eviction, checkpoints).
#ifndef PS_TESTS_TABLE_CLIENT_H_
#define PS_TESTS_TABLE_CLIENT_H_

#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/test_cluster.h"

namespace ps {

// A PsClient as worker `worker_id` of `num_workers`, or null (the test has
// failed then).
inline std::unique_ptr<PsClient> ConnectTableClient(
    const LocalServers& servers, const TableSpec& table,
    ClientOptions::Transport transport = ClientOptions::Transport::kStream, int worker_id = 0,
    int num_workers = 1) {
  ClientOptions o;
  o.transport = transport;
  o.servers = servers.addresses;
  o.worker_id = worker_id;
  o.num_workers = num_workers;
  o.wait_timeout = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<PsClient>> c = PsClient::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return nullptr;
  EXPECT_TRUE((*c)->DeclareTables({table}).ok());
  TensorList init = {std::vector<float>(4, 0.0f)};
  EXPECT_TRUE((*c)->Init({{"w", {4}}}, worker_id == 0 ? &init : nullptr).ok());
  return *std::move(c);
}

}  // namespace ps

#endif  // PS_TESTS_TABLE_CLIENT_H_
