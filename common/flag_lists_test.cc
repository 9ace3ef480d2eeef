#include "common/flag_lists.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(ParsePositiveList, ReadsItemsIgnoringSpacesAndEmptyItems) {
  EXPECT_THAT(*ParsePositiveList("sizes", "4096, 1048576,,8"), ElementsAre(4096, 1048576, 8));
  EXPECT_THAT(*ParsePositiveIntList("hidden", "512,256"), ElementsAre(512, 256));
  EXPECT_THAT(*ParsePositiveList("sizes", ""), IsEmpty());
  EXPECT_THAT(*ParsePositiveList("sizes", " , "), IsEmpty());
}

TEST(ParsePositiveList, RejectsNonPositiveAndNonIntegersNamingFlagAndItem) {
  for (const char* bad : {"5,x", "5,0", "5,-3", "5,2.5", "5,99999999999999999999"}) {
    absl::StatusOr<std::vector<int64_t>> r = ParsePositiveList("hidden", bad);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr(std::string("--hidden=") + bad)) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("is not a positive integer")) << bad;
  }
}

TEST(ParsePositiveList, RejectsItemsAboveTheMaximum) {
  absl::StatusOr<std::vector<int64_t>> r = ParsePositiveList("dims", "10,11", 10);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("11 is larger than 10"));
  EXPECT_EQ(ParsePositiveIntList("hidden", "3000000000").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SecondsFromFlag, ConvertsSecondsAndRejectsNanNamingTheFlag) {
  EXPECT_EQ(*SecondsFromFlag("pull_timeout", 1.5), absl::Milliseconds(1500));
  EXPECT_EQ(*SecondsFromFlag("pull_timeout", -2), absl::Seconds(-2));
  EXPECT_EQ(*SecondsFromFlag("pull_timeout", HUGE_VAL), absl::InfiniteDuration());
  absl::StatusOr<absl::Duration> r = SecondsFromFlag("pull_timeout", std::nan(""));
  ASSERT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("--pull_timeout=nan is not a number of seconds"));
}

}  // namespace
}  // namespace ps
