#include "client/internal/registration.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::vector<std::string> kServers = {"a:1", "b:2", "c:3"};

// Shard s of 3 in sync mode, at run 7, start s + 1.
std::vector<v1::RegisterResponse> Replies() {
  std::vector<v1::RegisterResponse> out(3);
  for (int s = 0; s < 3; ++s) {
    out[s].set_mode(v1::MODE_SYNC);
    out[s].set_shard_id(s);
    out[s].set_num_shards(3);
    out[s].set_learning_rate(0.5f + s);
    out[s].mutable_incarnation()->set_run_id(7);
    out[s].mutable_incarnation()->set_start(s + 1);
  }
  return out;
}

TEST(ReadRegistration, GathersWhatTheClientKeeps) {
  std::vector<v1::RegisterResponse> replies = Replies();
  replies[1].set_last_seq(12);
  replies[2].set_last_seq(9);
  replies[0].set_last_row_seq(4);
  absl::StatusOr<Registration> r = ReadRegistration(kServers, replies);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->mode, Mode::kSync);
  EXPECT_EQ(r->learning_rate, 0.5f);  // shard 0's
  EXPECT_THAT(r->incarnations,
              ElementsAre(Incarnation{7, 1}, Incarnation{7, 2}, Incarnation{7, 3}));
  EXPECT_EQ(r->last_seq, 12);
  EXPECT_EQ(r->last_row_seq, 4);
  EXPECT_EQ(r->lease, absl::ZeroDuration());
}

TEST(ReadRegistration, TheLeaseIsTheShortestOfThoseSet) {
  std::vector<v1::RegisterResponse> replies = Replies();
  replies[0].set_worker_timeout_ms(0);
  replies[1].set_worker_timeout_ms(3000);
  replies[2].set_worker_timeout_ms(2000);
  absl::StatusOr<Registration> r = ReadRegistration(kServers, replies);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->lease, absl::Seconds(2));
}

TEST(ReadRegistration, ServersOutOfShardOrder) {
  std::vector<v1::RegisterResponse> replies = Replies();
  std::swap(replies[1], replies[2]);
  absl::StatusOr<Registration> r = ReadRegistration(kServers, replies);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(),
              HasSubstr("--servers lists 3 servers, but b:2 (position 1) is shard 2 of 3"));
}

TEST(ReadRegistration, AServerOfAnotherCluster) {
  std::vector<v1::RegisterResponse> replies = Replies();
  replies[2].set_num_shards(4);
  absl::StatusOr<Registration> r = ReadRegistration(kServers, replies);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("c:3 (position 2) is shard 2 of 4"));
}

TEST(ReadRegistration, ServersThatDisagreeOnTheMode) {
  std::vector<v1::RegisterResponse> replies = Replies();
  replies[1].set_mode(v1::MODE_ASYNC);
  absl::StatusOr<Registration> r = ReadRegistration(kServers, replies);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(),
              HasSubstr("servers disagree on the mode: a:1 runs MODE_SYNC, b:2 runs MODE_ASYNC"));
}

TEST(ReadRegistration, AModeThisBuildDoesNotKnow) {
  std::vector<v1::RegisterResponse> replies = Replies();
  for (v1::RegisterResponse& r : replies) r.set_mode(v1::MODE_UNSPECIFIED);
  absl::StatusOr<Registration> r = ReadRegistration(kServers, replies);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("a:1 reports "));
}

TEST(ToShardRegistrations, IncarnationParametersAndVersionByShard) {
  std::vector<v1::RegisterResponse> replies = Replies();
  replies[1].set_initialized(true);
  replies[1].set_version(42);
  const std::vector<ShardRegistration> r = ToShardRegistrations(replies);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].incarnation, (Incarnation{7, 1}));
  EXPECT_FALSE(r[0].initialized);
  EXPECT_TRUE(r[1].initialized);
  EXPECT_EQ(r[1].version, 42);
  EXPECT_EQ(r[2].incarnation, (Incarnation{7, 3}));
}

TEST(ConnectTimeoutError, SaysWhyAndHintsAtTlsWhenTheServerClosedTheConnection) {
  const absl::Status plain =
      ConnectTimeoutError(absl::Seconds(3), absl::UnavailableError("Connection refused"));
  EXPECT_EQ(plain.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(plain.message(), "no answer within --connect_timeout=3s; then Connection refused");
  const absl::Status tls =
      ConnectTimeoutError(absl::Seconds(3), absl::UnavailableError("Socket closed"));
  EXPECT_THAT(tls.message(), HasSubstr("do this worker's TLS flags match the server's"));
}

}  // namespace
}  // namespace ps
