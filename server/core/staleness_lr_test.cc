#include "server/core/staleness_lr.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(StalenessLr, ParsesItsNamesAndNamesTheFlagOtherwise) {
  EXPECT_EQ(*ParseStalenessLr("none"), StalenessLr::kNone);
  EXPECT_EQ(*ParseStalenessLr("inverse"), StalenessLr::kInverse);
  EXPECT_EQ(StalenessLrName(StalenessLr::kInverse), "inverse");
  const absl::Status s = ParseStalenessLr("sqrt").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("--staleness_lr 'sqrt'"));
}

TEST(StalenessLr, InverseDividesAsyncRatesByOnePlusStaleness) {
  EXPECT_EQ(StalenessLrScale(StalenessLr::kInverse, Mode::kAsync, 0), 1.0);
  EXPECT_EQ(StalenessLrScale(StalenessLr::kInverse, Mode::kAsync, 1), 0.5);
  EXPECT_EQ(StalenessLrScale(StalenessLr::kInverse, Mode::kAsync, 3), 0.25);
}

TEST(StalenessLr, NoneAndSyncKeepTheRate) {
  EXPECT_EQ(StalenessLrScale(StalenessLr::kNone, Mode::kAsync, 5), 1.0);
  EXPECT_EQ(StalenessLrScale(StalenessLr::kInverse, Mode::kSync, 5), 1.0);
}

}  // namespace
}  // namespace ps
