// ConnectTableClient: the one worker of in-process servers (LocalServers),
// with one embedding table declared and a 4-float dense model "w" at zero,
// for the tests of table settings (tier, admission, eviction).
#ifndef PS_TESTS_TABLE_CLIENT_H_
#define PS_TESTS_TABLE_CLIENT_H_

#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/test_cluster.h"

namespace ps {

// A PsClient as worker 0 of 1, or null (the test has failed then).
inline std::unique_ptr<PsClient> ConnectTableClient(
    const LocalServers& servers, const TableSpec& table,
    ClientOptions::Transport transport = ClientOptions::Transport::kStream) {
  ClientOptions o;
  o.transport = transport;
  o.servers = servers.addresses;
  o.worker_id = 0;
  o.num_workers = 1;
  o.wait_timeout = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<PsClient>> c = PsClient::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return nullptr;
  EXPECT_TRUE((*c)->DeclareTables({table}).ok());
  TensorList init = {std::vector<float>(4, 0.0f)};
  EXPECT_TRUE((*c)->Init({{"w", {4}}}, &init).ok());
  return *std::move(c);
}

}  // namespace ps

#endif  // PS_TESTS_TABLE_CLIENT_H_
