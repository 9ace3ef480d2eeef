#include "common/mode.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(Mode, ParsesTheKnownNamesInAnyCase) {
  EXPECT_EQ(*ParseMode("sync"), Mode::kSync);
  EXPECT_EQ(*ParseMode("ASYNC"), Mode::kAsync);
  EXPECT_EQ(*ParseMode("Ssp"), Mode::kSsp);
  for (Mode m : AllModes()) EXPECT_EQ(*ParseMode(ModeName(m)), m);
}

TEST(Mode, RejectsUnknownNamesNamingTheKnownOnes) {
  absl::StatusOr<Mode> m = ParseMode("bsp");
  ASSERT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), AllOf(HasSubstr("'bsp'"), HasSubstr("sync, async, ssp")));
  EXPECT_FALSE(ParseMode("").ok());
}

TEST(Mode, CheckModeRejectsValuesOutsideTheEnum) {
  for (Mode m : AllModes()) EXPECT_TRUE(CheckMode(m).ok());
  absl::Status s = CheckMode(static_cast<Mode>(9));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("mode(9)"), HasSubstr("sync, async")));
}

}  // namespace
}  // namespace ps
