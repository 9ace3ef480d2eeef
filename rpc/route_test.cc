#include "rpc/route.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

TEST(Route, FormatsAndParsesBack) {
  EXPECT_EQ(FormatRoute(Route{1, 2, 7}), "1/2@7");
  for (const Route r : {Route{0, 1, 0}, Route{1, 2, 7}, Route{15, 16, int64_t{1} << 40}}) {
    absl::StatusOr<Route> back = ParseRoute(FormatRoute(r));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->shard, r.shard);
    EXPECT_EQ(back->num_shards, r.num_shards);
    EXPECT_EQ(back->map_version, r.map_version);
  }
}

TEST(Route, RefusesTextsItDoesNotWrite) {
  for (const char* bad : {"", "1/2", "1@2", "a/2@3", "1/b@3", "1/2@c", "2/2@1", "-1/2@1", "0/0@1",
                          "0/1@-1", "0/1@1@2"}) {
    absl::StatusOr<Route> r = ParseRoute(bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("ps-route metadata")) << bad;
  }
}

TEST(CheckRoute, TheRightShardPassesAnotherIsRefusedNamingBoth) {
  EXPECT_TRUE(CheckRoute(Route{1, 2, 0}, Route{1, 2, 0}).ok());
  EXPECT_TRUE(CheckRoute(Route{1, 2, 5}, Route{1, 2, 0}).ok());
  absl::Status other = CheckRoute(Route{0, 2, 3}, Route{1, 2, 3});
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(other.message(), HasSubstr("meant for shard 0 of 2 but reached the server of shard "
                                         "1 of 2 (routed by shard map version 3)"));
  EXPECT_THAT(other.message(), HasSubstr("nothing was done"));
  // Another shard count is another partition, even for the same index.
  absl::Status count = CheckRoute(Route{1, 3, 0}, Route{1, 2, 0});
  EXPECT_EQ(count.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(count.message(), HasSubstr("meant for shard 1 of 3 but reached the server of shard "
                                         "1 of 2:"));
}

TEST(CheckRoute, AMapOlderThanTheServersShardIsRefused) {
  // The server took shard 1 at version 5: a client routing by version 4
  // had another server for it.
  absl::Status old = CheckRoute(Route{1, 2, 4}, Route{1, 2, 5});
  EXPECT_EQ(old.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(old.message(), HasSubstr("routed by shard map version 4, older than version 5, at "
                                       "which this server took shard 1 of 2: read the job's "
                                       "shard map again and retry"));
  EXPECT_TRUE(CheckRoute(Route{1, 2, 5}, Route{1, 2, 5}).ok());
  EXPECT_TRUE(CheckRoute(Route{1, 2, 9}, Route{1, 2, 5}).ok());  // later moves of other shards
  // Not routed by a map, or a server that has none: nothing to compare.
  EXPECT_TRUE(CheckRoute(Route{1, 2, 0}, Route{1, 2, 5}).ok());
  EXPECT_TRUE(CheckRoute(Route{1, 2, 4}, Route{1, 2, 0}).ok());
}

}  // namespace
}  // namespace ps
