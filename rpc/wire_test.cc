#include "rpc/wire.h"

#include "common/mode.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(Wire, ModeRoundTrips) {
  for (Mode m : AllModes()) {
    absl::StatusOr<Mode> back = ModeFromProto(ModeToProto(m));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, m);
  }
  EXPECT_EQ(ModeToProto(static_cast<Mode>(9)), v1::MODE_UNSPECIFIED);
}

TEST(Wire, UnspecifiedOrUnknownModeIsAnError) {
  absl::StatusOr<Mode> m = ModeFromProto(v1::MODE_UNSPECIFIED);
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), AllOf(HasSubstr("MODE_UNSPECIFIED"), HasSubstr("sync, async")));
  m = ModeFromProto(static_cast<v1::Mode>(42));
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("42"));
}

}  // namespace
}  // namespace ps
