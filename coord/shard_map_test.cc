#include "coord/shard_map.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

ShardMap Map(int64_t version, std::vector<std::string> servers) {
  ShardMap m;
  m.version = version;
  m.servers = std::move(servers);
  return m;
}

TEST(ShardMap, FormatsAndParsesBack) {
  const ShardMap m = Map(3, {"10.0.0.1:50051", "", "unix:/run/ps 2.sock"});
  EXPECT_EQ(m.Format(), "version 3\nshards 3\n0 10.0.0.1:50051\n2 unix:/run/ps 2.sock\n");
  absl::StatusOr<ShardMap> back = ParseShardMap(m.Format());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, m);
  EXPECT_FALSE(m.complete());
  EXPECT_EQ(m.Missing(), "1");
  EXPECT_TRUE(Map(1, {"a"}).complete());
  EXPECT_FALSE(ShardMap().complete());
}

TEST(ShardMap, RefusesTextsItDoesNotWrite) {
  for (const char* text :
       {"", "version 1\n", "shards 2\n0 a\n", "version 0\nshards 1\n", "version 1\nshards 0\n",
        "version 1\nshards 2\n2 a\n", "version 1\nshards 2\n0 a\n0 b\n", "version 1\nshards 2\n0\n",
        "version 1\nshards 2\nshards 3\n", "version 1\nshards 1\nfoo bar\n",
        "version x\nshards 1\n", "version 1\nshards 99999999\n"}) {
    absl::StatusOr<ShardMap> m = ParseShardMap(text);
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << text;
    if (!m.ok()) EXPECT_THAT(m.status().message(), HasSubstr("shard map"));
  }
}

TEST(ShardMap, WithServerRaisesTheVersionOnlyOnAChange) {
  // No map yet: one of num_shards entries, version 1.
  absl::StatusOr<std::optional<ShardMap>> m = WithServer(ShardMap(), 1, 2, "b:1");
  ASSERT_TRUE(m.ok() && m->has_value());
  EXPECT_EQ(**m, Map(1, {"", "b:1"}));
  m = WithServer(**m, 0, 2, "a:1");
  ASSERT_TRUE(m.ok() && m->has_value());
  EXPECT_EQ(**m, Map(2, {"a:1", "b:1"}));
  // The same server again: no change.
  absl::StatusOr<std::optional<ShardMap>> same = WithServer(**m, 0, 2, "a:1");
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->has_value());
  // A server restarted elsewhere takes its shard over.
  m = WithServer(**m, 0, 2, "a:2");
  ASSERT_TRUE(m.ok() && m->has_value());
  EXPECT_EQ(**m, Map(3, {"a:2", "b:1"}));
  // An earlier run's map of another shard count is started over, the
  // version still going up.
  m = WithServer(**m, 2, 3, "c:1");
  ASSERT_TRUE(m.ok() && m->has_value());
  EXPECT_EQ(**m, Map(4, {"", "", "c:1"}));
}

TEST(ShardMap, WithServerRefusesBadShardsAndAddresses) {
  EXPECT_EQ(WithServer(ShardMap(), 2, 2, "a").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WithServer(ShardMap(), -1, 2, "a").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WithServer(ShardMap(), 0, 0, "a").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WithServer(ShardMap(), 0, 1, "").status().code(), absl::StatusCode::kInvalidArgument);
  absl::Status s = WithServer(ShardMap(), 0, 1, "a\nshards 9").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("line break"));
}

}  // namespace
}  // namespace ps
