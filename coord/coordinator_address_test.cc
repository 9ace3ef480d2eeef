#include "coord/coordinator_address.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CoordinatorAddress, ParsesEtcdEndpointsInOrder) {
  absl::StatusOr<CoordinatorAddress> a =
      ParseCoordinatorAddress("etcd://127.0.0.1:2379,etcd-1.example:2380,[::1]:2381");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->endpoints, ElementsAre("127.0.0.1:2379", "etcd-1.example:2380", "[::1]:2381"));
}

TEST(CoordinatorAddress, RefusesWhatIsNotEtcdHostPort) {
  for (const char* bad : {"", "127.0.0.1:2379", "zk://h:1", "etcd://", "etcd://h", "etcd://h:0",
                          "etcd://h:65536", "etcd://h:1,", "etcd://:1", "etcd://h:x"}) {
    absl::StatusOr<CoordinatorAddress> a = ParseCoordinatorAddress(bad);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(a.status().message(), HasSubstr("coordinator")) << bad;
  }
}

}  // namespace
}  // namespace ps
