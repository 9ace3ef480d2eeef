#include "common/testing/wait_until.h"

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(WaitUntil, ReturnsOnceTheConditionHolds) {
  int calls = 0;
  EXPECT_EQ(WaitUntil([&] { return ++calls == 3; }, absl::Seconds(30), "the third call",
                      absl::Milliseconds(1)),
            absl::OkStatus());
  EXPECT_EQ(calls, 3);
}

TEST(WaitUntil, NamesWhatItWaitedForWhenTheTimeRunsOut) {
  int calls = 0;
  const absl::Status s = WaitUntil(
      [&] {
        ++calls;
        return false;
      },
      absl::Milliseconds(30), "a condition that never holds", absl::Milliseconds(5));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message(), "gave up after 30ms waiting for a condition that never holds");
  EXPECT_GE(calls, 2);  // at the start and at the deadline at least
}

}  // namespace
}  // namespace ps
