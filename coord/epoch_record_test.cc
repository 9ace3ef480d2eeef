#include "coord/epoch_record.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(EpochRecord, FormatsAndParsesBack) {
  EpochRecord r;
  r.epoch = 7;
  r.first_step = 1404;
  r.workers = {0, 1, 3};
  EXPECT_EQ(r.Format(), "first_step=1404 workers=0,1,3");
  absl::StatusOr<EpochRecord> back = ParseEpochRecord(7, r.Format());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(back->RankOf(3), 2);
  EXPECT_EQ(back->RankOf(2), -1);
}

TEST(EpochRecord, RefusesMalformedText) {
  for (const char* text :
       {"", "first_step=1", "workers=0", "first_step=-1 workers=0", "first_step=x workers=0",
        "first_step=0 workers=", "first_step=0 workers=1,0", "first_step=0 workers=0,0",
        "first_step=0 workers=-2", "first_step=0 workers=0 extra"}) {
    absl::StatusOr<EpochRecord> r = ParseEpochRecord(3, text);
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << text;
    EXPECT_THAT(r.status().message(), HasSubstr("epoch 3")) << text;
  }
}

TEST(EpochRecord, KeysSortInEpochOrder) {
  EXPECT_EQ(EpochKey("demo", 12), "/ps/demo/epochs/0000000012");
  EXPECT_LT(EpochKey("demo", 9), EpochKey("demo", 10));
  EXPECT_EQ(EpochsPrefix("demo"), "/ps/demo/epochs/");
  absl::StatusOr<EpochRecord> r = ParseEpochRecord(0, "first_step=0 workers=4");
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->workers, ElementsAre(4));
}

}  // namespace
}  // namespace ps
