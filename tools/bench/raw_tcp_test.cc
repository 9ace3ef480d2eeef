#include "tools/bench/raw_tcp.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace ps {
namespace {

// Sizes below and above kDuplexFrom, so that both ways of exchanging run.
constexpr int64_t kSizes[] = {4096, 4 << 20};

void ExpectCompletes(RawPattern pattern, int64_t bytes, int clients) {
  SCOPED_TRACE(testing::Message() << "pattern " << static_cast<int>(pattern) << ", " << bytes
                                  << " bytes, " << clients << " clients");
  absl::StatusOr<OpTimings> t = RunRawTcp(pattern, bytes, clients, /*warmup=*/2,
                                          absl::Milliseconds(20));
  ASSERT_TRUE(t.ok()) << t.status();
  // Every client times at least one op, and every timed op is counted once.
  EXPECT_GE(t->ops, clients);
  EXPECT_EQ(t->ops, static_cast<int64_t>(t->latencies.size()));
  EXPECT_GT(t->wall, absl::ZeroDuration());
  for (absl::Duration d : t->latencies) EXPECT_GT(d, absl::ZeroDuration());
}

TEST(RunRawTcp, SendCompletesAt4KBAnd4MB) {
  for (int64_t bytes : kSizes) {
    ExpectCompletes(RawPattern::kSend, bytes, 1);
    ExpectCompletes(RawPattern::kSend, bytes, 2);
  }
}

TEST(RunRawTcp, FetchCompletesAt4KBAnd4MB) {
  for (int64_t bytes : kSizes) {
    ExpectCompletes(RawPattern::kFetch, bytes, 1);
    ExpectCompletes(RawPattern::kFetch, bytes, 2);
  }
}

TEST(RunRawTcp, ExchangeCompletesAt4KBAnd4MB) {
  static_assert(kSizes[0] < kDuplexFrom && kSizes[1] >= kDuplexFrom);
  for (int64_t bytes : kSizes) {
    ExpectCompletes(RawPattern::kExchange, bytes, 1);
    ExpectCompletes(RawPattern::kExchange, bytes, 2);
  }
}

TEST(RunRawTcp, ExchangeOfOddSizesAroundTheDuplexThreshold) {
  // Just below it (one thread) and just above (duplex, the request read as
  // a first chunk of 1 MB and the rest): every byte read each way.
  ExpectCompletes(RawPattern::kExchange, kDuplexFrom - 3, 1);
  ExpectCompletes(RawPattern::kExchange, kDuplexFrom + 3, 2);
}

TEST(RunRawTcp, NoWarmupStillTimesAnOp) {
  absl::StatusOr<OpTimings> t = RunRawTcp(RawPattern::kExchange, 4 << 20, 1, 0,
                                          absl::ZeroDuration());
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ops, 1);
}

TEST(RunRawTcp, RejectsBadArguments) {
  EXPECT_EQ(RunRawTcp(RawPattern::kSend, 0, 1, 1, absl::Milliseconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunRawTcp(RawPattern::kSend, 4096, 0, 1, absl::Milliseconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RunRawTcp(RawPattern::kSend, 4096, 1, -1, absl::Milliseconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
